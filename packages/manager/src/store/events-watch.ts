import { sql } from 'kysely';
import type { Executor } from './runs.js';
import { PREPARED } from './prepared.js';

/**
 * Marks the run's events watched for `budgetMs` more (the database's clock): until then its
 * appends send their wake-up to every replica (migration 0019). Written only when it extends
 * the mark. The caller reads what it waits for after this returns: an append that locked the
 * run before the mark was written is committed by then (the mark waited for its row lock), and
 * every later one sees the mark. A mark lost in a crash went with the waits it served, so its
 * commit does not wait for the WAL flush.
 */
export async function watchEvents(db: Executor, runId: string, budgetMs: number): Promise<void> {
  const until = sql`now() + make_interval(secs => ${budgetMs / 1000}::float8)`;
  await sql`${PREPARED}
    WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true) AS setting)
    UPDATE runs SET events_watched_until = ${until}
    FROM relaxed
    WHERE run_id = ${runId}
      AND (events_watched_until IS NULL OR events_watched_until < ${until})`.execute(db);
}
