import { sql, type Kysely } from 'kysely';

/**
 * Retry of failed work. A person's retry requeues a failed, blocked or cancelled task with a
 * fresh attempt budget: `retry_base` is the attempt count at the last retry, so the attempts
 * that count against `max_attempts` are `attempt_count - retry_base` while attempt numbers keep
 * increasing. `queue_task_retries` is the task's retry history: who, when, from which state.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE queue_tasks
      ADD COLUMN retry_base integer NOT NULL DEFAULT 0,
      ADD COLUMN retry_count integer NOT NULL DEFAULT 0,
      ADD CONSTRAINT queue_tasks_retry_base_check CHECK (retry_base BETWEEN 0 AND attempt_count)`.execute(
    db,
  );
  await sql`
    CREATE TABLE queue_task_retries (
      retry_id text PRIMARY KEY,
      task_id text NOT NULL REFERENCES queue_tasks (task_id) ON DELETE CASCADE,
      from_state text NOT NULL CHECK (from_state IN ('failed', 'blocked', 'cancelled')),
      failure_kind text,
      attempts_before integer NOT NULL,
      retried_by text NOT NULL,
      reason text,
      bulk boolean NOT NULL DEFAULT false,
      change_seq bigint NOT NULL,
      retried_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX queue_task_retries_task_idx ON queue_task_retries (task_id, retried_at)`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE IF EXISTS queue_task_retries`.execute(db);
  await sql`
    ALTER TABLE queue_tasks
      DROP CONSTRAINT IF EXISTS queue_tasks_retry_base_check,
      DROP COLUMN IF EXISTS retry_count,
      DROP COLUMN IF EXISTS retry_base`.execute(db);
}
