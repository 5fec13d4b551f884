import { sql, type Kysely } from 'kysely';

/**
 * The task queue: tasks and their attempts (each attempt row carries its summary), read cursors,
 * judge runs and task references. Statistics are grouped from these rows, never from events.
 *
 * `change_seq` comes from the single counter row `queue_watermark`, bumped inside every task
 * change. Its row lock is held until commit, so sequence order is commit order and a poller
 * asking for `change_seq > n` never skips a change committed late with a smaller number.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE queue_watermark (
      id integer PRIMARY KEY CHECK (id = 1),
      change_seq bigint NOT NULL
    )`.execute(db);
  await sql`INSERT INTO queue_watermark (id, change_seq) VALUES (1, 0)`.execute(db);

  await sql`
    CREATE TABLE queue_tasks (
      task_id text PRIMARY KEY,
      tenant_id text NOT NULL,
      project_id text NOT NULL,
      queue text NOT NULL,
      lane text NOT NULL,
      title text NOT NULL,
      priority integer NOT NULL DEFAULT 0,
      state text NOT NULL CHECK (state IN
        ('queued','dispatched','running','completed','failed','blocked','cancelled')),
      backend_profile text NOT NULL,
      provider_id text NOT NULL,
      workspace_ref jsonb NOT NULL,
      resource_bundle_ref jsonb,
      session_ref jsonb,
      execution_policy jsonb,
      payload jsonb NOT NULL,
      payload_hash text NOT NULL,
      metadata jsonb NOT NULL DEFAULT '{}',
      summary text,
      max_attempts integer NOT NULL CHECK (max_attempts BETWEEN 1 AND 20),
      attempt_count integer NOT NULL DEFAULT 0,
      failed_attempts integer NOT NULL DEFAULT 0,
      blocked_attempts integer NOT NULL DEFAULT 0,
      latest_attempt_id text,
      session_id text,
      cancel_reason text,
      version integer NOT NULL DEFAULT 1,
      change_seq bigint NOT NULL,
      enqueue_seq bigint NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      terminal_at timestamptz
    )`.execute(db);
  await sql`CREATE UNIQUE INDEX queue_tasks_change_seq_idx ON queue_tasks (change_seq)`.execute(db);
  await sql`CREATE INDEX queue_tasks_queue_seq_idx ON queue_tasks (queue, change_seq)`.execute(db);
  // Queue order: higher priority first, then first come first served (the changeSeq at submit).
  await sql`CREATE INDEX queue_tasks_order_idx ON queue_tasks (priority DESC, enqueue_seq)`.execute(
    db,
  );
  await sql`CREATE INDEX queue_tasks_queue_order_idx ON queue_tasks (queue, priority DESC, enqueue_seq)`.execute(
    db,
  );
  await sql`CREATE INDEX queue_tasks_state_idx ON queue_tasks (state, queue)`.execute(db);

  await sql`
    CREATE TABLE queue_attempts (
      attempt_id text PRIMARY KEY,
      task_id text NOT NULL REFERENCES queue_tasks (task_id) ON DELETE CASCADE,
      retry_index integer NOT NULL CHECK (retry_index >= 0),
      state text NOT NULL CHECK (state IN
        ('dispatched','running','completed','failed','blocked','cancelled')),
      session_id text,
      session_origin text CHECK (session_origin IN ('task-session-ref','bootstrapped')),
      thread text CHECK (thread IN ('start','resume')),
      run_id text,
      command_id text,
      runner_job_id text,
      terminal_status text,
      failure_kind text,
      message text,
      runner_id text,
      job_name text,
      runner_phase text,
      duration_ms bigint,
      event_count integer,
      last_event_seq integer,
      supervisor jsonb,
      supervisor_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      started_at timestamptz,
      terminal_at timestamptz,
      UNIQUE (task_id, retry_index)
    )`.execute(db);
  // At most one attempt of a task is in flight, whatever the callers do.
  await sql`
    CREATE UNIQUE INDEX queue_attempts_one_open_idx ON queue_attempts (task_id)
    WHERE state IN ('dispatched','running')`.execute(db);
  await sql`CREATE INDEX queue_attempts_state_idx ON queue_attempts (state)`.execute(db);

  await sql`
    CREATE TABLE queue_read_cursors (
      reader_id text NOT NULL,
      task_id text NOT NULL REFERENCES queue_tasks (task_id) ON DELETE CASCADE,
      reader_kind text NOT NULL CHECK (reader_kind IN ('user','agent','client')),
      queue text NOT NULL,
      read_version integer NOT NULL,
      read_change_seq bigint NOT NULL,
      read_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (reader_id, task_id)
    )`.execute(db);
  await sql`CREATE INDEX queue_read_cursors_queue_idx ON queue_read_cursors (reader_id, queue)`.execute(
    db,
  );

  await sql`
    CREATE TABLE queue_judge_runs (
      judge_run_id text PRIMARY KEY,
      task_id text NOT NULL REFERENCES queue_tasks (task_id) ON DELETE CASCADE,
      attempt_id text REFERENCES queue_attempts (attempt_id) ON DELETE SET NULL,
      state text NOT NULL CHECK (state IN ('requested','completed','failed')),
      request jsonb NOT NULL,
      result jsonb,
      failure_kind text,
      retry_suggestion text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX queue_judge_runs_task_idx ON queue_judge_runs (task_id, created_at)`.execute(
    db,
  );

  await sql`
    CREATE TABLE queue_task_references (
      task_id text NOT NULL REFERENCES queue_tasks (task_id) ON DELETE CASCADE,
      position integer NOT NULL,
      kind text NOT NULL CHECK (kind IN ('issue','pr','repository','commit','document','other')),
      ref text NOT NULL,
      url text,
      title text,
      PRIMARY KEY (task_id, position)
    )`.execute(db);
}
