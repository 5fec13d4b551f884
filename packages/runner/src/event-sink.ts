import { MAX_EVENTS_PER_APPEND, type EventInput } from '@svc/contracts';
import type { ManagerClient } from './manager-client.js';

export type NewRunnerEvent = Omit<EventInput, 'key'>;

const LINGER_MS = 15;
const MAX_BATCH = 500;

/**
 * The runner's ordered, at-least-once event pipeline. Each event gets a key unique to this
 * attempt (`<attempt>:<n>`), so a batch retried after a lost response is de-duplicated by the
 * manager. One request carrying events is out at a time, which keeps seq order equal to push
 * order; the agent never waits for the manager (events queue while a batch is in flight).
 */
export class EventSink {
  #queue: EventInput[] = [];
  #counter = 0;
  #inflight: Promise<void> | null = null;
  #timer: NodeJS.Timeout | null = null;
  #failure: Error | null = null;
  /** Set while a carrier (see `carry`) holds the pipeline: no batch is sent meanwhile. */
  #held: Promise<void> | null = null;

  constructor(
    private readonly client: ManagerClient,
    private readonly runnerId: string,
    private readonly keyPrefix: string,
  ) {}

  push(event: NewRunnerEvent): void {
    this.#queue.push({
      ...event,
      key: `${this.keyPrefix}:${++this.#counter}`,
      observedAt: event.observedAt ?? new Date().toISOString(),
    });
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
      return await send(this.#queue.splice(0));
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
    const batch = this.#queue.splice(0, MAX_BATCH);
    this.#inflight = this.client
      .append(this.runnerId, batch)
      .then(
        () => undefined,
        (error: unknown) => {
          // Retries are exhausted or the lease was lost: keep the first error for flush().
          this.#failure ??= error instanceof Error ? error : new Error(String(error));
        },
      )
      .finally(() => {
        this.#inflight = null;
        if (this.#queue.length > 0 && !this.#held) void this.#drain();
      });
    return this.#inflight;
  }
}
