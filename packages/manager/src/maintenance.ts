import type { Logger } from './logging.js';

export interface MaintenanceTask {
  name: string;
  run(): Promise<unknown>;
}

/**
 * Periodic housekeeping (command expiry, session garbage collection, launcher reconciliation).
 * Each task runs in turn; one failing is logged and does not stop the others. Safe with many
 * replicas: every task is a conditional update.
 */
export class Maintenance {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  readonly #tasks: MaintenanceTask[] = [];

  constructor(
    private readonly intervalMs: number,
    private readonly logger: Logger,
  ) {}

  add(task: MaintenanceTask): void {
    this.#tasks.push(task);
  }

  start(): void {
    this.#timer = setInterval(() => {
      if (!this.#running) this.#running = this.runOnce().finally(() => (this.#running = undefined));
    }, this.intervalMs);
    this.#timer.unref();
  }

  async runOnce(): Promise<void> {
    for (const task of this.#tasks) {
      try {
        await task.run();
      } catch (error) {
        this.logger.warn(
          { task: task.name, err: error instanceof Error ? error.message : String(error) },
          'maintenance task failed',
        );
      }
    }
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    await this.#running;
  }
}
