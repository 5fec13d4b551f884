import { sql, type Kysely } from 'kysely';

/**
 * Sessions: the durable mapping of a conversation to the agent's thread, its storage volume and
 * the run serving it now; reader cursors make "unread" a per-reader fact. `version` moves on
 * every change a reader should notice.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE sessions (
      session_id text PRIMARY KEY,
      conversation_id text,
      thread_id text,
      profile_threads jsonb NOT NULL DEFAULT '{}',
      backend_profile text NOT NULL,
      tenant_id text NOT NULL,
      project_id text NOT NULL,
      run_base jsonb NOT NULL,
      execution_state text NOT NULL CHECK (execution_state IN ('idle','running','terminal')),
      active_run_id text,
      active_command_id text,
      last_run_id text,
      last_command_id text,
      last_outcome text,
      version integer NOT NULL DEFAULT 1,
      storage_kind text NOT NULL CHECK (storage_kind IN ('pvc','evicted')),
      pvc_name text NOT NULL,
      pvc_namespace text NOT NULL,
      pvc_phase text,
      storage_size_bytes bigint,
      storage_files_count integer,
      storage_sha256 text,
      storage_updated_at timestamptz,
      storage_evicted_at timestamptz,
      expires_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX sessions_listing_idx ON sessions (updated_at DESC, session_id DESC)`.execute(
    db,
  );
  await sql`CREATE INDEX sessions_gc_idx ON sessions (expires_at) WHERE storage_kind = 'pvc'`.execute(
    db,
  );
  await sql`
    CREATE TABLE session_readers (
      session_id text NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
      reader_id text NOT NULL,
      read_version integer NOT NULL,
      read_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (session_id, reader_id)
    )`.execute(db);
}
