import { sql } from 'kysely';
import { newId, ServiceError, type SessionRef } from '@svc/contracts';
import { dbNow, type Tx } from '../../store/runs.js';
import type { Ctx } from '../context.js';
import { assertCapacity } from '../scheduler/capacity.js';
import {
  changeTask,
  findAttempt,
  insertAttempt,
  lockTask,
  LAST_CHANGE_SEQ,
  takeChangeSeqs,
  openAttempt,
  updateAttempt,
  type AttemptRow,
  type TaskRow,
} from './store.js';
import { preparedForOne } from '../../store/prepared.js';
import { attemptsLeft, attemptsSinceRetry } from './budget.js';

/**
 * An attempt still `dispatched` with no run this long after it was created was cut off between
 * its two steps (a crash); it no longer blocks the task. Dispatch answers within 60 s (spec/2).
 */
export const DISPATCH_STALL_MS = 120_000;

export function stalled(attempt: AttemptRow, now: Date): boolean {
  return (
    attempt.state === 'dispatched' &&
    attempt.run_id === null &&
    now.getTime() - new Date(attempt.created_at).getTime() > DISPATCH_STALL_MS
  );
}

/**
 * Whether the task may get a new attempt: not completed or cancelled, no attempt in flight, and
 * attempts left. Throws the failure kind that tells the caller what to do instead.
 */
export function checkDispatchable(task: TaskRow, open: AttemptRow | undefined): void {
  if (task.state === 'completed' || task.state === 'cancelled')
    throw new ServiceError(
      'task-terminal',
      `task ${task.task_id} is ${task.state}; it accepts no dispatch`,
      { taskId: task.task_id, state: task.state },
    );
  if (open)
    throw new ServiceError(
      'attempt-in-progress',
      `task ${task.task_id} has attempt ${open.attempt_id} ${open.state}; refresh it or wait for its outcome`,
      { taskId: task.task_id, attemptId: open.attempt_id, attemptState: open.state },
    );
  if (!attemptsLeft(task))
    throw new ServiceError(
      'attempts-exhausted',
      `task ${task.task_id} used ${attemptsSinceRetry(task)} of ${task.max_attempts} attempts; queue retry ${task.task_id} gives it a fresh budget`,
      {
        taskId: task.task_id,
        attempts: attemptsSinceRetry(task),
        maxAttempts: task.max_attempts,
      },
    );
}

export type Claim =
  { kind: 'replay'; attempt: AttemptRow } | { kind: 'claimed'; attempt: AttemptRow; task: TaskRow };

/**
 * Step one of a dispatch, under the task's row lock: decide, then write the attempt and move
 * the task to `dispatched`. Concurrent dispatches queue on the lock; the first one commits an
 * attempt and the rest see it in flight. The partial unique index on open attempts backs this.
 */
export async function claimAttempt(
  ctx: Ctx,
  taskId: string,
  attemptId: string | undefined,
): Promise<Claim> {
  try {
    return await ctx.db.transaction().execute(async (trx) => {
      const task = await lockTask(trx, taskId);
      if (!task) throw new ServiceError('not-found', `task ${taskId} not found`);
      if (attemptId) {
        const known = await findAttempt(trx, attemptId);
        if (known) return { kind: 'replay', attempt: known };
      }
      const recovered = await failStalled(trx, await openAttempt(trx, taskId));
      const open = recovered ? undefined : await openAttempt(trx, taskId);
      checkDispatchable(task, open);
      await assertCapacity(trx, ctx.config.scheduler, slotOf(task));
      const { attempt, task: changed } = await createAttempt(trx, task, attemptId, recovered);
      return { kind: 'claimed', attempt, task: changed };
    });
  } catch (error) {
    // A unique key caught what the lock did not (an attemptId reused across tasks).
    if ((error as { code?: string }).code === '23505')
      throw new ServiceError(
        'attempt-in-progress',
        `an attempt of task ${taskId} already exists with this identity`,
        { taskId, ...(attemptId ? { attemptId } : {}) },
      );
    throw error;
  }
}

export const slotOf = (task: TaskRow) => ({
  tenantId: task.tenant_id,
  backendProfile: task.backend_profile,
  queue: task.queue,
  concurrencyKey: task.concurrency_key,
  concurrencyLimit: task.concurrency_limit,
});

/**
 * Write a new attempt of a locked task and move the task to `dispatched`: the one place an
 * attempt is created, for manual dispatch and the scheduler alike.
 */
