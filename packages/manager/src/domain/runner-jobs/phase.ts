import { sql } from 'kysely';
import {
  EVENT_NAMES,
  OUTCOME_FAILURE_KINDS,
  TERMINAL_JOB_PHASES,
  type RunnerJobPhase,
} from '@svc/contracts';
import type { Launcher } from '../../launcher/types.js';
import { runnerJobsFailed } from '../../metrics/registry.js';
import { nonTerminalCommands } from '../../store/commands.js';
import { json } from '../../store/json.js';
import { lockRun, type RunRow, type Tx } from '../../store/runs.js';
import { QUEUE_WAKE_KEY, runWakeKey } from '../../store/wakeups.js';
import type { Ctx } from '../context.js';
import { managerEvent, writeEvents } from '../runs/event-log.js';
import { isTerminalRun, terminateRun } from '../runs/runs.js';
import { changeTask, lockTask, updateAttempt } from '../queue/store.js';
import { LIVE_JOB_PHASES } from './live.js';
import { forgetTransientEnv } from './masks.js';
import type { RunnerJobRow } from './records.js';
import { failUnclaimedCommand } from './unclaimed.js';

export interface PhaseReport {
  jobName: string;
  phase: RunnerJobPhase;
  exitCode?: number | null;
  summary?: Record<string, unknown>;
}

/**
 * A launcher reports a phase change; terminal phases are final. A Job that ended is dead the
 * moment its launcher says so, and the rest follows in the same transaction:
 * - its runner's lease, if it still held its run's, is released, so a replacement may claim
 *   at once instead of after the lease TTL (the scheduler makes one when a command is left);
 * - a queue task's run it served alone, with nothing left to serve, ends in its last turn's
 *   outcome (the runner would have closed it, had it lived to);
 * - a Job that ended before its runner claimed fails its command at once (see unclaimed.ts).
 * A queue task's Job ending frees capacity, and a released lease wants a replacement: both
 * wake the schedulers.
 */
export async function recordPhase(ctx: Ctx, update: PhaseReport): Promise<void> {
  const terminal = (TERMINAL_JOB_PHASES as readonly string[]).includes(update.phase);
  if (!terminal) {
    await writePhase(ctx.db, update, false);
    return;
  }
  const known = await ctx.db
    .selectFrom('runner_jobs')
    .select('run_id')
    .where('job_name', '=', update.jobName)
    .executeTakeFirst();
  if (!known) return;
  const ended = await ctx.db.transaction().execute(async (trx) => {
    // The run first, as every writer of a run's lease or state locks it before anything else.
    const run = await lockRun(trx, known.run_id);
    const row = await writePhase(trx, update, true);
    if (row && run?.queue_task_id) await followAttempt(trx, row);
    if (!row) return null;
    if (!run || isTerminalRun(run.state)) return { row, run, open: false, wake: false };
    const released = await releaseLease(trx, run, row);
    const closed = await closeServedRun(ctx, trx, run, row);
    // A runner that held the lease had claimed; nothing of a closed run is left to fail.
    return { row, run, open: !released && !closed, wake: released || closed, closed };
  });
  if (!ended) return;
  // Counted by the replica whose update recorded it: once across replicas.
  if (update.phase === 'failed') runnerJobsFailed.inc({ stage: 'run' });
  forgetTransientEnv(ctx.redactor, ended.row.runner_job_id);
  if (ended.closed) await ctx.wakeups.publish(runWakeKey(ended.row.run_id));
  if (ended.wake || ended.run?.queue_task_id) await ctx.wakeups.publish(QUEUE_WAKE_KEY);
  if (ended.open) await failUnclaimedCommand(ctx, ended.row);
}

async function writePhase(
  db: Ctx['db'] | Tx,
  update: PhaseReport,
  terminal: boolean,
): Promise<RunnerJobRow | undefined> {
  return db
    .updateTable('runner_jobs')
    .set({
      phase: update.phase,
      ...(update.exitCode !== undefined ? { exit_code: update.exitCode } : {}),
      ...(update.summary ? { terminal_summary: json(update.summary) } : {}),
      ...(terminal ? { finished_at: sql`now()` } : {}),
      updated_at: sql`now()`,
    } as never)
    .where('job_name', '=', update.jobName)
    .where('phase', 'not in', TERMINAL_JOB_PHASES as RunnerJobPhase[])
    .returningAll()
    .executeTakeFirst();
}

