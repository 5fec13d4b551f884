import { sql, type Insertable, type Selectable } from 'kysely';
import type { Executor, Tx } from '../../store/runs.js';
import type {
  QueueAttemptsTable,
  QueueReadCursorsTable,
  QueueTaskRetriesTable,
  QueueTasksTable,
} from '../../store/schema.js';
import { PREPARED } from '../../store/prepared.js';

/** SQL of the queue, one function per operation; callers own transactions. */
export type TaskRow = Selectable<QueueTasksTable>;
export type AttemptRow = Selectable<QueueAttemptsTable>;
export type ReadCursorRow = Selectable<QueueReadCursorsTable>;
export type RetryRow = Selectable<QueueTaskRetriesTable>;

type Patch<T> = Partial<Record<keyof T, unknown>>;

/**
 * The next queue-wide change number. The counter row stays locked until the caller commits, so
 * numbers are handed out in commit order (see migration 0005).
 */
/** Take `count` change numbers (default one); returns the last, the others precede it. */
export async function nextChangeSeq(trx: Tx, count = 1): Promise<number> {
  const row = await takeChangeSeqs(trx, count)
    .selectFrom('next_seq')
    .select('change_seq')
    .executeTakeFirstOrThrow();
  return Number(row.change_seq);
}

/**
 * `nextChangeSeq` as a CTE (`next_seq`) of the statement that uses the numbers: no round trip
 * of its own. The counter is still locked before the rows the statement writes are, as when it
 * went first, so the lock order, and with it commit order, is unchanged.
 */
export function takeChangeSeqs(db: Executor, count = 1) {
  return db.with('next_seq', (q) =>
    q
      .updateTable('queue_watermark')
      .set({ change_seq: sql`change_seq + ${count}` } as never)
      .where('id', '=', 1)
      .returning('change_seq'),
  );
}

/** The last number `takeChangeSeqs` took, inside its statement. */
export const LAST_CHANGE_SEQ = sql<number>`(SELECT change_seq FROM next_seq)`;

export async function currentChangeSeq(db: Executor): Promise<number> {
  const row = await db
    .selectFrom('queue_watermark')
    .select('change_seq')
    .where('id', '=', 1)
    .modifyEnd(PREPARED)
    .executeTakeFirstOrThrow();
  return Number(row.change_seq);
}

export async function findTask(db: Executor, taskId: string): Promise<TaskRow | undefined> {
  return db.selectFrom('queue_tasks').selectAll().where('task_id', '=', taskId).executeTakeFirst();
}

/** Row lock for the rest of the transaction: serializes every writer of one task. */
export async function lockTask(trx: Tx, taskId: string): Promise<TaskRow | undefined> {
  return trx
    .selectFrom('queue_tasks')
    .selectAll()
    .where('task_id', '=', taskId)
    .forUpdate()
    .executeTakeFirst();
}

/** A change readers should notice: new version, new changeSeq, new updatedAt. */
export async function changeTask(
  trx: Tx,
  taskId: string,
  patch: Patch<QueueTasksTable>,
): Promise<TaskRow> {
  return takeChangeSeqs(trx)
    .updateTable('queue_tasks')
    .set({
      ...patch,
      version: sql`version + 1`,
      change_seq: LAST_CHANGE_SEQ,
      updated_at: sql`now()`,
    } as never)
    .where('task_id', '=', taskId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function insertAttempt(
  trx: Tx,
  row: Insertable<QueueAttemptsTable>,
): Promise<AttemptRow> {
  return trx.insertInto('queue_attempts').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function findAttempt(
  db: Executor,
  attemptId: string,
): Promise<AttemptRow | undefined> {
  return db
    .selectFrom('queue_attempts')
    .selectAll()
    .where('attempt_id', '=', attemptId)
    .executeTakeFirst();
}

export async function findAttempts(db: Executor, attemptIds: string[]): Promise<AttemptRow[]> {
  if (attemptIds.length === 0) return [];
  return db
    .selectFrom('queue_attempts')
    .selectAll()
    .where('attempt_id', 'in', attemptIds)
    .execute();
}

/** A task's attempts, oldest first: the newest `limit` of them. */
export async function listAttempts(
  db: Executor,
  taskId: string,
  limit: number,
): Promise<AttemptRow[]> {
  const rows = await db
    .selectFrom('queue_attempts')
    .selectAll()
    .where('task_id', '=', taskId)
    .orderBy('retry_index', 'desc')
    .limit(limit)
    .execute();
  return rows.reverse();
}

export async function openAttempt(db: Executor, taskId: string): Promise<AttemptRow | undefined> {
  return db
    .selectFrom('queue_attempts')
    .selectAll()
    .where('task_id', '=', taskId)
    .where('state', 'in', ['dispatched', 'running'])
    .executeTakeFirst();
}

export async function updateAttempt(
  db: Executor,
  attemptId: string,
  patch: Patch<QueueAttemptsTable>,
): Promise<AttemptRow> {
  return db
    .updateTable('queue_attempts')
    .set({ ...patch, updated_at: sql`now()` } as never)
    .where('attempt_id', '=', attemptId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function findReadCursor(
  db: Executor,
  readerId: string,
  taskId: string,
): Promise<ReadCursorRow | undefined> {
  return db
    .selectFrom('queue_read_cursors')
    .selectAll()
    .where('reader_id', '=', readerId)
    .where('task_id', '=', taskId)
    .executeTakeFirst();
}

/** A cursor only moves forward: a late, older read never hides a newer change. */
export async function upsertReadCursor(
  db: Executor,
  row: Insertable<QueueReadCursorsTable>,
): Promise<ReadCursorRow> {
  return db
    .insertInto('queue_read_cursors')
    .values(row)
    .onConflict((oc) =>
      oc.columns(['reader_id', 'task_id']).doUpdateSet({
        reader_kind: sql`excluded.reader_kind`,
        read_version: sql`greatest(queue_read_cursors.read_version, excluded.read_version)`,
        read_change_seq: sql`greatest(queue_read_cursors.read_change_seq, excluded.read_change_seq)`,
        read_at: sql`now()`,
      } as never),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function listReferences(db: Executor, taskId: string) {
  return db
    .selectFrom('queue_task_references')
    .selectAll()
    .where('task_id', '=', taskId)
    .orderBy('position')
    .execute();
}

/** A task's retry history, oldest first: the newest `limit` retries. */
export async function listRetries(db: Executor, taskId: string, limit = 100): Promise<RetryRow[]> {
  const rows = await db
    .selectFrom('queue_task_retries')
    .selectAll()
    .where('task_id', '=', taskId)
    .orderBy('retried_at', 'desc')
    .orderBy('change_seq', 'desc')
    .limit(limit)
    .execute();
  return rows.reverse();
}

export async function listJudgeRuns(db: Executor, taskId: string) {
  return db
    .selectFrom('queue_judge_runs')
    .selectAll()
    .where('task_id', '=', taskId)
    .orderBy('created_at')
    .limit(50)
    .execute();
}
