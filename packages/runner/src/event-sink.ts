import { EVENT_NAMES, MAX_EVENTS_PER_APPEND, toError, type EventInput } from '@svc/contracts';
import type { ManagerClient } from './manager-client.js';
import { BACKOFF, backoffMs, retryable, sleep } from './retry.js';
import type { ThrottledPeriod } from './throttling.js';

export type NewRunnerEvent = Omit<EventInput, 'key'>;

const LINGER_MS = 15;
const MAX_BATCH = 500;
/**
 * The buffer's bound: past either, the sink asks the producer to pause (`onPressure(true)`)
 * until it is down to half (`onPressure(false)`). Events are never dropped.
 */
export const SINK_MAX_EVENTS = 10_000;
export const SINK_MAX_BYTES = 16 * 1024 * 1024;

interface Queued {
  event: EventInput;
  bytes: number;
}

/**
 * The runner's ordered, exactly-once event pipeline. Each event gets a key unique to this
 * attempt (`<attempt>:<n>`), so a batch sent again after a lost answer is de-duplicated by
 * the manager. One request carrying events is out at a time, which keeps seq order equal to
 * push order; the agent never waits for the manager (events queue while a batch is in flight).
 *
 * When the manager cannot take a batch (refused for load, 5xx, timeout, no connection) the
 * events stay at the head of the buffer and go again after a backoff with full jitter (at
 * least the Retry-After), re-batched with what came meanwhile, so a throttled runner sends
 * fewer, larger batches. The period is reported as a `runner.throttled` system event once
 * calls go through again. A batch the manager refuses for good (lease lost, invalid) is
 * dropped and the first such error is thrown by `flush`.
 */
export class EventSink {
  #queue: Queued[] = [];
  #bytes = 0;
  #counter = 0;
  #inflight: Promise<void> | null = null;
  #timer: NodeJS.Timeout | null = null;
  #failure: Error | null = null;
  /** Set while a carrier (see `carry`) holds the pipeline: no batch is sent meanwhile. */
  #held: Promise<void> | null = null;
  #pressure = false;
  #pressureSince = 0;
  #pausedMs = 0;
  #bufferedMax = 0;
  #onPressure: ((full: boolean) => void) | null = null;

