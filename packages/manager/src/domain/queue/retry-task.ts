import { sql } from 'kysely';
import {
  newId,
  RETRY_BULK_DEFAULT,
  RETRYABLE_TASK_STATES,
  ServiceError,
  type QueuePlan,
  type Task,
  type TaskRetryBody,
  type TaskRetryBulkBody,
  type TaskRetryBulkResponse,
} from '@svc/contracts';
import { tasksRetried } from '../../metrics/registry.js';
import type { Executor, Tx } from '../../store/runs.js';
import { QUEUE_SUBMIT_KEY } from '../../store/wakeups.js';
import type { Ctx } from '../context.js';
import { toSummary } from './records.js';
import { LAST_CHANGE_SEQ, type TaskRow } from './store.js';
import { getTask, getTaskRow, latestAttempts } from './views.js';
import { waitingView } from './waiting.js';

/**
 * Retry of failed work: a failed, blocked or cancelled task goes back to `queued` with a fresh
 * attempt budget. Its attempts stay (and keep their numbers); `retry_base` moves to the attempt
 * count, so only attempts from here count against maxAttempts. Every retry is one row of the
 * task's retry history (who, when, from which state) and a change readers notice.
 *
 * Exactly once: the tasks are row-locked and their state checked under the lock, so of two
 * retries of one task (or two bulk retries over the same tasks, on any replicas) the second
 * finds it `queued` and leaves it.
 */
const RETRYABLE: readonly string[] = RETRYABLE_TASK_STATES;

/** Who retried: the caller's name for themselves, or its kind. */
export type RetryBy = string;

interface Candidate extends TaskRow {
  latest_failure_kind: string | null;
}

export type RetryOutcome = { kind: 'task'; task: Task } | { kind: 'plan'; plan: QueuePlan };

function assertRetryable(task: TaskRow): void {
  if (!RETRYABLE.includes(task.state))
    throw new ServiceError(
      'state-conflict',
      `task ${task.task_id} is ${task.state}; only a failed, blocked or cancelled task can be retried`,
      { taskId: task.task_id, state: task.state, retryableStates: [...RETRYABLE] },
    );
}

/**
 * Retry one task; a task in another state is refused with `state-conflict`, naming it (a dry
 * run too: it answers what the retry would).
 */
export async function retryTask(
  ctx: Ctx,
  taskId: string,
  body: TaskRetryBody,
  by: RetryBy,
): Promise<RetryOutcome> {
  if (body.dryRun) {
    const task = await getTaskRow(ctx.db, taskId);
    assertRetryable(task);
    return {
      kind: 'plan',
      plan: {
        action: 'retry',
        taskId,
        dryRun: true,
        mutation: false,
        plan: {
          taskState: { from: task.state, to: 'queued' },
          attemptsKept: task.attempt_count,
          freshBudget: task.max_attempts,
          by,
          reason: body.reason ?? null,
        },
        valuesPrinted: false,
      },
    };
  }
  const retried = await ctx.db.transaction().execute(async (trx) => {
    const rows = await lockCandidates(trx, sql`t.task_id = ${taskId}`, 1);
    assertRetryable(rows[0] ?? (await getTaskRow(trx, taskId)));
    return requeue(ctx, trx, rows, { by, reason: body.reason ?? null, bulk: false });
  });
  afterCommit(ctx, retried);
  return { kind: 'task', task: await getTask(ctx, taskId) };
}

/** Retry every task matching the filters, up to `limit`; with dryRun, only say which. */
export async function retryTasks(
  ctx: Ctx,
  body: TaskRetryBulkBody,
  by: RetryBy,
): Promise<TaskRetryBulkResponse> {
  const limit = body.limit ?? RETRY_BULK_DEFAULT;
  const filter = bulkFilter(body);
  const dryRun = body.dryRun ?? false;
  const { rows, more } = dryRun
    ? await readCandidates(ctx.db, filter, limit)
    : await ctx.db.transaction().execute(async (trx) => {
        // One more than the limit says whether more matched; only `limit` are retried.
        const found = await lockCandidates(trx, filter, limit + 1);
        const picked = found.slice(0, limit);
        const moved = await requeue(ctx, trx, picked, {
          by,
          reason: body.reason ?? null,
          bulk: true,
        });
        return { rows: moved, more: found.length > limit };
      });
  if (!dryRun) afterCommit(ctx, rows);
  const [attempts, view] = await Promise.all([
    latestAttempts(ctx.db, rows),
    waitingView(ctx.db, ctx.config.scheduler, rows),
  ]);
  const tasks = rows.map((row) =>
    toSummary(row, attempts.get(row.latest_attempt_id ?? '') ?? null, view),
  );
  return { tasks, dryRun, mutation: !dryRun, more, limit };
}

