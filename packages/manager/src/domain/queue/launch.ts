import { sql } from 'kysely';
import {
  isServiceError,
  ServiceError,
  type DispatchBody,
  type DispatchResponse,
  type RunBase,
  type SendResponse,
  type WorkReadySummary,
} from '@svc/contracts';
import type { SessionVolumes } from '../../sessions/volumes.js';
import { findCommand } from '../../store/commands.js';
import { dbNow, findRun } from '../../store/runs.js';
import { QUEUE_WAKE_KEY } from '../../store/wakeups.js';
import { cancelCommand, isTerminalCommand } from '../runs/commands.js';
import type { Ctx } from '../context.js';
import type { RunnerJobRow } from '../runner-jobs/records.js';
import type { RunnerJobDeps } from '../runner-jobs/runner-jobs.js';
import { cancelRun } from '../runs/runs.js';
import { sessionPath } from '../sessions/records.js';
import { sendToSession } from '../sessions/send.js';
import { createSession } from '../sessions/sessions.js';
import type { Prepared } from './dispatch.js';
import { followTerminal, outcomeOfRow, outcomeSummary } from './follow.js';
import { supervisorSnapshot } from './outcome.js';
import { toAttempt } from './records.js';
import {
  changeTask,
  findAttempt,
  lockTask,
  updateAttempt,
  type AttemptRow,
  type TaskRow,
} from './store.js';

export interface QueueDeps {
  volumes: SessionVolumes;
  runnerJobs: RunnerJobDeps;
}

/**
 * Step two of a dispatch, outside the task lock (it spans several transactions of the session,
 * run and runner-job layers): the session, then one send that creates the run, the turn and the
 * runner Job. The attemptId is the send's idempotency key and the runner Job's attempt id, so
 * every record of the attempt carries the same identity.
 */
export async function launchAttempt(
  ctx: Ctx,
  deps: QueueDeps,
  task: TaskRow,
  attempt: AttemptRow,
  prepared: Prepared,
  body: DispatchBody,
): Promise<DispatchResponse> {
  const sessionId = attempt.session_id!;
  try {
    if (attempt.session_origin === 'bootstrapped')
      await createSession(
        ctx,
        { volumes: deps.volumes },
        { sessionId, backendProfile: prepared.profile, runBase: prepared.runBase },
      );
    const sent = await sendToSession(
      ctx,
      { runnerJobs: deps.runnerJobs },
      sessionId,
      {
        payload: prepared.payload,
        backendProfile: prepared.profile,
        runBase: attemptRunBase(prepared, task, attempt),
        runnerJob: { ...(body.runnerJob ?? {}), attemptId: attempt.attempt_id },
        idempotencyKey: attempt.attempt_id,
      },
      { queueTaskId: task.task_id },
    );
    return await recordLaunch(ctx, deps, task.task_id, attempt, sent);
  } catch (error) {
    await recordFailure(ctx, task.task_id, attempt, error);
    throw error;
  }
}

/** An attempt's run base: the task's own, tagged with the task and attempt it serves. */
export function attemptRunBase(prepared: Prepared, task: TaskRow, attempt: AttemptRow): RunBase {
  return {
    ...prepared.runBase,
    metadata: {
      ...prepared.runBase.metadata,
      queueTaskId: task.task_id,
      queueAttemptId: attempt.attempt_id,
      queue: task.queue,
    },
  };
}

async function recordLaunch(
  ctx: Ctx,
  deps: QueueDeps,
  taskId: string,
  attempt: AttemptRow,
  sent: SendResponse,
): Promise<DispatchResponse> {
  const sessionId = attempt.session_id!;
  const [run, command, job, now] = await Promise.all([
    findRun(ctx.db, sent.run!.runId),
    findCommand(ctx.db, sent.command!.commandId),
    jobOf(ctx, attempt.attempt_id),
    dbNow(ctx.db),
  ]);
  const supervisor = run ? supervisorSnapshot(now, run, command ?? null, sessionId) : null;
  const runId = sent.run!.runId;
  const commandId = sent.command!.commandId;
  const written = await ctx.db.transaction().execute(async (trx) => {
    // The run first, as every writer of its terminal state locks it before the task: a turn
    // that ended before these references existed (a runner Job that died at once) is followed
    // below, one that ends after this commit finds them.
    await sql`SELECT 1 FROM runs WHERE run_id = ${runId} FOR SHARE`.execute(trx);
    await lockTask(trx, taskId);
    let row = await updateAttempt(trx, attempt.attempt_id, {
      run_id: runId,
      command_id: commandId,
      runner_job_id: job?.runner_job_id ?? null,
      thread: sent.command!.threadId ? 'resume' : 'start',
      runner_id: job?.runner_id ?? null,
      job_name: job?.job_name ?? null,
      runner_phase: job?.phase ?? null,
      supervisor: supervisor ? JSON.stringify(supervisor) : null,
      supervisor_at: now,
    });
    // The references are a change pollers should see, even on a task cancelled meanwhile.
    await changeTask(trx, taskId, {});
    const ended = await findCommand(trx, commandId);
    if (ended && isTerminalCommand(ended.state)) {
      const change = { runId, commandId, state: ended.state, threadId: ended.thread_id };
      if (await followTerminal(trx, change)) {
        await ctx.wakeups.publishIn(trx, QUEUE_WAKE_KEY);
        row = (await findAttempt(trx, attempt.attempt_id)) ?? row;
      }
    }
    // The update leaves the state as it was: a cancel that came first shows in the row.
    return { row, cancelledMeanwhile: row.state === 'cancelled' };
  });
  if (written.cancelledMeanwhile)
    await cancelCommand(ctx, sent.command!.commandId, 'queue task cancelled during dispatch').catch(
      (error: unknown) =>
        ctx.logger.warn({ taskId, err: String(error) }, 'cancelling a late dispatch failed'),
    );
  return response(written.row, {
    created: true,
    run: run ? { runId: run.run_id, state: run.state } : null,
    command: sent.command
      ? { commandId: sent.command.commandId, type: sent.command.type, state: sent.command.state }
      : null,
    job: job ?? null,
    expectedWorkReady: deps.runnerJobs.workReady(),
  });
}

