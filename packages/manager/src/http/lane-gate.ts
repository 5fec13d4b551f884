/**
 * The places of one lane of requests (runner calls, client calls) and the queue in front of
 * them. A request takes a place when one is free; otherwise it queues, first come first
 * served, for at most the lane's queue-time budget. It is refused at once when it could not
 * get a place within the budget anyway: the queue ahead of it, times the mean time a place is
 * held, over the places, is past the budget, or the queue's head has already waited that
 * long, or every place has been taken that long with none coming free (places held by
 * requests that are stuck teach the mean nothing until they end). A queued request whose
 * budget runs out is refused then. A refusal costs the manager next to nothing and the caller
 * no wait; the queue never grows past what the places clear in time.
 */
export class LaneGate {
  #busy = 0;
  #queue: Array<{ since: number; grant: (admitted: boolean) => void }> = [];
  #timer: NodeJS.Timeout | null = null;
  /** Mean time a place is held, in ms (moving average over the last few dozen requests). */
  #holdMs = 5;
  /** Since when every place has been taken with none coming free (the last place taken). */
  #fullSince = performance.now();

  constructor(
    readonly places: number,
    readonly budgetMs: number,
  ) {}

  get busy(): number {
    return this.#busy;
  }

  get queued(): number {
    return this.#queue.length;
  }

  /** The expected wait of a newcomer, in ms. */
  expectedWaitMs(now = performance.now()): number {
    if (this.#busy < this.places && this.#queue.length === 0) return 0;
    const predicted = ((this.#queue.length + 1) * this.#holdMs) / this.places;
    const head = this.#queue[0];
    const stalled = this.#busy >= this.places ? now - this.#fullSince : 0;
    return Math.max(predicted, head ? now - head.since : 0, stalled);
  }

  /**
   * true: a place now; false: refused now; a promise: queued, resolving true when its place
   * comes, false when its budget ran out first (or the gate closed). Every place taken is
   * given back with `leave`.
   */
  enter(): boolean | Promise<boolean> {
    if (this.#busy < this.places && this.#queue.length === 0) {
      this.#busy += 1;
      if (this.#busy === this.places) this.#fullSince = performance.now();
      return true;
    }
    const now = performance.now();
    if (this.expectedWaitMs(now) > this.budgetMs) return false;
    return new Promise<boolean>((grant) => {
      this.#queue.push({ since: now, grant });
      this.#arm();
    });
  }

  /** Give a place back; `heldMs` (when known) feeds the mean hold time. */
  leave(heldMs?: number): void {
    this.#busy -= 1;
    this.#fullSince = performance.now();
    if (heldMs !== undefined) this.#holdMs += (heldMs - this.#holdMs) / 32;
    const next = this.#queue.shift();
    if (next) {
      this.#busy += 1;
      next.grant(true);
    }
  }

  /** One timer, for the queue's head (the oldest, so the first to run out of budget). */
  #arm(): void {
    if (this.#timer || this.#queue.length === 0) return;
    const wait = Math.max(0, this.#queue[0]!.since + this.budgetMs - performance.now());
    this.#timer = setTimeout(() => {
      this.#timer = null;
      const limit = performance.now() - this.budgetMs;
      while (this.#queue.length > 0 && this.#queue[0]!.since <= limit)
        this.#queue.shift()!.grant(false);
      this.#arm();
    }, Math.ceil(wait));
    this.#timer.unref();
  }

  /** Refuse everyone still queued (the server is closing). */
  close(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    for (const waiter of this.#queue.splice(0)) waiter.grant(false);
  }
}

/**
 * When a refused caller should come back: the lane's refusals over its admissions in the last
 * second or two, in whole seconds, from 1 to 10. A lane that refuses five calls for each one
 * it serves asks for five seconds: the refused then come back spread over that long (clients
 * add their own jitter) instead of every second, so refusing stays a small part of the work.
 */
export class RetryAfter {
  #admitted = [0, 0];
  #refused = [0, 0];
  #second = 0;

  admitted(now = performance.now()): void {
    this.#roll(now);
    this.#admitted[1]! += 1;
  }

  /** Counts a refusal and answers its Retry-After, in seconds. */
  refused(now = performance.now()): number {
    this.#roll(now);
    this.#refused[1]! += 1;
    const admitted = this.#admitted[0]! + this.#admitted[1]!;
    const refused = this.#refused[0]! + this.#refused[1]!;
    return Math.min(10, Math.max(1, Math.ceil(refused / Math.max(1, admitted))));
  }

  #roll(now: number): void {
    const second = Math.floor(now / 1000);
    if (second === this.#second) return;
    const keep = second === this.#second + 1;
    this.#admitted = [keep ? this.#admitted[1]! : 0, 0];
    this.#refused = [keep ? this.#refused[1]! : 0, 0];
    this.#second = second;
  }
}

/**
 * How late this process's timers fire: when the event loop itself is behind, a request has
 * waited that long before any hook saw it, so the gates' own queues say nothing. Only a lag
 * that lasts counts (every one of the last few ticks late): a single pause (a collection, a
 * large synchronous parse, the start of the process) is over before shedding could help.
 */
export class LoopLag {
  #recent: number[] = [];
  #last = 0;
  #timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly intervalMs = 10,
    private readonly ticks = 4,
  ) {}

  /** The smallest lag of the last few ticks, in ms. */
  get lagMs(): number {
    return this.#recent.length < this.ticks ? 0 : Math.min(...this.#recent);
  }

  start(): void {
    this.#last = performance.now();
    this.#timer = setInterval(() => {
      const now = performance.now();
      this.#recent.push(Math.max(0, now - this.#last - this.intervalMs));
      if (this.#recent.length > this.ticks) this.#recent.shift();
      this.#last = now;
    }, this.intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }
}
