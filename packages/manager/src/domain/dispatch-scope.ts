import { AsyncLocalStorage } from 'node:async_hooks';
import type { SessionVolume } from '../sessions/volumes.js';

/**
 * What one batch of dispatches may take as known instead of asking the Kubernetes API again:
 * the outcome of a provider profile check (asked once per batch, not three times per attempt)
 * and the claims the batch itself created (a claim made a moment ago is not read back five
 * times). Outside a scope every check reads, as before. A scope lives for one scheduler batch
 * or one manual dispatch, so a claim deleted is seen by the next one, and a profile removed
 * by the next manual dispatch (by the scheduler's batches within a second, see UsableProfiles).
 */
export class DispatchScope {
  readonly #profiles = new Map<string, Promise<void>>();
  readonly #claims = new Map<string, SessionVolume>();
  readonly #runSessions = new Map<string, string>();

  /** `usable`: profiles a recent scope found usable (the scheduler's batches share one). */
  constructor(private readonly usable?: UsableProfiles) {}

  profileChecked(profile: string, check: () => Promise<void>): Promise<void> {
    let known = this.#profiles.get(profile);
    if (!known) {
      known = this.usable?.fresh(profile) ? Promise.resolve() : check();
      this.#profiles.set(profile, known);
      // A refusal is the answer for the whole scope; no unhandled rejection if nobody waits.
      known.then(
        () => this.usable?.found(profile),
        () => undefined,
      );
    }
    return known;
  }

  trustClaim(sessionId: string, volume: SessionVolume): void {
    this.#claims.set(sessionId, volume);
  }

  claim(sessionId: string): SessionVolume | undefined {
    return this.#claims.get(sessionId);
  }

  /** A run this scope created on a session it created: its storage checks need no read. */
  noteRun(runId: string, sessionId: string): void {
    if (this.#claims.has(sessionId)) this.#runSessions.set(runId, sessionId);
  }

  sessionOfRun(runId: string): string | undefined {
    return this.#runSessions.get(runId);
  }
}

/**
 * Profiles found usable, remembered for `ttlMs`: back-to-back scheduler batches (one per
 * submitted task when the queue is short) ask the Secret store once per interval, not once
 * per batch. A refusal is never remembered, and a profile removed is seen within `ttlMs`.
 */
export class UsableProfiles {
  readonly #until = new Map<string, number>();

  constructor(private readonly ttlMs: number) {}

  fresh(profile: string): boolean {
    return (this.#until.get(profile) ?? 0) > Date.now();
  }

  found(profile: string): void {
    this.#until.set(profile, Date.now() + this.ttlMs);
  }
}

const storage = new AsyncLocalStorage<DispatchScope>();

/** Run `fn` (and everything it awaits) inside `scope`, a fresh one unless given. */
export function inDispatchScope<T>(
  fn: () => Promise<T>,
  scope: DispatchScope = new DispatchScope(),
): Promise<T> {
  return storage.run(scope, fn);
}

export const dispatchScope = (): DispatchScope | undefined => storage.getStore();

/** The profile check, once per scope; every call outside a scope checks. */
export function checkProfileOnce(profile: string, check: () => Promise<void>): Promise<void> {
  const scope = dispatchScope();
  return scope ? scope.profileChecked(profile, check) : check();
}

/** The session of a run this scope created on its own claim, or undefined. */
export const trustedRunSession = (runId: string): string | undefined =>
  dispatchScope()?.sessionOfRun(runId);

/** A claim this scope created, or undefined (then the caller reads it). */
export const trustedClaim = (sessionId: string): SessionVolume | undefined =>
  dispatchScope()?.claim(sessionId);
