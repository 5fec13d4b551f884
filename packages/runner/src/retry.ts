import { ApiError, UnreachableError } from '@svc/contracts';

/**
 * The one retry policy of the runner's calls to the manager. Every runner call is idempotent
 * (event keys, a status reported twice answers the current state), so a call is tried again
 * when the manager could not answer it: refused for load (503 `overloaded`, 429, with their
 * `Retry-After`), any other 5xx, a timeout, or no connection at all (refused, reset: a manager
 * restarting). Waits grow exponentially with full jitter (a random wait between 0 and the
 * bound), so a fleet refused together does not come back together; a `Retry-After` is the
 * least wait. Lease renewals and claims have their own short timeouts and waits: a renewal
 * that waits out a busy manager's full backoff would let the lease lapse.
 */
export type CallKind = 'lease' | 'events' | 'poll' | 'control';

export interface Backoff {
  /** The first wait's bound, doubled per attempt up to `maxMs`. */
  baseMs: number;
  maxMs: number;
  /** One attempt's timeout (a long-poll adds its wait). */
  timeoutMs: number;
  /** Stop trying once this long has passed since the first attempt. */
  giveUpAfterMs: number;
}

export const BACKOFF: Record<CallKind, Backoff> = {
  lease: { baseMs: 100, maxMs: 2_000, timeoutMs: 5_000, giveUpAfterMs: 60_000 },
  events: { baseMs: 250, maxMs: 15_000, timeoutMs: 30_000, giveUpAfterMs: 10 * 60_000 },
  poll: { baseMs: 250, maxMs: 15_000, timeoutMs: 15_000, giveUpAfterMs: 10 * 60_000 },
  control: { baseMs: 250, maxMs: 15_000, timeoutMs: 30_000, giveUpAfterMs: 10 * 60_000 },
};

/** Why a call may be tried again. */
export type RetryReason = 'overloaded' | 'server-error' | 'timeout' | 'unreachable';

/** Whether a failed call may be tried again, why, and the wait the manager asked for. */
export function retryable(
  error: unknown,
): { reason: RetryReason; retryAfterMs: number | null } | null {
  if (error instanceof ApiError) {
    if (error.status === 503 || error.status === 429)
      return { reason: 'overloaded', retryAfterMs: error.retryAfterMs };
    if (error.status >= 500) return { reason: 'server-error', retryAfterMs: error.retryAfterMs };
    return null;
  }
  if (error instanceof UnreachableError) {
    const cause = error.cause as { name?: unknown } | undefined;
    return {
      reason: cause?.name === 'TimeoutError' ? 'timeout' : 'unreachable',
      retryAfterMs: null,
    };
  }
  return null;
}

/** The wait before attempt `attempt + 1` (attempt counts from 1), full jitter over the bound. */
export function backoffMs(
  policy: Backoff,
  attempt: number,
  retryAfter: number | null,
  random: () => number = Math.random,
): number {
  const bound = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.max(0, attempt - 1));
  const jittered = random() * bound;
  // Asked to wait: at least that long, plus jitter so the refused do not return at once.
  return retryAfter === null ? jittered : retryAfter + random() * Math.max(retryAfter, bound);
}

/** A retry about to happen, as the throttling log records it. */
export interface RetryNote {
  kind: CallKind;
  reason: RetryReason;
  attempt: number;
  waitMs: number;
}

export interface RetryHooks {
  signal?: AbortSignal;
  /** Told before each wait. */
  onRetry?(note: RetryNote): void;
  /** Told when a call succeeds after at least one retry. */
  onRecovered?(kind: CallKind): void;
}

/**
 * `call` (given its attempt's timeout) until it succeeds, fails for good, or the policy gives
 * up: the last error is thrown then.
 */
export async function withRetry<T>(
  kind: CallKind,
  call: (timeoutMs: number) => Promise<T>,
  hooks: RetryHooks = {},
  policy: Backoff = BACKOFF[kind],
): Promise<T> {
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      const result = await call(policy.timeoutMs);
      if (attempt > 1) hooks.onRecovered?.(kind);
      return result;
    } catch (error) {
      const why = retryable(error);
      if (!why || hooks.signal?.aborted) throw error;
      const waitMs = backoffMs(policy, attempt, why.retryAfterMs);
      if (Date.now() + waitMs - started > policy.giveUpAfterMs) throw error;
      hooks.onRetry?.({ kind, reason: why.reason, attempt, waitMs });
      await sleep(waitMs, hooks.signal);
      if (hooks.signal?.aborted) throw error;
    }
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