export async function createAttempt(
  trx: Tx,
  task: TaskRow,
  attemptId: string | undefined,
  recovered = false,
): Promise<{ attempt: AttemptRow; task: TaskRow }> {
  const ref = task.session_ref as SessionRef | null;
  const sessionId = ref?.sessionId ?? newId('ses');
  const attempt = await insertAttempt(trx, {
    attempt_id: attemptId ?? newId('att'),
    task_id: task.task_id,
    retry_index: task.attempt_count,
    state: 'dispatched',
    session_id: sessionId,
    session_origin: ref ? 'task-session-ref' : 'bootstrapped',
    // A session made for this attempt starts a new thread; it is never presented as resumed.
    thread: ref ? null : 'start',
  });
  const changed = await changeTask(trx, task.task_id, {
    state: 'dispatched',
    latest_attempt_id: attempt.attempt_id,
    session_id: sessionId,
    attempt_count: sql`attempt_count + 1`,
    deferrals: 0,
    ...(recovered ? { failed_attempts: sql`failed_attempts + 1` } : {}),
  });
  return { attempt, task: changed };
}

/**
 * `createAttempt` for a batch of locked tasks in one statement (change numbers taken, tasks
 * moved, attempts inserted), not three per task: the scheduler's claim holds the capacity
 * lock meanwhile. Each task still gets its own change number, in the order given.
 */
export async function createAttempts(
  trx: Tx,
  tasks: readonly TaskRow[],
): Promise<Array<{ attempt: AttemptRow; task: TaskRow }>> {
  if (tasks.length === 0) return [];
  const rows = tasks.map((task) => {
    const ref = task.session_ref as SessionRef | null;
    return {
      attempt_id: newId('att'),
      task_id: task.task_id,
      retry_index: task.attempt_count,
      state: 'dispatched',
      session_id: ref?.sessionId ?? newId('ses'),
      session_origin: ref ? 'task-session-ref' : 'bootstrapped',
      thread: ref ? null : 'start',
    };
  });
  const n = rows.length;
  const column = <K extends keyof (typeof rows)[number]>(key: K) => rows.map((r) => r[key]);
  // Change numbers, the tasks moved and the attempts in one statement. The tasks are locked by
  // the caller, so each moved row is the locked one with the columns this statement changed,
  // returned beside its attempt (as JSON, but for the one timestamp).
  // Kysely writes a raw CTE body as given: its parentheses are part of the SQL text.
  const made = await takeChangeSeqs(trx, n)
    .with(
      'moved',
      () =>
        sql<{ task_id: string; updated_at: Date }>`(
        UPDATE queue_tasks t SET
          state = 'dispatched', latest_attempt_id = v.attempt_id, session_id = v.session_id,
          attempt_count = t.attempt_count + 1, deferrals = 0, version = t.version + 1,
          change_seq = ${LAST_CHANGE_SEQ} - ${n} + v.ord, updated_at = now()
        FROM unnest(
          ${column('task_id')}::text[], ${column('attempt_id')}::text[],
          ${column('session_id')}::text[]
        ) WITH ORDINALITY AS v(task_id, attempt_id, session_id, ord)
        WHERE t.task_id = v.task_id
        RETURNING t.task_id, t.updated_at, jsonb_build_object(
          'state', t.state, 'latest_attempt_id', t.latest_attempt_id,
          'session_id', t.session_id, 'attempt_count', t.attempt_count,
          'deferrals', t.deferrals, 'version', t.version, 'change_seq', t.change_seq
        ) AS changed)`,
    )
    .insertInto('queue_attempts')
    .values(rows)
    .returningAll()
    .returning([
      sql<
        Partial<TaskRow>
      >`(SELECT m.changed FROM moved m WHERE m.task_id = queue_attempts.task_id)`.as(
        'task_changed',
      ),
      sql<Date>`(SELECT m.updated_at FROM moved m WHERE m.task_id = queue_attempts.task_id)`.as(
        'task_updated_at',
      ),
    ])
    .modifyEnd(preparedForOne(n))
    .execute();
  const byTask = new Map(tasks.map((task) => [task.task_id, task]));
  return made.map(({ task_changed, task_updated_at, ...attempt }) => ({
    attempt,
    task: { ...byTask.get(attempt.task_id)!, ...task_changed, updated_at: task_updated_at },
  }));
}

async function failStalled(trx: Tx, open: AttemptRow | undefined): Promise<boolean> {
  if (!open || !stalled(open, await dbNow(trx))) return false;
  await updateAttempt(trx, open.attempt_id, {
    state: 'failed',
    terminal_status: 'failed',
    failure_kind: 'infra-failed',
    message: 'dispatch was interrupted before its run was created',
    terminal_at: sql`now()`,
  });
  return true;
}
