import { sql } from 'kysely';
import { ServiceError, type QueuePlan, type Task } from '@svc/contracts';
import { findCommand } from '../../store/commands.js';
import { dbNow, findRun } from '../../store/runs.js';
import type { Ctx } from '../context.js';
import type { RunnerJobRow } from '../runner-jobs/records.js';
import { stalled } from './attempts.js';
import { outcomeOf, supervisorSnapshot, type AttemptOutcome } from './outcome.js';
import { changeTask, findAttempt, lockTask, updateAttempt, type AttemptRow } from './store.js';
import { getTask, getTaskRow } from './views.js';

export type RefreshOutcome = { kind: 'task'; task: Task } | { kind: 'plan'; plan: QueuePlan };

/** Fields whose change is news to a poller (a new version and changeSeq). */
const MATERIAL = ['state', 'terminalStatus', 'failureKind', 'runnerPhase'] as const;

/**
 * Write the outcome of the latest attempt's run and command into the attempt and the task,
 * from their records (run, command, runner job) only: no trace, session trace or event is read.
 * A refresh that changes nothing material leaves version and changeSeq alone.
 */
export async function refreshTask(
  ctx: Ctx,
  taskId: string,
  dryRun: boolean,
): Promise<RefreshOutcome> {
  const task = await getTaskRow(ctx.db, taskId);
  const attempt = task.latest_attempt_id
    ? await findAttempt(ctx.db, task.latest_attempt_id)
    : undefined;
  if (!attempt)
    throw new ServiceError(
      'state-conflict',
      `task ${taskId} has no attempt to refresh; dispatch it first`,
      { reason: 'no-attempt', taskId, state: task.state },
    );
  const now = await dbNow(ctx.db);
  const [run, command, runnerJob] = await Promise.all([
    attempt.run_id ? findRun(ctx.db, attempt.run_id) : Promise.resolve(undefined),
    attempt.command_id ? findCommand(ctx.db, attempt.command_id) : Promise.resolve(undefined),
    attempt.runner_job_id
      ? ctx.db
          .selectFrom('runner_jobs')
          .selectAll()
          .where('runner_job_id', '=', attempt.runner_job_id)
          .executeTakeFirst()
      : Promise.resolve<RunnerJobRow | undefined>(undefined),
  ]);
  const outcome = stalled(attempt, now)
    ? stalledOutcome(attempt, now)
    : outcomeOf(attempt, { now, run, command, runnerJob });
  const before = currentOf(attempt);
  const changed = MATERIAL.some((field) => before[field] !== outcome[field]);
  const nextTaskState = task.state === 'cancelled' ? 'cancelled' : outcome.state;

  if (dryRun)
    return {
      kind: 'plan',
      plan: {
        action: 'refresh',
        taskId,
        dryRun: true,
        mutation: false,
        plan: {
          attemptId: attempt.attempt_id,
          changes: changed,
          attempt: pick(before, outcome),
          taskState: { from: task.state, to: nextTaskState },
          readsEvents: false,
        },
        valuesPrinted: false,
      },
    };

  const supervisor =
    run && attempt.session_id
      ? supervisorSnapshot(now, run, command ?? null, attempt.session_id)
      : null;
  await ctx.db.transaction().execute(async (trx) => {
    const locked = await lockTask(trx, taskId);
    const current = await findAttempt(trx, attempt.attempt_id);
    // Another writer moved on meanwhile (a new attempt, a cancel): this refresh is stale.
    if (!locked || !current || locked.latest_attempt_id !== attempt.attempt_id) return;
    if (current.state !== attempt.state && current.state === 'cancelled')
      outcome.state = 'cancelled';
    await updateAttempt(trx, attempt.attempt_id, {
      state: outcome.state,
      terminal_status: outcome.terminalStatus,
      failure_kind: outcome.failureKind,
      message: outcome.message,
      started_at: outcome.startedAt,
      terminal_at: outcome.terminalAt,
      duration_ms: outcome.durationMs,
      event_count: outcome.eventCount,
      last_event_seq: outcome.lastEventSeq,
      runner_id: outcome.runnerId,
      job_name: outcome.jobName,
      runner_phase: outcome.runnerPhase,
      ...(supervisor ? { supervisor: JSON.stringify(supervisor), supervisor_at: now } : {}),
    });
    if (!changed) return;
    const becameFailed = outcome.state === 'failed' && current.state !== 'failed';
    const becameBlocked = outcome.state === 'blocked' && current.state !== 'blocked';
    const state = locked.state === 'cancelled' ? 'cancelled' : outcome.state;
    await changeTask(trx, taskId, {
      state,
      ...(becameFailed ? { failed_attempts: sql`failed_attempts + 1` } : {}),
      ...(becameBlocked ? { blocked_attempts: sql`blocked_attempts + 1` } : {}),
      ...(state === 'completed' && !locked.terminal_at ? { terminal_at: sql`now()` } : {}),
    });
  });
  return { kind: 'task', task: await getTask(ctx, taskId) };
}

function stalledOutcome(attempt: AttemptRow, now: Date): AttemptOutcome {
  return {
    ...currentOf(attempt),
    state: 'failed',
    terminalStatus: 'failed',
    failureKind: 'infra-failed',
    message: 'dispatch was interrupted before its run was created',
    terminalAt: now,
  };
}

function currentOf(attempt: AttemptRow): AttemptOutcome {
  return {
    state: attempt.state as AttemptOutcome['state'],
    terminalStatus: attempt.terminal_status,
    failureKind: attempt.failure_kind,
    message: attempt.message,
    startedAt: attempt.started_at ? new Date(attempt.started_at) : null,
    terminalAt: attempt.terminal_at ? new Date(attempt.terminal_at) : null,
    durationMs: attempt.duration_ms === null ? null : Number(attempt.duration_ms),
    eventCount: attempt.event_count,
    lastEventSeq: attempt.last_event_seq,
    runnerId: attempt.runner_id,
    jobName: attempt.job_name,
    runnerPhase: attempt.runner_phase,
  };
}

function pick(before: AttemptOutcome, after: AttemptOutcome) {
  return Object.fromEntries(
    MATERIAL.map((field) => [field, { from: before[field], to: after[field] }]),
  );
}
