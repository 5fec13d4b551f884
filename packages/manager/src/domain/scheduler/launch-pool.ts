/**
 * Launches of claimed attempts, at most `limit` at a time, outside the scheduler pass: the pass
 * claims the next batch (or a task just submitted) while earlier launches are still talking to
 * the cluster. Backpressure keeps at most one batch claimed and not yet started, as when the
 * pass launched each batch itself.
 */
export class LaunchPool {
  readonly #queue: Array<() => Promise<void>> = [];
  #active = 0;
  #waiters: Array<() => void> = [];

  constructor(private readonly limit: number) {}

  /** Run `launch` when a place is free; the promise settles with it. */
  add<T>(launch: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#queue.push(() => launch().then(resolve, reject));
      this.#pump();
    });
  }

  /** Resolves once every launch handed over has started. */
  started(): Promise<void> {
    return this.#until(() => this.#queue.length === 0);
  }

  /** Resolves once every launch handed over has finished. */
  idle(): Promise<void> {
    return this.#until(() => this.#queue.length === 0 && this.#active === 0);
  }

  #until(done: () => boolean): Promise<void> {
    if (done()) return Promise.resolve();
    return new Promise((resolve) => {
      const check = () => {
        if (done()) resolve();
        else this.#waiters.push(check);
      };
      this.#waiters.push(check);
    });
  }

  #pump(): void {
    while (this.#active < this.limit && this.#queue.length > 0) {
      const launch = this.#queue.shift()!;
      this.#active++;
      void launch().finally(() => {
        this.#active--;
        this.#pump();
        this.#notify();
      });
    }
    this.#notify();
  }

  #notify(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const check of waiters) check();
  }
}
