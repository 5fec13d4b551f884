/**
 * Group commit for one kind of write. Calls that arrive while earlier groups are in flight
 * wait, and go out together as the next group: one statement and one commit for all of them.
 * With a free place a call goes out at once (there is no window to wait out), so a quiet
 * manager adds no latency; under load the groups grow by themselves, up to their limits.
 *
 * A key (the run) is in at most one group in flight, once: a second call of the same run waits
 * for a later group, after the first, so each run's calls keep their order. A group that fails
 * as a whole (an error, not a per-item refusal) is sent again item by item, so one bad item
 * fails only its own caller.
 *
 * A group statement that skips locked rows (`skipsLocked`) may leave an item out as `BUSY`
 * (its row is locked by another transaction, which the group does not wait for: a group
 * waiting on one row would hold every other row it locked, and chain other writers behind
 * it). The item comes back in a later group after a short pause, until its row is free; such
 * a coalescer sends even a group of one as a group, so nothing in it ever waits for a lock. A
 * retry may overtake a later call of the same key: only for writes whose order does not matter.
 */

/** The outcome of an item its group left out because its row was locked: try again later. */
export const BUSY: unique symbol = Symbol('busy');
export interface CoalescerOptions<I, O> {
  /** Groups in flight at once (each holds a connection while it runs). */
  concurrency: number;
  /** Items per group at most. */
  maxItems: number;
  /** Summed weight (events) per group at most; a single item may exceed it alone. */
  maxWeight: number;
  weight(item: I): number;
  key(item: I): string;
  /** One statement for the group; an outcome per item, in order. */
  group(items: readonly I[]): Promise<(O | typeof BUSY)[]>;
  /** The group statement skips locked rows (answering `BUSY`): it is used for every group. */
  skipsLocked?: boolean;
  /** The same for one item alone (a group of one, and the retry of a failed group). */
  single(item: I): Promise<O>;
  /** Told each group's size as it leaves (metrics). */
  onGroup?(size: number): void;
}

interface Entry<I, O> {
  item: I;
  key: string;
  resolve(value: O): void;
  reject(error: unknown): void;
  /** How often a group left it out as busy. */
  busyTimes?: number;
}

export class Coalescer<I, O> {
  #pending: Entry<I, O>[] = [];
  #inFlight = 0;
  readonly #flying = new Set<string>();

  constructor(private readonly options: CoalescerOptions<I, O>) {}

  /** Calls waiting for a group (not yet sent). */
  get waiting(): number {
    return this.#pending.length;
  }

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#pending.push({ item, key: this.options.key(item), resolve, reject });
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#inFlight < this.options.concurrency && this.#pending.length > 0) {
      const group = this.#take();
      if (group.length === 0) return; // every waiting run has a group in flight
      this.#inFlight += 1;
      for (const entry of group) this.#flying.add(entry.key);
      this.options.onGroup?.(group.length);
      void this.#send(group).finally(() => {
        this.#inFlight -= 1;
        for (const entry of group) this.#flying.delete(entry.key);
        this.#pump();
      });
    }
  }

  /** The next group, in arrival order, skipping runs already in flight or already taken. */
  #take(): Entry<I, O>[] {
    const taken: Entry<I, O>[] = [];
    const keys = new Set<string>();
    const left: Entry<I, O>[] = [];
    let weight = 0;
    for (const entry of this.#pending) {
      const full =
        taken.length >= this.options.maxItems ||
        (taken.length > 0 && weight + this.options.weight(entry.item) > this.options.maxWeight);
      if (full || this.#flying.has(entry.key) || keys.has(entry.key)) {
        left.push(entry);
        continue;
      }
      taken.push(entry);
      keys.add(entry.key);
      weight += this.options.weight(entry.item);
    }
    this.#pending = left;
    return taken;
  }

  async #send(group: Entry<I, O>[]): Promise<void> {
    if (group.length === 1 && !this.options.skipsLocked) return this.#alone(group[0]!);
    let outcomes: (O | typeof BUSY)[];
    try {
      outcomes = await this.options.group(group.map((e) => e.item));
    } catch {
      // Which item failed is unknown: each goes alone, and only a failing one is refused.
      await Promise.all(group.map((entry) => this.#alone(entry)));
      return;
    }
    group.forEach((entry, i) => {
      const outcome = outcomes[i]!;
      if (outcome !== BUSY) return entry.resolve(outcome);
      entry.busyTimes = (entry.busyTimes ?? 0) + 1;
      setTimeout(
        () => {
          this.#pending.unshift(entry);
          this.#pump();
        },
        Math.min(50, 5 * entry.busyTimes),
      );
    });
  }

  async #alone(entry: Entry<I, O>): Promise<void> {
    try {
      entry.resolve(await this.options.single(entry.item));
    } catch (error) {
      entry.reject(error);
    }
  }
}