  constructor(
    private readonly client: ManagerClient,
    private readonly runnerId: string,
    private readonly keyPrefix: string,
  ) {
    client.throttling.onRecovered((period) => this.#reportThrottled(period));
  }

  /** Events buffered and not yet stored. */
  get buffered(): number {
    return this.#queue.length;
  }

  /** Told when the buffer passes its bound (pause producing) and when it has room again. */
  onPressure(listener: (full: boolean) => void): void {
    this.#onPressure = listener;
  }

  push(event: NewRunnerEvent): void {
    const full: EventInput = {
      ...event,
      key: `${this.keyPrefix}:${++this.#counter}`,
      observedAt: event.observedAt ?? new Date().toISOString(),
    };
    const bytes = JSON.stringify(full).length;
    this.#queue.push({ event: full, bytes });
    this.#bytes += bytes;
    this.#bufferedMax = Math.max(this.#bufferedMax, this.#queue.length);
    if (!this.#pressure && (this.#queue.length > SINK_MAX_EVENTS || this.#bytes > SINK_MAX_BYTES))
      this.#setPressure(true);
    if (this.#held) return; // sent when the carrier is done
    if (this.#queue.length >= MAX_BATCH) void this.#drain();
    else this.#timer ??= setTimeout(() => void this.#drain(), LINGER_MS);
  }

  /** Resolves when everything pushed so far is stored; throws if the manager refused a batch. */
  async flush(): Promise<void> {
    for (;;) {
      if (this.#held) await this.#held;
      else if (this.#inflight) await this.#inflight;
      else if (this.#queue.length > 0) await this.#drain();
      else break;
    }
    if (this.#failure) throw this.#failure;
  }

  /**
   * Hand everything pushed so far to `send`, one request that stores it with something else
   * (a command's terminal status), at once rather than after the batch timer. Earlier batches
   * are stored first and none leaves while `send` is out, so seq order stays push order; more
   * than one request may carry goes by append first.
   */
  async carry<T>(send: (events: EventInput[]) => Promise<T>): Promise<T> {
    while (this.#held) await this.#held;
    let release!: () => void;
    this.#held = new Promise<void>((r) => (release = r));
    try {
      this.#clearTimer();
      for (;;) {
        if (this.#inflight) await this.#inflight;
        else if (this.#queue.length > MAX_EVENTS_PER_APPEND) await this.#drain(true);
        else break;
      }
      return await send(this.#take(this.#queue.length).map((q) => q.event));
    } finally {
      this.#held = null;
      release();
      if (this.#queue.length > 0) void this.#drain();
    }
  }

  #clearTimer(): void {
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
  }

  #drain(byCarrier = false): Promise<void> {
    this.#clearTimer();
    if (this.#inflight) return this.#inflight;
    if (this.#queue.length === 0 || (this.#held && !byCarrier)) return Promise.resolve();
    this.#inflight = this.#send(byCarrier).finally(() => {
      this.#inflight = null;
      if (this.#queue.length > 0 && !this.#held) void this.#drain();
    });
    return this.#inflight;
  }

  /**
   * Batches from the head of the buffer until it is empty (a carrier's: until what is left
   * fits its request). A batch leaves the buffer once stored, or once refused for good.
   */
  async #send(byCarrier: boolean): Promise<void> {
    let attempt = 0;
    let since = 0;
    // A carrier taking over stops the plain batches: what is left rides with its request.
    while (
      this.#queue.length > (byCarrier ? MAX_EVENTS_PER_APPEND : 0) &&
      (byCarrier || !this.#held)
    ) {
      const batch = this.#queue.slice(0, MAX_BATCH).map((q) => q.event);
      try {
        await this.client.appendOnce(this.runnerId, batch);
        this.#take(batch.length);
        if (attempt > 0) this.client.throttling.recovered();
        attempt = 0;
        since = 0;
      } catch (error) {
        const why = retryable(error);
        since ||= Date.now();
        attempt += 1;
        const waitMs = why ? backoffMs(BACKOFF.events, attempt, why.retryAfterMs) : 0;
        if (!why || Date.now() + waitMs - since > BACKOFF.events.giveUpAfterMs) {
          // Refused for good (the lease was lost, the run ended) or given up: keep the first error.
          this.#failure ??= toError(error);
          this.#take(batch.length);
          attempt = 0;
          since = 0;
          continue;
        }
        this.client.throttling.note({ kind: 'events', reason: why.reason, attempt, waitMs });
        await sleep(waitMs);
      }
    }
  }

  #take(count: number): Queued[] {
    const taken = this.#queue.splice(0, count);
    for (const q of taken) this.#bytes -= q.bytes;
    if (
      this.#pressure &&
      this.#queue.length <= SINK_MAX_EVENTS / 2 &&
      this.#bytes <= SINK_MAX_BYTES / 2
    )
      this.#setPressure(false);
    return taken;
  }

  #setPressure(full: boolean): void {
    this.#pressure = full;
    if (full) this.#pressureSince = Date.now();
    else this.#pausedMs += Date.now() - this.#pressureSince;
    this.#onPressure?.(full);
  }

  /** The run's own record of a throttled period, sent with the next batch. */
  #reportThrottled(period: ThrottledPeriod): void {
    this.push({
      category: 'system',
      name: EVENT_NAMES.throttled,
      data: {
        ...period,
        bufferedEventsMax: this.#bufferedMax,
        producerPausedMs: this.#pausedMs,
      },
    });
    this.#bufferedMax = this.#queue.length;
    this.#pausedMs = 0;
  }
}
