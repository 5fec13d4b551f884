import { sql } from 'kysely';
import {
  FINAL_TASK_STATES,
  type QueuePlan,
  type ReadCursor,
  type Supervisor,
  type Task,
  type TaskCancelBody,
  type TaskReadBody,
  type TaskState,
} from '@svc/contracts';
import { findCommand } from '../../store/commands.js';
import { isoRequired } from '../../store/json.js';
import { cancelCommand, isTerminalCommand } from '../runs/commands.js';
import type { Ctx } from '../context.js';
import { QUEUE_WAKE_KEY } from '../../store/wakeups.js';
import {
  changeTask,
  findReadCursor,
  lockTask,
  openAttempt,
  updateAttempt,
  upsertReadCursor,
  type ReadCursorRow,
  type TaskRow,
} from './store.js';
import { getTask, getTaskRow } from './views.js';

export type CancelOutcome = { kind: 'task'; task: Task } | { kind: 'plan'; plan: QueuePlan };

const isFinal = (state: string) => (FINAL_TASK_STATES as readonly string[]).includes(state);

/**
 * Cancel a task: it accepts no further dispatch. An attempt in flight is cancelled with it, and
 * its turn command through the command layer (the runner interrupts the agent). A completed or
 * cancelled task is answered unchanged, like a repeated run cancel.
 */
export async function cancelTask(
  ctx: Ctx,
  taskId: string,
  body: TaskCancelBody,
): Promise<CancelOutcome> {
  const task = await getTaskRow(ctx.db, taskId);
  const open = await openAttempt(ctx.db, taskId);
  if (body.dryRun)
    return {
      kind: 'plan',
      plan: {
        action: 'cancel',
        taskId,
        dryRun: true,
        mutation: false,
        plan: {
          taskState: { from: task.state, to: isFinal(task.state) ? task.state : 'cancelled' },
          changes: !isFinal(task.state),
          cancelAttempt: isFinal(task.state) ? null : (open?.attempt_id ?? null),
          cancelCommand: isFinal(task.state) ? null : (open?.command_id ?? null),
          reason: body.reason ?? null,
        },
        valuesPrinted: false,
      },
    };
  if (isFinal(task.state)) return { kind: 'task', task: await getTask(ctx, taskId) };

  const commandId = await ctx.db.transaction().execute(async (trx) => {
    const locked = await lockTask(trx, taskId);
    if (!locked || isFinal(locked.state)) return null;
    const attempt = await openAttempt(trx, taskId);
    const supervisor = attempt?.supervisor as Supervisor | null | undefined;
    if (attempt)
      await updateAttempt(trx, attempt.attempt_id, {
        // The snapshot of a cancelled attempt says it is over, not what it was waiting for.
        ...(supervisor
          ? {
              supervisor: JSON.stringify({
                ...supervisor,
                phase: 'terminal',
                timeoutBudget: { ...supervisor.timeoutBudget, remainingMs: 0 },
              }),
              supervisor_at: sql`now()`,
            }
          : {}),
        state: 'cancelled',
        terminal_status: 'cancelled',
        failure_kind: 'cancelled',
        message: body.reason ? `cancelled: ${body.reason}` : 'cancelled',
        terminal_at: sql`now()`,
      });
    await changeTask(trx, taskId, {
      state: 'cancelled' satisfies TaskState,
      cancel_reason: body.reason ?? null,
      terminal_at: sql`now()`,
    });
    // The attempt's capacity is free again.
    if (attempt) await ctx.wakeups.publishIn(trx, QUEUE_WAKE_KEY);
    return attempt?.command_id ?? null;
  });
  if (commandId) {
    const command = await findCommand(ctx.db, commandId);
    if (command && !isTerminalCommand(command.state))
      await cancelCommand(ctx, commandId, body.reason ?? 'queue task cancelled');
  }
  return { kind: 'task', task: await getTask(ctx, taskId) };
}

export type ReadOutcome =
  { kind: 'cursor'; cursor: ReadCursor } | { kind: 'plan'; plan: QueuePlan };

/**
 * A reader has seen the task as it is now: its cursor holds the task's version and changeSeq,
 * and the task counts as unread for that reader again only after its next change.
 */
export async function readTask(ctx: Ctx, taskId: string, body: TaskReadBody): Promise<ReadOutcome> {
  const task = await getTaskRow(ctx.db, taskId);
  const kind = body.readerKind ?? 'client';
  if (body.dryRun) {
    const previous = await findReadCursor(ctx.db, body.readerId, taskId);
    return {
      kind: 'plan',
      plan: {
        action: 'read',
        taskId,
        dryRun: true,
        mutation: false,
        plan: {
          readerId: body.readerId,
          readerKind: kind,
          readVersion: { from: previous?.read_version ?? null, to: task.version },
          unreadBefore: previous ? previous.read_version < task.version : true,
        },
        valuesPrinted: false,
      },
    };
  }
  const row = await upsertReadCursor(ctx.db, {
    reader_id: body.readerId,
    task_id: taskId,
    reader_kind: kind,
    queue: task.queue,
    read_version: task.version,
    read_change_seq: task.change_seq,
  });
  return { kind: 'cursor', cursor: toReadCursor(row, task) };
}

function toReadCursor(row: ReadCursorRow, task: TaskRow): ReadCursor {
  return {
    taskId: row.task_id,
    queue: row.queue,
    readerId: row.reader_id,
    readerKind: row.reader_kind,
    readVersion: row.read_version,
    readChangeSeq: Number(row.read_change_seq),
    readAt: isoRequired(row.read_at),
    unread: row.read_version < task.version,
  };
}
