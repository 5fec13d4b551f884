/**
 * A piece of work run on demand, one run at a time: a kick during a run asks for one more run
 * right after it (kicks coalesce), never a second run alongside.
 */
export class Serial {
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;

  constructor(
    /** `repeat`: this run was asked for by a kick during the previous one. */
    private readonly work: (repeat: boolean) => Promise<void>,
    private readonly onError: (error: unknown) => void,
  ) {}

  kick(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.#loop().finally(() => (this.#running = undefined));
  }

  async #loop(): Promise<void> {
    let repeat = false;
    do {
      this.#again = false;
      try {
        await this.work(repeat);
      } catch (error) {
        this.onError(error);
      }
      repeat = true;
    } while (this.#again && !this.#stopped);
  }

  /** No more runs; resolves once the one in progress (if any) has ended. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#running;
  }
}
