import { ServiceError, type QueuePlan, type Task } from '@svc/contracts';
import type { Ctx } from '../context.js';
import { stalled } from './attempts.js';
import { applyOutcome, MATERIAL, outcomeOfRow, recordsOf, taskStateAfter } from './follow.js';
import { outcomeOf, type AttemptOutcome } from './outcome.js';
import { findAttempt, lockTask, type AttemptRow } from './store.js';
import { getTask, getTaskRow } from './views.js';

export type RefreshOutcome = { kind: 'task'; task: Task } | { kind: 'plan'; plan: QueuePlan };

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
  const records = await recordsOf(ctx.db, attempt);
  const { now } = records;
  const outcome = stalled(attempt, now)
    ? stalledOutcome(attempt, now)
    : outcomeOf(attempt, records);
  const before = outcomeOfRow(attempt);
  const changed = MATERIAL.some((field) => before[field] !== outcome[field]);
  const nextTaskState = taskStateAfter(task, outcome.state);

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

  await ctx.db.transaction().execute(async (trx) => {
    const locked = await lockTask(trx, taskId);
    const current = await findAttempt(trx, attempt.attempt_id);
    // Another writer moved on meanwhile (a new attempt, a cancel): this refresh is stale.
    if (!locked || !current || locked.latest_attempt_id !== attempt.attempt_id) return;
    await applyOutcome(trx, taskId, current, outcome, records);
  });
  return { kind: 'task', task: await getTask(ctx, taskId) };
}

function stalledOutcome(attempt: AttemptRow, now: Date): AttemptOutcome {
  return {
    ...outcomeOfRow(attempt),
    state: 'failed',
    terminalStatus: 'failed',
    failureKind: 'infra-failed',
    message: 'dispatch was interrupted before its run was created',
    terminalAt: now,
  };
}

function pick(before: AttemptOutcome, after: AttemptOutcome) {
  return Object.fromEntries(
    MATERIAL.map((field) => [field, { from: before[field], to: after[field] }]),
  );
}
