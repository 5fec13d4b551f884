import type { SchedulerSettings } from '../../config.js';
import type { Logger } from '../../logging.js';
import { QUEUE_WAKE_KEY } from '../../store/wakeups.js';
import type { Ctx } from '../context.js';
import { DispatchScope, inDispatchScope } from '../dispatch-scope.js';
import type { QueueDeps } from '../queue/launch.js';
import { claimBatch, startClaimed, type Claimed } from './claim.js';
import { runJudges } from './judge.js';
import { LaunchPool } from './launch-pool.js';
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
  readonly #launches: LaunchPool<{ claimed: Claimed; scope: DispatchScope }>;
  lastPassAt: Date | null = null;
  nextWakeAt: Date | null = null;

  constructor(
    private readonly ctx: Ctx,
    private readonly deps: QueueDeps,
    private readonly settings: SchedulerSettings,
    private readonly logger: Logger,
  ) {
    this.#launches = new LaunchPool(settings.launchConcurrency, ({ claimed, scope }) =>
      inDispatchScope(() => startClaimed(this.ctx, this.deps, claimed), scope),
    );
  }

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

  /**
   * One pass: new attempts while capacity lasts first (a task just submitted does not wait
   * behind housekeeping), then outcomes, retries, judges and lost runners; when those freed
   * capacity or requeued work, claim again. Launches run on in the pool past the pass.
   */
  async pass(): Promise<number> {
    let started = await this.#claimAll();
    const settled = await this.#step('settle', () => settleEnded(this.ctx));
    const requeued = await this.#step('retries', () => requeueRetries(this.ctx));
    await this.#step('judges', () => runJudges(this.ctx, this.deps));
    await this.#step('replacements', () =>
      replaceLostRunners(this.ctx, this.deps.runnerJobs, this.settings),
    );
    // Settled attempts free capacity; requeued tasks may be due at once.
    const changed = (settled ?? 0) + (requeued ?? 0) > 0;
    if (changed) started += await this.#claimAll();
    this.lastPassAt = new Date();
    await this.#planWake();
    return started;
  }

  /** Claim batches until the queue or capacity runs out, each handed to the launch pool. */
  async #claimAll(): Promise<number> {
    let started = 0;
    while (!this.#stopped) {
      // At most one batch claimed and not yet started (a crash leaves no more than that).
      await this.#launches.started();
      const claimed = await claimBatch(this.ctx, this.settings);
      if (claimed.length === 0) break;
      // One scope per batch: its attempts share one profile check per profile.
      const scope = new DispatchScope();
      this.#launches.add(claimed.map((c) => ({ claimed: c, scope })));
      started += claimed.length;
      if (claimed.length < this.settings.batchSize) break;
    }
    return started;
  }

  async #step<T>(name: string, run: () => Promise<T>): Promise<T | undefined> {
    try {
      return await run();
    } catch (error) {
      this.logger.warn({ step: name, err: String(error) }, 'scheduler step failed');
      return undefined;
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
    await this.#launches.idle();
  }
}
