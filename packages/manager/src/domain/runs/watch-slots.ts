import { ServiceError } from '@svc/contracts';
import { clientWatches, openStreams, openWaits } from '../../metrics/registry.js';

export type WatchKind = 'long-poll' | 'stream';

/** What a refused client is told to wait before it tries again. */
export const WATCH_RETRY_AFTER_SECONDS = 2;

/**
 * Client watches (a long-poll with `waitMs`, an event stream) share one bound per process. A
 * waiting client holds no database connection, but each costs memory and a read on every
 * wake-up, and a burst of them queues its reads ahead of every other request: past the bound
 * a watch is refused at once (429 `capacity-exceeded`, `Retry-After`), before it reads
 * anything. Runner command polls are not client watches: they never take a slot here.
 */
export class WatchSlots {
  #open = 0;

  constructor(readonly max: number) {}

  get open(): number {
    return this.#open;
  }

  /** A slot for one watch, released by the returned function (once). */
  take(kind: WatchKind): () => void {
    if (this.#open >= this.max) {
      clientWatches.inc({ kind, outcome: 'refused' });
      throw new ServiceError(
        'capacity-exceeded',
        `this manager holds its limit of ${this.max} client long-polls and event streams; retry in ${WATCH_RETRY_AFTER_SECONDS} s`,
        { limit: this.max, retryAfterSeconds: WATCH_RETRY_AFTER_SECONDS },
      );
    }
    this.#open += 1;
    clientWatches.inc({ kind, outcome: 'accepted' });
    if (kind === 'stream') openStreams.inc();
    else openWaits.inc({ kind: 'client' });
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#open -= 1;
      if (kind === 'stream') openStreams.dec();
      else openWaits.dec({ kind: 'client' });
    };
  }
}