/** The queue attempt this Job was launched for shows its runner's phase (news to pollers). */
async function followAttempt(trx: Tx, job: RunnerJobRow): Promise<void> {
  const attempt = await trx
    .selectFrom('queue_attempts')
    .select(['attempt_id', 'task_id', 'runner_phase'])
    .where('runner_job_id', '=', job.runner_job_id)
    .executeTakeFirst();
  if (!attempt || attempt.runner_phase === job.phase) return;
  await lockTask(trx, attempt.task_id);
  await updateAttempt(trx, attempt.attempt_id, { runner_phase: job.phase });
  await changeTask(trx, attempt.task_id, {});
}

/** The ended Job's runner held the run's lease: it ends now, with an event that says why. */
async function releaseLease(trx: Tx, run: RunRow, job: RunnerJobRow): Promise<boolean> {
  if (run.lease_owner !== job.runner_id || !run.lease_expires_at) return false;
  const released = await trx
    .updateTable('runs')
    .set({ lease_expires_at: sql`least(lease_expires_at, now())`, updated_at: sql`now()` } as never)
    .where('run_id', '=', run.run_id)
    .where('lease_owner', '=', job.runner_id)
    .where('lease_expires_at', '>', sql<Date>`now()`)
    .executeTakeFirst();
  if (Number(released.numUpdatedRows) === 0) return false;
  const summary = (job.terminal_summary ?? {}) as Record<string, unknown>;
  await writeEvents(trx, run, [
    managerEvent('system', EVENT_NAMES.runnerLost, `runner-lost:${job.runner_job_id}`, null, {
      runnerId: job.runner_id,
      runnerJobId: job.runner_job_id,
      jobName: job.job_name,
      phase: job.phase,
      exitCode: job.exit_code,
      reason: typeof summary['reason'] === 'string' ? summary['reason'] : null,
      leaseReleased: true,
    }),
  ]);
  return true;
}

/**
 * A queue task's run is single-turn: once its runner Job ended with every command finished and
 * no other Job live, nothing more can come, and the run ends in its last turn's outcome.
 */
async function closeServedRun(ctx: Ctx, trx: Tx, run: RunRow, job: RunnerJobRow): Promise<boolean> {
  if (run.queue_task_id === null) return false;
  if ((await nonTerminalCommands(trx, run.run_id)).length > 0) return false;
  const [sibling, last] = await Promise.all([
    trx
      .selectFrom('runner_jobs')
      .select('runner_job_id')
      .where('run_id', '=', run.run_id)
      .where('runner_job_id', '<>', job.runner_job_id)
      .where('phase', 'in', LIVE_JOB_PHASES)
      .executeTakeFirst(),
    trx
      .selectFrom('commands')
      .select(['state', 'failure_kind', 'message'])
      .where('run_id', '=', run.run_id)
      .where('type', 'in', ['turn', 'resume'])
      .orderBy('seq', 'desc')
      .executeTakeFirst(),
  ]);
  if (sibling || !last) return false;
  const state =
    last.state === 'completed' || last.state === 'blocked' || last.state === 'cancelled'
      ? last.state
      : 'failed';
  const kind = last.failure_kind;
  await terminateRun(ctx, trx, run, {
    state,
    failureKind:
      state === 'completed'
        ? null
        : kind && (OUTCOME_FAILURE_KINDS as readonly string[]).includes(kind)
          ? kind
          : state === 'cancelled'
            ? 'cancelled'
            : 'backend-failed',
    message:
      `its runner job ended after the run's turn (${last.state}${last.message ? `: ${last.message}` : ''})`.slice(
        0,
        1000,
      ),
    source: 'runner-job-ended',
  });
  return true;
}

/**
 * A cancelled run's runners stop by themselves when they see the cancel; one that does not
 * (hung, partitioned) is stopped by its launcher after the grace period.
 */
export function stopJobsOfCancelledRun(
  ctx: Pick<Ctx, 'db' | 'logger'>,
  launcher: Launcher,
  runId: string,
  graceMs: number,
): void {
  const timer = setTimeout(() => {
    void (async () => {
      const active = await ctx.db
        .selectFrom('runner_jobs')
        .select('job_name')
        .where('run_id', '=', runId)
        .where('phase', 'in', LIVE_JOB_PHASES)
        .execute();
      for (const { job_name } of active) await launcher.cancel(job_name);
    })().catch((error: unknown) =>
      ctx.logger.warn({ runId, err: String(error) }, 'stopping the jobs of a cancelled run failed'),
    );
  }, graceMs);
  timer.unref();
}
