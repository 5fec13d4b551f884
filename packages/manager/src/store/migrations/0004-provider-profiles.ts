import { sql, type Kysely } from 'kysely';

/**
 * Provider profiles. The profile data itself lives only in its Secret; the store keeps what is
 * safe to keep: validation records (which canary run proved or failed a profile), an audit
 * trail of delegated changes with hashed identities, and the salt of the irreversible hash
 * suffixes (one row, so every replica prints the same suffix for the same value).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE provider_profile_settings (
      id integer PRIMARY KEY CHECK (id = 1),
      hash_salt text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);

  await sql`
    CREATE TABLE provider_validations (
      validation_id text PRIMARY KEY,
      profile text NOT NULL,
      status text NOT NULL CHECK (status IN ('running','completed','failed','cancelled')),
      failure_kind text,
      message text,
      run_id text REFERENCES runs (run_id) ON DELETE SET NULL,
      command_id text,
      runner_job_id text,
      job_name text,
      secret_resource_version text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz,
      CHECK ((status = 'running') = (finished_at IS NULL))
    )`.execute(db);
  await sql`CREATE INDEX provider_validations_profile_idx ON provider_validations (profile, created_at DESC)`.execute(
    db,
  );

  await sql`
    CREATE TABLE provider_profile_audit (
      audit_id text PRIMARY KEY,
      profile text NOT NULL,
      action text NOT NULL CHECK (action IN ('credential-put','config-put','delete','validate')),
      outcome text NOT NULL,
      delegated_system text,
      delegated_user_hash text,
      delegated_username_hash text,
      request_id text,
      reason text,
      trace_id text NOT NULL,
      resource_version text,
      credential_hash_suffix text,
      config_hash_suffix text,
      bridge_sync_done boolean,
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX provider_profile_audit_profile_idx ON provider_profile_audit (profile, created_at)`.execute(
    db,
  );
}