function bulkFilter(body: TaskRetryBulkBody) {
  const states = body.state === undefined ? ['failed'] : [body.state].flat();
  const after = body.updatedAfter === undefined ? null : new Date(body.updatedAfter);
  if (after && Number.isNaN(after.getTime()))
    throw new ServiceError('schema-invalid', 'updatedAfter is not a time', {
      field: 'updatedAfter',
    });
  const parts = [sql`t.state = ANY(${[...new Set(states)]}::text[])`];
  if (body.queue !== undefined) parts.push(sql`t.queue = ${body.queue}`);
  if (body.failureKind !== undefined) parts.push(sql`a.failure_kind = ${body.failureKind}`);
  // Times in answers have millisecond precision: a task's own updatedAt is not after itself.
  if (after) parts.push(sql`date_trunc('milliseconds', t.updated_at) > ${after}`);
  return sql.join(parts, sql` AND `);
}

/**
 * Retryable tasks matching `where`, oldest change first, row-locked. A task another retry
 * requeued while this one waited on its lock no longer matches when its row is read again,
 * and is left out.
 */
async function lockCandidates(
  trx: Tx,
  where: ReturnType<typeof sql>,
  limit: number,
): Promise<Candidate[]> {
  const { rows } = await sql<Candidate>`
    SELECT t.*, a.failure_kind AS latest_failure_kind FROM queue_tasks t
    LEFT JOIN queue_attempts a ON a.attempt_id = t.latest_attempt_id
    WHERE ${where} AND t.state = ANY(${[...RETRYABLE]}::text[])
    ORDER BY t.change_seq
    LIMIT ${limit}
    FOR UPDATE OF t`.execute(trx);
  return rows;
}

async function readCandidates(
  db: Executor,
  where: ReturnType<typeof sql>,
  limit: number,
): Promise<{ rows: TaskRow[]; more: boolean }> {
  const { rows } = await sql<Candidate>`
    SELECT t.*, a.failure_kind AS latest_failure_kind FROM queue_tasks t
    LEFT JOIN queue_attempts a ON a.attempt_id = t.latest_attempt_id
    WHERE ${where} AND t.state = ANY(${[...RETRYABLE]}::text[])
    ORDER BY t.change_seq
    LIMIT ${limit + 1}`.execute(db);
  return { rows: rows.slice(0, limit).map(withoutExtras), more: rows.length > limit };
}

const withoutExtras = ({ latest_failure_kind: _kind, ...row }: Candidate): TaskRow => row;

/**
 * Requeue locked tasks and record their retries, in one statement: each task gets its own
 * change number (in the order given), a fresh budget, and a place behind the tasks already
 * waiting at its priority.
 */
async function requeue(
  ctx: Ctx,
  trx: Tx,
  tasks: readonly Candidate[],
  who: { by: RetryBy; reason: string | null; bulk: boolean },
): Promise<TaskRow[]> {
  if (tasks.length === 0) return [];
  const n = tasks.length;
  const col = <T>(f: (t: Candidate) => T) => tasks.map(f);
  const { rows } = await sql<TaskRow>`
    WITH next_seq AS (
      UPDATE queue_watermark SET change_seq = change_seq + ${n} WHERE id = 1 RETURNING change_seq
    ),
    v AS (
      SELECT * FROM unnest(
        ${col((t) => t.task_id)}::text[], ${col(() => newId('rty'))}::text[],
        ${col((t) => t.state)}::text[], ${col((t) => t.latest_failure_kind)}::text[]
      ) WITH ORDINALITY AS v(task_id, retry_id, from_state, failure_kind, ord)
    ),
    moved AS (
      UPDATE queue_tasks t SET
        state = 'queued', retry_base = t.attempt_count, retry_count = t.retry_count + 1,
        run_after = NULL, terminal_at = NULL, cancel_reason = NULL, deferrals = 0,
        last_refusal = NULL, version = t.version + 1,
        change_seq = ${LAST_CHANGE_SEQ} - ${n} + v.ord,
        enqueue_seq = ${LAST_CHANGE_SEQ} - ${n} + v.ord, updated_at = now()
      FROM v WHERE t.task_id = v.task_id AND t.state = v.from_state
      RETURNING t.*
    ),
    history AS (
      INSERT INTO queue_task_retries
        (retry_id, task_id, from_state, failure_kind, attempts_before, retried_by, reason, bulk,
         change_seq)
      SELECT v.retry_id, m.task_id, v.from_state, v.failure_kind, m.attempt_count, ${who.by},
        ${who.reason}, ${who.bulk}, m.change_seq
      FROM moved m JOIN v ON v.task_id = m.task_id
    )
    SELECT m.* FROM moved m JOIN v ON v.task_id = m.task_id ORDER BY v.ord`.execute(trx);
  // The scheduler's claims start now, on every replica (NOTIFY is sent on commit).
  await ctx.wakeups.publishIn(trx, QUEUE_SUBMIT_KEY);
  return rows;
}

function afterCommit(ctx: Ctx, rows: readonly TaskRow[]): void {
  if (rows.length === 0) return;
  // This replica's scheduler starts now, not when the NOTIFY comes back.
  ctx.wakeups.committed(QUEUE_SUBMIT_KEY);
  const byQueue = new Map<string, number>();
  for (const row of rows) byQueue.set(row.queue, (byQueue.get(row.queue) ?? 0) + 1);
  for (const [queue, n] of byQueue) tasksRetried.inc({ queue }, n);
}
