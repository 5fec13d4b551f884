import type { EventInput } from '@svc/contracts';
import type { ManagerClient } from './manager-client.js';

export type NewRunnerEvent = Omit<EventInput, 'key'>;

const LINGER_MS = 15;
const MAX_BATCH = 500;

/**
 * The runner's ordered, at-least-once event pipeline. Each event gets a key unique to this
 * attempt (`<attempt>:<n>`), so a batch retried after a lost response is de-duplicated by the
 * manager. One batch is in flight at a time, which keeps seq order equal to push order; the
 * agent never waits for the manager (events queue while a batch is in flight).
 */
export class EventSink {
  #queue: EventInput[] = [];
  #counter = 0;
  #inflight: Promise<void> | null = null;
  #timer: NodeJS.Timeout | null = null;
  #failure: Error | null = null;

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
    if (this.#queue.length >= MAX_BATCH) void this.#drain();
    else this.#timer ??= setTimeout(() => void this.#drain(), LINGER_MS);
  }

  /** Resolves when everything pushed so far is stored; throws if the manager refused a batch. */
  async flush(): Promise<void> {
    while (this.#queue.length > 0 || this.#inflight) {
      await this.#drain();
      if (this.#inflight) await this.#inflight;
    }
    if (this.#failure) throw this.#failure;
  }

  #drain(): Promise<void> {
    if (this.#timer) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    if (this.#inflight) return this.#inflight;
    if (this.#queue.length === 0) return Promise.resolve();
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
        if (this.#queue.length > 0) void this.#drain();
      });
    return this.#inflight;
  }
}
