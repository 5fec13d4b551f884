import { sql, type Kysely } from 'kysely';

/**
 * Runner jobs: one row per attempt to run a runner for a run. The attempt id is unique and
 * queryable forever; an idempotency key is unique per run with its payload hash stored.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE runner_jobs (
      runner_job_id text PRIMARY KEY,
      run_id text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
      command_id text NOT NULL REFERENCES commands (command_id) ON DELETE CASCADE,
      attempt_id text NOT NULL UNIQUE,
      runner_id text NOT NULL UNIQUE,
      job_name text NOT NULL UNIQUE,
      namespace text NOT NULL,
      launcher text NOT NULL,
      idempotency_key text,
      payload_hash text NOT NULL,
      image jsonb NOT NULL,
      phase text NOT NULL CHECK (phase IN ('pending','starting','running','succeeded','failed','cancelled')),
      log_path text,
      pod_identity text,
      transient_env jsonb NOT NULL,
      session_pvc jsonb,
      work_ready jsonb,
      ttl_seconds_after_finished integer NOT NULL,
      retention text,
      exit_code integer,
      terminal_summary jsonb,
      manager_instance text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      started_at timestamptz,
      finished_at timestamptz,
      UNIQUE (run_id, idempotency_key)
    )`.execute(db);
  await sql`CREATE INDEX runner_jobs_run_idx ON runner_jobs (run_id, command_id, created_at)`.execute(
    db,
  );
  await sql`CREATE INDEX runner_jobs_active_idx ON runner_jobs (launcher, phase) WHERE phase IN ('pending','starting','running')`.execute(
    db,
  );
}
