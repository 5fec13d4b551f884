import type { SchedulerSettings } from '../../config.js';
import type { Logger } from '../../logging.js';
import type { Tx } from '../../store/runs.js';
import { QUEUE_SUBMIT_KEY, QUEUE_WAKE_KEY } from '../../store/wakeups.js';
import type { Ctx } from '../context.js';
import { DispatchScope, inDispatchScope, UsableProfiles } from '../dispatch-scope.js';
import type { QueueDeps } from '../queue/launch.js';
import { prepare } from '../queue/dispatch.js';
import { anyReady, claimBatch, nextRateFreeAt, startClaimed, type Claimed } from './claim.js';
import { startBatch, writeRecords, type FreshAttempt, type PendingJob } from './launch-batch.js';
import { runJudges } from './judge.js';
import { LaunchPool } from './launch-pool.js';
import { Serial } from './serial.js';
import { replaceLostRunners } from './replacement.js';
import { requeueRetries, settleEnded } from './retry.js';
import { nextDueAt } from './view.js';
import { fireDueSchedules } from '../schedules/fire.js';
import { nextScheduleAt } from '../schedules/store.js';

/** A batch's records could not be written: its claim is rolled back and made again. */
class RecordsFailed extends Error {
  constructor(cause: unknown) {
    super('writing the records of a batch failed', { cause });
  }
}

/** What a claim leaves to do after its commit. */
interface Written {
  single: Claimed[];
  jobs: PendingJob[];
}

/** How long a provider profile found usable is taken as usable by the next batches. */
const PROFILE_RECHECK_MS = 1_000;

/**
 * The scheduler loop of one manager replica. Woken by the database wake-ups (task submitted,
 * requeued or cancelled, a command or run ended, a schedule created), by the earliest
 * `runAfter` or schedule tick it knows of, and
 * by a slow scan that catches anything a lost wake-up missed. Every decision is made in the
 * database, so replicas share the work and never dispatch a task twice.
 */
export class Scheduler {
  #stopped = false;
  #scan: NodeJS.Timeout | undefined;
  #due: NodeJS.Timeout | undefined;
  #unsubscribe: (() => void) | undefined;
  readonly #launches: LaunchPool;
  /** Batches whose jobs are starting: their launches are recorded once all have answered. */
  readonly #starting = new Set<Promise<void>>();
  /** New attempts: kept apart so a task just submitted never waits behind housekeeping. */
  readonly #claims: Serial;
  /** Outcomes, retries, judges and lost runners, then the next timed wake-up. */
  readonly #housekeeping: Serial;
  readonly #profiles = new UsableProfiles(PROFILE_RECHECK_MS);
  lastPassAt: Date | null = null;
  nextWakeAt: Date | null = null;

