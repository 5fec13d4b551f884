import { EventEmitter } from 'node:events';
import type { Tx } from './runs.js';
import { sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';

/**
 * Wake-ups for bounded long-polls (a runner waiting for its next command). In one process an
 * emitter is enough; with several manager replicas on one PostgreSQL, the store also relays
 * NOTIFY on channel `svc_wake`, so a command created on one replica wakes a poll on another.
 * Waiters re-read the database when woken: a wake-up carries no data and may be lost safely.
 */
export class Wakeups {
  readonly #emitter = new EventEmitter();
  #remote: ((key: string) => Promise<void>) | undefined;
  #released = false;
  /** While draining: when every wait ends (the end of the drain delay). */
  #releaseAt: number | undefined;
  #releaseTimer: NodeJS.Timeout | undefined;
  readonly #waiting = new Set<() => void>();

  constructor() {
    this.#emitter.setMaxListeners(0);
  }

  /** Set by the store when it can reach other replicas. */
  setRemote(publish: (key: string) => Promise<void>): void {
    this.#remote = publish;
  }

  /** Subscribe to every wake-up of `key`; returns the unsubscribe. */
  on(key: string, listener: () => void): () => void {
    this.#emitter.on(key, listener);
    return () => this.#emitter.off(key, listener);
  }

  /**
   * A wake-up sent from inside a transaction: NOTIFY is delivered when the transaction
   * commits, so a woken reader sees what it wrote, with no timer of its own. Both stores
   * listen on their own channel (PostgreSQL through the listener connection, the embedded
   * store on itself), so it reaches this process's waiters as well as other replicas'.
   */
  async publishIn(trx: Tx, key: string): Promise<void> {
    await wakeOnCommit(trx, key);
  }

  /**
   * Wake this process's waiters of `key` right after a transaction that sends that wake-up
   * on commit (NOTIFY) has committed: they need not wait for the NOTIFY to come back through
   * PostgreSQL. The NOTIFY still reaches the other replicas, and this one a moment later, as
   * a second wake-up; a waiter ends at its first one, so the echo only makes a poll that
   * began in between read once more (wake-ups carry no data).
   */
  committed(key: string): void {
    this.#emitter.emit(key);
  }

  /** Deliver a wake-up that came from another replica. */
  deliver(key: string): void {
    this.#emitter.emit(key);
  }

  async publish(key: string): Promise<void> {
    this.#emitter.emit(key);
    if (this.#remote) await this.#remote(key);
  }

  /**
   * End every wait now and every later one at once (a draining replica): long-polls return
   * their current page and the runners poll again, on another replica.
   */
  releaseAll(): void {
    clearTimeout(this.#releaseTimer);
    this.#released = true;
    for (const done of [...this.#waiting]) done();
  }

  /**
   * A draining replica: every wait ends at `at` (then as releaseAll), and a wait accepted
   * meanwhile is capped at the time left, so no long-poll or stream outlives the drain.
   */
  releaseAt(at: number): void {
    if (this.#released) return;
    this.#releaseAt = Math.min(at, this.#releaseAt ?? Infinity);
    clearTimeout(this.#releaseTimer);
    this.#releaseTimer = setTimeout(() => this.releaseAll(), Math.max(0, at - Date.now()));
    this.#releaseTimer.unref();
  }

  /**
   * Resolves on a wake-up for `key`, after `timeoutMs`, or on abort; never rejects. Subscribe
   * before reading the state waited on, so a change committed in between still wakes.
   */
  wait(key: string, timeoutMs: number, signal?: AbortSignal): Promise<WaitEnd> {
    if (this.#released) return Promise.resolve('released');
    // A drain ends the wait at its release point, as 'released' (the caller answers and ends).
    const capped = this.#releaseAt !== undefined && Date.now() + timeoutMs >= this.#releaseAt;
    return new Promise((resolve) => {
      const end = (why: WaitEnd) => () => {
        clearTimeout(timer);
        this.#emitter.off(key, woken);
        signal?.removeEventListener('abort', aborted);
        this.#waiting.delete(released);
        resolve(why);
      };
      const woken = end('woken');
      const aborted = end('aborted');
      const released = end('released');
      this.#waiting.add(released);
      const timer = capped
        ? setTimeout(end('released'), Math.max(0, this.#releaseAt! - Date.now()))
        : setTimeout(end('timeout'), timeoutMs);
      this.#emitter.on(key, woken);
      signal?.addEventListener('abort', aborted, { once: true });
    });
  }
}

/** Why a wait ended: a wake-up for its key, its time, its caller's abort, or a drain. */
export type WaitEnd = 'woken' | 'timeout' | 'aborted' | 'released';

export const WAKE_CHANNEL = 'svc_wake';

export const runWakeKey = (runId: string) => `run:${runId}`;

/** Wakes the scheduler: a task was requeued or cancelled, an attempt ended. */
export const QUEUE_WAKE_KEY = 'queue';

/** Wakes the scheduler's claims only: a task was submitted (nothing ended, nothing to settle). */
export const QUEUE_SUBMIT_KEY = 'queue:submitted';
/** New events of a run (clients long-polling or streaming them, result waits). */
export const eventsWakeKey = (runId: string) => `${EVENTS_WAKE_PREFIX}${runId}`;
/** The events wake-up's key before the run id (for SQL that knows the run only itself). */
export const EVENTS_WAKE_PREFIX = 'events:';

/**
 * A wake-up sent when the caller's transaction commits, never before: NOTIFY is transactional,
 * so a waiter woken by it always finds the new rows. Every replica's listener receives it,
 * this one's included (the embedded store listens on itself).
 */
export async function wakeOnCommit(trx: Kysely<Database>, key: string): Promise<void> {
  await sql`SELECT pg_notify(${WAKE_CHANNEL}, ${key})`.execute(trx);
}
