import type { CallKind, RetryNote, RetryReason } from './retry.js';

/** One stretch of time in which the manager did not answer the runner's calls at once. */
export interface ThrottledPeriod {
  since: string;
  until: string;
  durationMs: number;
  /** Retries by why: refused for load (503/429), other 5xx, timeouts, no connection. */
  reasons: Record<RetryReason, number>;
  /** Retries by the call they repeated. */
  calls: Record<CallKind, number>;
  /** Summed waits before those retries. */
  waitedMs: number;
}

/**
 * The runner's record of being throttled: every retry of a call to the manager is noted, and
 * when a call goes through again the period is closed and handed to the listener (the event
 * sink, which reports it as a `runner.throttled` event of the run).
 */
export class ThrottleLog {
  #open: {
    since: number;
    reasons: Record<RetryReason, number>;
    calls: Record<CallKind, number>;
    waitedMs: number;
  } | null = null;
  #listener: ((period: ThrottledPeriod) => void) | null = null;
  /** Periods closed before anyone listened (while registering and claiming). */
  #undelivered: ThrottledPeriod[] = [];

  get throttled(): boolean {
    return this.#open !== null;
  }

  onRecovered(listener: (period: ThrottledPeriod) => void): void {
    this.#listener = listener;
    for (const period of this.#undelivered.splice(0)) listener(period);
  }

  note(retry: RetryNote): void {
    this.#open ??= {
      since: Date.now(),
      reasons: { overloaded: 0, 'server-error': 0, timeout: 0, unreachable: 0 },
      calls: { lease: 0, events: 0, poll: 0, control: 0 },
      waitedMs: 0,
    };
    this.#open.reasons[retry.reason] += 1;
    this.#open.calls[retry.kind] += 1;
    this.#open.waitedMs += Math.round(retry.waitMs);
  }

  /** A call went through after retries: the period (if one is open) ends now. */
  recovered(): void {
    const open = this.#open;
    if (!open) return;
    this.#open = null;
    const until = Date.now();
    const period: ThrottledPeriod = {
      since: new Date(open.since).toISOString(),
      until: new Date(until).toISOString(),
      durationMs: until - open.since,
      reasons: open.reasons,
      calls: open.calls,
      waitedMs: open.waitedMs,
    };
    if (this.#listener) this.#listener(period);
    else if (this.#undelivered.length < 8) this.#undelivered.push(period);
  }
}
