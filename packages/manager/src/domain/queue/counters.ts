import { sql } from 'kysely';
import type { Executor } from '../../store/runs.js';
import { PREPARED } from '../../store/prepared.js';

/**
 * Queue counters (migration 0014): signed deltas written by triggers in the transactions that
 * move tasks, attempts and read cursors. Each read sums its key's rows in one statement, so it
 * sees one snapshot and is exact; its cost is the number of keys plus the deltas not folded yet.
 */

export interface TaskCount {
  queue: string;
  lane: string;
  state: string;
  backend_profile: string;
  n: number;
}

export interface AttemptCount {
  state: string;
  failure_kind: string | null;
  n: number;
  retries: number;
}

/** Past this many unfolded rows a read folds the log itself rather than wait for maintenance. */
const FOLD_AFTER_ROWS = 5_000;

const byQueue = (queue: string | undefined) => (queue ? sql`WHERE queue = ${queue}` : sql``);

export async function taskCounts(db: Executor, queue?: string): Promise<TaskCount[]> {
  const { rows } = await sql<TaskCount & { rows: number }>`${PREPARED}
    SELECT queue, lane, state, backend_profile, sum(n)::int AS n, count(*)::int AS rows
    FROM queue_task_counts ${byQueue(queue)}
    GROUP BY queue, lane, state, backend_profile
    ORDER BY queue, lane, state, backend_profile`.execute(db);
  if (rows.reduce((sum, r) => sum + r.rows, 0) > FOLD_AFTER_ROWS) await foldQueueCounters(db);
  return rows.filter((r) => r.n !== 0);
}

export async function attemptCounts(db: Executor, queue?: string): Promise<AttemptCount[]> {
  const { rows } = await sql<AttemptCount>`${PREPARED}
    SELECT state, failure_kind, sum(n)::int AS n, sum(retries)::int AS retries
    FROM queue_attempt_counts ${byQueue(queue)}
    GROUP BY state, failure_kind
    HAVING sum(n) <> 0`.execute(db);
  return rows;
}

/** Tasks in the queue (or all queues) whose latest version the reader has read. */
export async function currentReads(
  db: Executor,
  readerId: string,
  queue?: string,
): Promise<number> {
  const { rows } = await sql<{ n: number }>`${PREPARED}
    SELECT coalesce(sum(n), 0)::int AS n FROM queue_read_counts
    WHERE reader_id = ${readerId} ${queue ? sql`AND queue = ${queue}` : sql``}`.execute(db);
  return rows[0]?.n ?? 0;
}

/**
 * Collapses each counter log into one row per key. The delete and the insert of the sums are one
 * statement, so a concurrent reader sees either the deltas or their sum, never both or neither;
 * a delta committed meanwhile is not in the statement's snapshot and stays for the next fold.
 * Two folds at once are safe: the second skips rows the first deleted.
 */
export async function foldQueueCounters(db: Executor): Promise<void> {
  await sql`
    WITH d AS (DELETE FROM queue_task_counts RETURNING *)
    INSERT INTO queue_task_counts
      SELECT queue, lane, state, backend_profile, sum(n) FROM d
      GROUP BY queue, lane, state, backend_profile HAVING sum(n) <> 0`.execute(db);
  await sql`
    WITH d AS (DELETE FROM queue_attempt_counts RETURNING *)
    INSERT INTO queue_attempt_counts
      SELECT queue, state, failure_kind, sum(n), sum(retries) FROM d
      GROUP BY queue, state, failure_kind HAVING sum(n) <> 0 OR sum(retries) <> 0`.execute(db);
  await sql`
    WITH d AS (DELETE FROM queue_read_counts RETURNING *)
    INSERT INTO queue_read_counts
      SELECT reader_id, queue, sum(n) FROM d GROUP BY reader_id, queue HAVING sum(n) <> 0`.execute(
    db,
  );
}