/**
 * A dispatch that failed after its attempt was written: the attempt fails with the failure's
 * kind (it counts against maxAttempts), and a run left behind without its runner is cancelled
 * so its session does not stay `running`.
 */
export async function recordFailure(
  ctx: Ctx,
  taskId: string,
  attempt: AttemptRow,
  error: unknown,
): Promise<void> {
  try {
    const kind = isServiceError(error) ? error.failureKind : 'infra-failed';
    const message = ctx.redactor.redact(error instanceof Error ? error.message : String(error));
    const made = await ctx.db
      .selectFrom('commands as c')
      .innerJoin('runs as r', 'r.run_id', 'c.run_id')
      .select(['c.run_id', 'c.command_id'])
      .where('r.session_id', '=', attempt.session_id)
      .where('c.idempotency_key', '=', attempt.attempt_id)
      .executeTakeFirst();
    const job = await jobOf(ctx, attempt.attempt_id);
    await ctx.db.transaction().execute(async (trx) => {
      const task = await lockTask(trx, taskId);
      const current = await findAttempt(trx, attempt.attempt_id);
      if (!task || !current || current.state !== 'dispatched') return;
      await updateAttempt(trx, attempt.attempt_id, {
        state: 'failed',
        terminal_status: 'failed',
        failure_kind: kind,
        message: message.slice(0, 500),
        run_id: made?.run_id ?? null,
        command_id: made?.command_id ?? null,
        runner_job_id: job?.runner_job_id ?? null,
        runner_id: job?.runner_id ?? null,
        job_name: job?.job_name ?? null,
        runner_phase: job?.phase ?? null,
        terminal_at: sql`now()`,
      });
      const summary = outcomeSummary(current, {
        ...outcomeOfRow(current),
        state: 'failed',
        failureKind: kind,
        message,
      });
      await changeTask(trx, taskId, {
        ...(task.state === 'cancelled' ? {} : { state: 'failed', summary }),
        failed_attempts: sql`failed_attempts + 1`,
      });
    });
    // The outcome first: cancelling the run would otherwise end the attempt as `cancelled`.
    if (made) await cancelRun(ctx, made.run_id, 'queue dispatch failed');
  } catch (recordError) {
    ctx.logger.error(
      { taskId, attemptId: attempt.attempt_id, err: String(recordError) },
      'recording a failed dispatch failed',
    );
  }
}

/** A dispatch naming an attempt that exists answers that attempt as it is now. */
export async function replayAttempt(
  ctx: Ctx,
  deps: QueueDeps,
  taskId: string,
  attempt: AttemptRow,
): Promise<DispatchResponse> {
  if (attempt.task_id !== taskId)
    throw new ServiceError(
      'state-conflict',
      `attempt ${attempt.attempt_id} belongs to task ${attempt.task_id}`,
      { attemptId: attempt.attempt_id, taskId: attempt.task_id },
    );
  const [run, command, job] = await Promise.all([
    attempt.run_id ? findRun(ctx.db, attempt.run_id) : Promise.resolve(undefined),
    attempt.command_id ? findCommand(ctx.db, attempt.command_id) : Promise.resolve(undefined),
    jobOf(ctx, attempt.attempt_id),
  ]);
  return response(attempt, {
    created: false,
    run: run ? { runId: run.run_id, state: run.state } : null,
    command: command
      ? { commandId: command.command_id, type: command.type, state: command.state }
      : null,
    job: job ?? null,
    expectedWorkReady: deps.runnerJobs.workReady(),
  });
}

async function jobOf(ctx: Ctx, attemptId: string): Promise<RunnerJobRow | undefined> {
  return ctx.db
    .selectFrom('runner_jobs')
    .selectAll()
    .where('attempt_id', '=', attemptId)
    .executeTakeFirst();
}

function response(
  row: AttemptRow,
  parts: {
    created: boolean;
    run: DispatchResponse['run'];
    command: DispatchResponse['command'];
    job: RunnerJobRow | null;
    expectedWorkReady: WorkReadySummary | null;
  },
): DispatchResponse {
  const sessionId = row.session_id!;
  return {
    taskId: row.task_id,
    created: parts.created,
    attempt: toAttempt(row),
    run: parts.run,
    command: parts.command,
    runnerJob: parts.job
      ? {
          runnerJobId: parts.job.runner_job_id,
          attemptId: parts.job.attempt_id,
          jobName: parts.job.job_name,
          phase: parts.job.phase,
        }
      : null,
    session: {
      sessionId,
      sessionPath: sessionPath(sessionId),
      origin: (row.session_origin ?? 'bootstrapped') as DispatchResponse['session']['origin'],
      thread: row.thread as DispatchResponse['session']['thread'],
    },
    sessionPath: sessionPath(sessionId),
    // What the runner reported at registration, else what its image is expected to have.
    workReady: (parts.job?.work_ready as WorkReadySummary | null) ?? parts.expectedWorkReady,
    dryRun: false,
    mutation: parts.created,
    valuesPrinted: false,
  };
}
