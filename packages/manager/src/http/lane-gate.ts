/**
 * The places of one lane of requests (runner calls, client calls) and the queue in front of
 * them. A request takes a place when one is free; otherwise it queues, first come first
 * served, when it can expect a place within the lane's queue-time budget (the queue ahead of
 * it times the mean time a place is held, over the places), and is refused at once when it
 * cannot. The decision is made on arrival: a refusal costs the manager next to nothing and
 * the caller no wait, and the queue never grows past what the places clear within the budget.
 */
export class LaneGate {
  #busy = 0;
  #queue: Array<(admitted: boolean) => void> = [];
  /** Mean time a place is held, in ms (moving average over the last few dozen requests). */
  #holdMs = 5;

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
  expectedWaitMs(): number {
    if (this.#busy < this.places && this.#queue.length === 0) return 0;
    return ((this.#queue.length + 1) * this.#holdMs) / this.places;
  }

  /**
   * true: a place now; false: refused; a promise: queued, resolving true when its place comes
   * (false if the gate closes first). Every place taken is given back with `leave`.
   */
  enter(): boolean | Promise<boolean> {
    if (this.#busy < this.places && this.#queue.length === 0) {
      this.#busy += 1;
      return true;
    }
    if (this.expectedWaitMs() > this.budgetMs) return false;
    return new Promise<boolean>((grant) => this.#queue.push(grant));
  }

  /** Give a place back; `heldMs` (when known) feeds the mean hold time. */
  leave(heldMs?: number): void {
    this.#busy -= 1;
    if (heldMs !== undefined) this.#holdMs += (heldMs - this.#holdMs) / 32;
    const next = this.#queue.shift();
    if (next) {
      this.#busy += 1;
      next(true);
    }
  }

  /** Refuse everyone still queued (the server is closing). */
  close(): void {
    for (const grant of this.#queue.splice(0)) grant(false);
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
