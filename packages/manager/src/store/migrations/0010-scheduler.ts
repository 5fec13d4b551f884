import { sql, type Kysely } from 'kysely';

/**
 * The automatic scheduler: when a queued task may start (`run_after`), how it is retried
 * (`retry_policy`), whether a judge reviews its attempts (`judge`) and what a judge asked the
 * next attempt to do (`retry_note`). A task the scheduler could not start (profile not ready,
 * session busy) keeps its attempts and waits with `deferrals` counting the backoff.
 * Per-queue capacity lives in `queue_settings`; replacement runner Jobs are marked as such.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE queue_tasks
      ADD COLUMN run_after timestamptz,
      ADD COLUMN retry_policy jsonb,
      ADD COLUMN judge jsonb,
      ADD COLUMN retry_note text,
      ADD COLUMN deferrals integer NOT NULL DEFAULT 0,
      ADD COLUMN last_refusal jsonb`.execute(db);
  // The scheduler's scan: per tenant, queue order, only tasks waiting to start.
  await sql`
    CREATE INDEX queue_tasks_ready_idx ON queue_tasks (tenant_id, priority DESC, enqueue_seq)
    WHERE state = 'queued'`.execute(db);
  await sql`
    ALTER TABLE queue_judge_runs
      ADD COLUMN verdict text CHECK (verdict IN ('pass','fail')),
      ADD COLUMN backend_profile text,
      ADD COLUMN session_id text,
      ADD COLUMN run_id text,
      ADD COLUMN command_id text,
      ADD COLUMN terminal_at timestamptz`.execute(db);
  await sql`
    CREATE INDEX queue_judge_runs_open_idx ON queue_judge_runs (created_at)
    WHERE state = 'requested'`.execute(db);
  await sql`
    CREATE TABLE queue_settings (
      queue text PRIMARY KEY,
      max_running integer CHECK (max_running >= 0),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`ALTER TABLE runner_jobs ADD COLUMN replacement boolean NOT NULL DEFAULT false`.execute(
    db,
  );
}
