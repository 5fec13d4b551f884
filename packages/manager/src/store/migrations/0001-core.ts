import { sql, type Kysely } from 'kysely';

/**
 * Runs, commands, events and runners. Every cross-request invariant is a constraint here:
 * per-run event seq (primary key) and event keys (unique) make appends idempotent; command
 * seq and idempotency keys are unique per run; run and command states are checked values.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE runs (
      run_id text PRIMARY KEY,
      tenant_id text NOT NULL,
      project_id text NOT NULL,
      provider_id text NOT NULL,
      backend_profile text NOT NULL,
      workspace_ref jsonb NOT NULL,
      execution_policy jsonb NOT NULL,
      trace_sink jsonb,
      resource_bundle_ref jsonb,
      session_ref jsonb,
      session_id text,
      metadata jsonb NOT NULL DEFAULT '{}',
      state text NOT NULL CHECK (state IN ('pending','claimed','running','completed','failed','blocked','cancelled')),
      failure_kind text,
      message text,
      failure_details jsonb,
      lease_owner text,
      lease_expires_at timestamptz,
      lease_epoch integer NOT NULL DEFAULT 0,
      heartbeat_at timestamptz,
      last_activity_at timestamptz,
      last_activity_kind text,
      last_seq integer NOT NULL DEFAULT 0,
      command_seq integer NOT NULL DEFAULT 0,
      latest_command_id text,
      cancel_requested_at timestamptz,
      cancel_reason text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      claimed_at timestamptz,
      terminal_at timestamptz,
      CHECK ((lease_owner IS NULL) = (lease_expires_at IS NULL))
    )`.execute(db);
  await sql`CREATE INDEX runs_session_idx ON runs (session_id, created_at) WHERE session_id IS NOT NULL`.execute(
    db,
  );

  await sql`
    CREATE TABLE commands (
      command_id text PRIMARY KEY,
      run_id text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
      seq integer NOT NULL,
      type text NOT NULL CHECK (type IN ('turn','steer','interrupt','resume')),
      state text NOT NULL CHECK (state IN ('accepted','delivered','confirmed','completed','failed','blocked','cancelled','expired')),
      idempotency_key text,
      payload_hash text NOT NULL,
      payload jsonb NOT NULL,
      target_command_id text,
      thread_id text,
      turn_id text,
      runner_id text,
      failure_kind text,
      message text,
      steer_delivery jsonb,
      cancel_requested_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      delivered_at timestamptz,
      confirmed_at timestamptz,
      terminal_at timestamptz,
      expires_at timestamptz NOT NULL,
      event_count integer NOT NULL DEFAULT 0,
      last_event_seq integer,
      UNIQUE (run_id, seq),
      UNIQUE (run_id, idempotency_key)
    )`.execute(db);
  await sql`CREATE INDEX commands_expiry_idx ON commands (expires_at) WHERE state = 'accepted'`.execute(
    db,
  );

  await sql`
    CREATE TABLE events (
      run_id text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
      seq integer NOT NULL,
      command_id text,
      category text NOT NULL CHECK (category IN ('system','assistant_message','tool_call','command_output','diff','error','backend_status','terminal_status')),
      name text,
      event_key text,
      observed_at timestamptz NOT NULL,
      recorded_at timestamptz NOT NULL DEFAULT now(),
      data jsonb NOT NULL,
      PRIMARY KEY (run_id, seq),
      UNIQUE (run_id, event_key)
    )`.execute(db);
  // Result aggregation reads one command's events of one category (terminal, assistant, tool,
  // output), newest first or within a seq window.
  await sql`CREATE INDEX events_scope_idx ON events (run_id, command_id, category, seq)`.execute(
    db,
  );

  await sql`
    CREATE TABLE runners (
      runner_id text PRIMARY KEY,
      run_id text NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
      attempt_id text,
      runner_job_id text,
      hostname text,
      pid integer,
      version text,
      work_ready jsonb,
      registered_at timestamptz NOT NULL DEFAULT now(),
      last_seen_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX runners_run_idx ON runners (run_id)`.execute(db);
}
