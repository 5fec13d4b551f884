import { sql } from 'kysely';
import { findCommand } from '../../store/commands.js';
import { dbNow, findRun, type Executor, type Tx } from '../../store/runs.js';
import type { TerminalChange } from '../context.js';
import type { RunnerJobRow } from '../runner-jobs/records.js';
import { outcomeOf, supervisorSnapshot, type AttemptOutcome } from './outcome.js';
import {
  changeTask,
  findAttempt,
  lockTask,
  updateAttempt,
  type AttemptRow,
  type TaskRow,
} from './store.js';

/** Fields whose change is news to a poller (a new version and changeSeq). */
export const MATERIAL = ['state', 'terminalStatus', 'failureKind', 'runnerPhase'] as const;
const TERMINAL: readonly string[] = ['completed', 'failed', 'blocked', 'cancelled'];
const SUMMARY_MAX = 1000;

/** The records an attempt points at, read through the caller's executor. */
export async function recordsOf(db: Executor, attempt: AttemptRow) {
  const [now, run, command, runnerJob] = await Promise.all([
    dbNow(db),
    attempt.run_id ? findRun(db, attempt.run_id) : Promise.resolve(undefined),
    attempt.command_id ? findCommand(db, attempt.command_id) : Promise.resolve(undefined),
    attempt.runner_job_id
      ? db
          .selectFrom('runner_jobs')
          .selectAll()
          .where('runner_job_id', '=', attempt.runner_job_id)
          .executeTakeFirst()
      : Promise.resolve<RunnerJobRow | undefined>(undefined),
  ]);
  return { now, run, command, runnerJob };
}

/** The user-visible summary of a finished attempt, from its records (never from events). */
export function outcomeSummary(attempt: AttemptRow, outcome: AttemptOutcome): string {
  const kind = outcome.failureKind && outcome.failureKind !== outcome.state;
  const text = `attempt ${attempt.retry_index + 1} ${outcome.state}${kind ? ` (${outcome.failureKind})` : ''}${outcome.message ? `: ${outcome.message}` : ''}`;
  return text.length > SUMMARY_MAX ? `${text.slice(0, SUMMARY_MAX - 1)}…` : text;
}

/**
 * Write an attempt's outcome into the attempt and its task, under the task's row lock held by
 * the caller. A change of nothing material leaves version and changeSeq alone. A task
 * cancelled meanwhile stays cancelled; a finished attempt fills the task's summary.
 */
export async function applyOutcome(
  trx: Tx,
  taskId: string,
  current: AttemptRow,
  outcome: AttemptOutcome,
  records: Awaited<ReturnType<typeof recordsOf>>,
): Promise<void> {
  const locked = (await lockTask(trx, taskId))!;
  if (current.state === 'cancelled') outcome.state = 'cancelled';
  const { run, command, now } = records;
  const supervisor =
    run && current.session_id
      ? supervisorSnapshot(now, run, command ?? null, current.session_id, {
          terminal: TERMINAL.includes(outcome.state),
        })
      : null;
  const changed = MATERIAL.some((field) => outcomeOfRow(current)[field] !== outcome[field]);
  await updateAttempt(trx, current.attempt_id, {
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
  const finished = TERMINAL.includes(outcome.state) && !TERMINAL.includes(current.state);
  const state = taskStateAfter(locked, outcome.state);
  await changeTask(trx, taskId, {
    state,
    ...(becameFailed ? { failed_attempts: sql`failed_attempts + 1` } : {}),
    ...(becameBlocked ? { blocked_attempts: sql`blocked_attempts + 1` } : {}),
    ...(finished ? { summary: outcomeSummary(current, outcome) } : {}),
    ...(state === 'completed' && !locked.terminal_at ? { terminal_at: sql`now()` } : {}),
  });
}

/**
 * The task's state once its latest attempt reads `attemptState`. A cancelled task stays
 * cancelled. A completed attempt of a judged task is not the task's end: the task waits
 * `running` for its judge, so no reader sees `completed` before a verdict that may send it back.
 */
export function taskStateAfter(task: TaskRow, attemptState: string): string {
  if (task.state === 'cancelled') return 'cancelled';
  return attemptState === 'completed' && task.judge !== null ? 'running' : attemptState;
}

/**
 * Task outcomes follow their attempt without a refresh: when a command (or a run without a
 * terminal command) of an open attempt reaches a terminal state, the outcome is written in the
 * same transaction as the terminal status, so no reader ever sees one without the other.
 * Says whether the change was an open attempt's (the scheduler has something to do).
 */
export async function followTerminal(trx: Tx, change: TerminalChange): Promise<boolean> {
  const found = await trx
    .selectFrom('queue_attempts')
    .select(['attempt_id', 'task_id'])
    .where(change.commandId ? 'command_id' : 'run_id', '=', change.commandId ?? change.runId)
    .where('state', 'in', ['dispatched', 'running'])
    .executeTakeFirst();
  if (!found) return false;
  const task = await lockTask(trx, found.task_id);
  const current = await findAttempt(trx, found.attempt_id);
  if (!task || !current || task.latest_attempt_id !== current.attempt_id) return true;
  if (TERMINAL.includes(current.state)) return true;
  const records = await recordsOf(trx, current);
  await applyOutcome(trx, task.task_id, current, outcomeOf(current, records), records);
  return true;
}

/**
 * A task follows its attempt's start too: when a runner acknowledges the attempt's turn, the
 * attempt and the task move from `dispatched` to `running` in the acknowledging transaction
 * (queue stats and the commander count them there from that commit on).
 */
export async function followAcknowledged(trx: Tx, commandId: string): Promise<boolean> {
  const found = await trx
    .selectFrom('queue_attempts')
    .select(['attempt_id', 'task_id'])
    .where('command_id', '=', commandId)
    .where('state', '=', 'dispatched')
    .executeTakeFirst();
  if (!found) return false;
  const task = await lockTask(trx, found.task_id);
  const current = await findAttempt(trx, found.attempt_id);
  if (!task || !current || current.state !== 'dispatched') return false;
  if (task.latest_attempt_id !== current.attempt_id) return false;
  const records = await recordsOf(trx, current);
  await applyOutcome(trx, task.task_id, current, outcomeOf(current, records), records);
  return true;
}

export function outcomeOfRow(attempt: AttemptRow): AttemptOutcome {
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