  constructor(
    private readonly ctx: Ctx,
    private readonly deps: QueueDeps,
    private readonly settings: SchedulerSettings,
    private readonly logger: Logger,
  ) {
    this.#launches = new LaunchPool(settings.launchConcurrency);
    const failed = (name: string) => (error: unknown) =>
      this.logger.warn({ err: String(error) }, `scheduler ${name} failed`);
    this.#claims = new Serial(
      (repeat) => this.#claimAll(repeat).then(() => undefined),
      failed('claim'),
    );
    this.#housekeeping = new Serial(() => this.#housekeep(), failed('pass'));
  }

  start(): void {
    const off = [
      this.ctx.wakeups.on(QUEUE_WAKE_KEY, () => this.kick()),
      this.ctx.wakeups.on(QUEUE_SUBMIT_KEY, () => this.#claims.kick()),
    ];
    this.#unsubscribe = () => off.forEach((unsubscribe) => unsubscribe());
    this.#scan = setInterval(() => this.kick(), this.settings.scanIntervalMs);
    this.#scan.unref();
    this.kick();
  }

  /** Claim now, and keep house, each right after the run in progress. */
  kick(): void {
    this.#claims.kick();
    this.#housekeeping.kick();
  }

  /**
   * Settled attempts free capacity and requeued tasks may be due at once: either kicks the
   * claims again.
   */
  async #housekeep(): Promise<void> {
    // Recurring schedules first: their tasks wake the claims through the submit path.
    await this.#step('schedules', () => fireDueSchedules(this.ctx, this.logger));
    const settled = await this.#step('settle', () => settleEnded(this.ctx));
    const requeued = await this.#step('retries', () => requeueRetries(this.ctx));
    await this.#step('judges', () => runJudges(this.ctx, this.deps));
    await this.#step('replacements', () =>
      replaceLostRunners(this.ctx, this.deps.runnerJobs, this.settings),
    );
    if ((settled ?? 0) + (requeued ?? 0) > 0) this.#claims.kick();
    this.lastPassAt = new Date();
    await this.#planWake();
  }

  /**
   * Claim batches until the queue or capacity runs out, each launched past the pass. A repeat
   * pass (kicked during the last one) first asks whether any task is ready at all: the NOTIFY
   * of a submit this replica already started from comes back as such a kick, and one indexed
   * read costs less than the claim transaction's five round trips.
   */
  async #claimAll(repeat = false): Promise<number> {
    if (repeat && !(await anyReady(this.ctx.db))) return 0;
    let started = 0;
    let together = true;
    while (!this.#stopped) {
      // At most one batch claimed and not yet started (a crash leaves no more than that).
      await this.#launches.started();
      let batch;
      try {
        // One scope per batch: its attempts share one profile check per profile.
        batch = await inDispatchScope(
          () =>
            claimBatch(this.ctx, this.settings, (trx, claimed) =>
              this.#write(trx, claimed, together),
            ),
          new DispatchScope(this.#profiles),
        );
      } catch (error) {
        if (!(error instanceof RecordsFailed)) throw error;
        // The claim rolled back whole, its tasks still queued: claimed again, one at a time.
        this.logger.warn(
          { err: String(error.cause) },
          'writing a batch failed; launching one by one',
        );
        together = false;
        continue;
      }
      if (!batch) break;
      this.#launch(batch.written);
      started += batch.claimed.length;
      if (batch.claimed.length < this.settings.batchSize && !batch.more) break;
    }
    return started;
  }

  /**
   * In the claim's transaction: attempts on sessions of their own (the common case) get their
   * records written together (see launch-batch.ts). An attempt on a task's named session, one
   * whose checks refuse, or, with `together` false, every one, goes the one-at-a-time way
   * after the commit, which puts a refused task back unspent. Records that cannot be written
   * fail the whole claim (`RecordsFailed`): no savepoint round trip on every claim for it.
   */
  async #write(trx: Tx, claimed: readonly Claimed[], together: boolean): Promise<Written> {
    const { ctx, deps } = this;
    const single: Claimed[] = [];
    const fresh: FreshAttempt[] = [];
    for (const c of claimed) {
      if (!together || c.attempt.session_origin !== 'bootstrapped') single.push(c);
      else
        await prepare(ctx, deps, c.task, {}).then(
          (prepared) => fresh.push({ claimed: c, prepared }),
          () => single.push(c),
        );
    }
    if (fresh.length === 0) return { single, jobs: [] };
    try {
      return { single, jobs: await writeRecords(ctx, trx, deps, fresh) };
    } catch (error) {
      throw new RecordsFailed(error);
    }
  }

  /** After the commit: the one-at-a-time launches and the batch's volumes and Jobs. */
  #launch({ single, jobs }: Written): void {
    const { ctx, deps } = this;
    for (const c of single) void this.#launches.add(() => startClaimed(ctx, deps, c));
    if (jobs.length === 0) return;
    const starting = startBatch(ctx, deps, jobs, (launch) => this.#launches.add(launch))
      .catch((error: unknown) =>
        this.logger.warn({ err: String(error) }, 'recording started runner jobs failed'),
      )
      .finally(() => this.#starting.delete(starting));
    this.#starting.add(starting);
  }

  async #step<T>(name: string, run: () => Promise<T>): Promise<T | undefined> {
    try {
      return await run();
    } catch (error) {
      this.logger.warn({ step: name, err: String(error) }, 'scheduler step failed');
      return undefined;
    }
  }

  /**
   * Sleep until the earliest waiting task or schedule tick is due, or a profile's start rate
   * has room again (never longer than the scan interval).
   */
  async #planWake(): Promise<void> {
    const [task, earliest, rate] = await Promise.all([
      nextDueAt(this.ctx.db),
      nextScheduleAt(this.ctx.db).catch(() => null),
      nextRateFreeAt(this.ctx.db),
    ]);
    // A tick already due (it came during this pass, or its firing failed) is tried in a second.
    const tick =
      earliest && earliest.getTime() <= Date.now() ? new Date(Date.now() + 1_000) : earliest;
    const due = [task, tick, rate].reduce<Date | null>(
      (soonest, at) => (at && (!soonest || at < soonest) ? at : soonest),
      null,
    );
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
    await Promise.all([this.#claims.stop(), this.#housekeeping.stop()]);
    await this.#launches.idle();
    await Promise.all(this.#starting);
  }
}
