import type { SchedulerSettings } from '../../config.js';
import type { Logger } from '../../logging.js';
import { QUEUE_WAKE_KEY } from '../../store/wakeups.js';
import type { Ctx } from '../context.js';
import { inDispatchScope } from '../dispatch-scope.js';
import type { QueueDeps } from '../queue/launch.js';
import { claimBatch, startClaimed } from './claim.js';
import { runJudges } from './judge.js';
import { replaceLostRunners } from './replacement.js';
import { requeueRetries, settleEnded } from './retry.js';
import { nextDueAt } from './view.js';

/**
 * The scheduler loop of one manager replica. Woken by the database wake-ups (task submitted,
 * requeued or cancelled, a command or run ended), by the earliest `runAfter` it knows of, and
 * by a slow scan that catches anything a lost wake-up missed. Every decision is made in the
 * database, so replicas share the work and never dispatch a task twice.
 */
export class Scheduler {
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;
  #scan: NodeJS.Timeout | undefined;
  #due: NodeJS.Timeout | undefined;
  #unsubscribe: (() => void) | undefined;
  lastPassAt: Date | null = null;
  nextWakeAt: Date | null = null;

  constructor(
    private readonly ctx: Ctx,
    private readonly deps: QueueDeps,
    private readonly settings: SchedulerSettings,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.#unsubscribe = this.ctx.wakeups.on(QUEUE_WAKE_KEY, () => this.kick());
    this.#scan = setInterval(() => this.kick(), this.settings.scanIntervalMs);
    this.#scan.unref();
    this.kick();
  }

  /** Run a pass now, or right after the one in progress. */
  kick(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.#loop().finally(() => (this.#running = undefined));
  }

  async #loop(): Promise<void> {
    do {
      this.#again = false;
      try {
        await this.pass();
      } catch (error) {
        this.logger.warn({ err: String(error) }, 'scheduler pass failed');
      }
    } while (this.#again && !this.#stopped);
  }

  /** One pass: outcomes, retries, lost runners, then new attempts while capacity lasts. */
  async pass(): Promise<number> {
    await this.#step('settle', () => settleEnded(this.ctx));
    await this.#step('retries', () => requeueRetries(this.ctx));
    await this.#step('judges', () => runJudges(this.ctx, this.deps));
    await this.#step('replacements', () =>
      replaceLostRunners(this.ctx, this.deps.runnerJobs, this.settings),
    );
    let started = 0;
    while (!this.#stopped) {
      const claimed = await claimBatch(this.ctx, this.settings);
      if (claimed.length === 0) break;
      // One scope per batch: its attempts share one profile check per profile.
      await inDispatchScope(() =>
        forEachLimit(claimed, this.settings.launchConcurrency, (c) =>
          startClaimed(this.ctx, this.deps, c),
        ),
      );
      started += claimed.length;
      if (claimed.length < this.settings.batchSize) break;
    }
    this.lastPassAt = new Date();
    await this.#planWake();
    return started;
  }

  async #step(name: string, run: () => Promise<unknown>): Promise<void> {
    try {
      await run();
    } catch (error) {
      this.logger.warn({ step: name, err: String(error) }, 'scheduler step failed');
    }
  }

  /** Sleep until the earliest waiting task is due (never longer than the scan interval). */
  async #planWake(): Promise<void> {
    const due = await nextDueAt(this.ctx.db);
    const scanAt = new Date(Date.now() + this.settings.scanIntervalMs);
    this.nextWakeAt = due && due < scanAt ? due : scanAt;
    if (this.#due) clearTimeout(this.#due);
    if (due && due < scanAt) {
      this.#due = setTimeout(() => this.kick(), Math.max(0, due.getTime() - Date.now()) + 5);
      this.#due.unref();
    }
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unsubscribe?.();
    if (this.#scan) clearInterval(this.#scan);
    if (this.#due) clearTimeout(this.#due);
    await this.#running;
  }
}

async function forEachLimit<T>(
  items: T[],
  limit: number,
  fn: (item: T) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
