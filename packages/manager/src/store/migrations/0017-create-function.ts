import { sql, type Kysely } from 'kysely';

/**
 * A new turn on a plain run in one call: `svc_create_command` locks the run, checks that it
 * takes commands and that the idempotency key is new, then writes the command (its seq the
 * run's next), the run's command seq and latest command, and the runner's wake-up. The general
 * path pays four round trips (begin, lock, insert, commit); this pays one.
 *
 * `p_row` is the command as the application builds it (`commandRowOf`); the columns it sets
 * are listed here, the rest take their defaults. No row comes back when the request needs the
 * general path: no such run, a run that ended, a session run (its session follows the turn in
 * the same transaction), a key already used.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION svc_create_command(
      p_run text, p_row jsonb, p_latest boolean, p_terminal_states text[], p_channel text,
      p_wake text
    ) RETURNS SETOF commands LANGUAGE plpgsql AS $fn$
    DECLARE
      v_state text;
      v_seq integer;
      v_session text;
    BEGIN
      SELECT state, command_seq, session_id INTO v_state, v_seq, v_session
        FROM runs WHERE run_id = p_run FOR UPDATE;
      IF NOT FOUND OR v_session IS NOT NULL OR v_state = ANY (p_terminal_states) THEN
        RETURN;
      END IF;
      IF p_row->>'idempotency_key' IS NOT NULL AND EXISTS (
        SELECT 1 FROM commands WHERE run_id = p_run AND idempotency_key = p_row->>'idempotency_key'
      ) THEN
        RETURN;
      END IF;
      RETURN QUERY
        INSERT INTO commands (command_id, run_id, seq, type, state, idempotency_key, payload_hash,
          request_hash, payload, target_command_id, thread_id, expires_at)
        SELECT r.command_id, p_run, v_seq + 1, r.type, r.state, r.idempotency_key, r.payload_hash,
          r.request_hash, r.payload, r.target_command_id, r.thread_id, r.expires_at
        FROM jsonb_populate_record(NULL::commands, p_row) r
        RETURNING *;
      UPDATE runs SET command_seq = v_seq + 1,
          latest_command_id = CASE WHEN p_latest THEN p_row->>'command_id' ELSE latest_command_id END,
          updated_at = now()
        WHERE run_id = p_run;
      PERFORM pg_notify(p_channel, p_wake);
    END
    $fn$`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP FUNCTION IF EXISTS svc_create_command(text, jsonb, boolean, text[], text, text)`.execute(
    db,
  );
}
