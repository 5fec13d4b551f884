import { sql, type Kysely } from 'kysely';

/**
 * A runner's event batch in one call: `svc_append_events` locks the run, checks the lease
 * (owner and token digest), the batch's command ids and its keys, then writes the events, the
 * run's last seq, the per-command counters and the wake-up. One round trip and one commit per
 * append, with the plans of its statements kept by PL/pgSQL instead of parsed and planned per
 * request. Each statement inside takes a fresh snapshot after the lock, so keys committed by an
 * append it waited for are seen. It answers NULL whenever the batch needs more than the plain
 * case (no lease, an unknown command, a key already stored): the caller then takes the general
 * path, which explains the refusal or returns the stored seqs of a retried batch.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION svc_append_events(
      p_run text, p_runner text, p_token_hash text, p_rows jsonb, p_counts jsonb,
      p_commands text[], p_channel text, p_wake text
    ) RETURNS integer LANGUAGE plpgsql AS $fn$
    DECLARE
      v_last integer;
      v_owner text;
      v_hash text;
    BEGIN
      SELECT last_seq, lease_owner, lease_token_hash INTO v_last, v_owner, v_hash
        FROM runs WHERE run_id = p_run FOR UPDATE;
      IF NOT FOUND OR v_owner IS DISTINCT FROM p_runner OR v_hash IS NULL
         OR p_token_hash IS NULL OR v_hash <> p_token_hash THEN
        RETURN NULL;
      END IF;
      IF cardinality(p_commands) > 0 AND (
        SELECT count(*) FROM commands WHERE run_id = p_run AND command_id = ANY (p_commands)
      ) <> cardinality(p_commands) THEN
        RETURN NULL;
      END IF;
      IF EXISTS (
        SELECT 1 FROM events WHERE run_id = p_run AND event_key = ANY (
          ARRAY(SELECT x->>'event_key' FROM jsonb_array_elements(p_rows) x))
      ) THEN
        RETURN NULL;
      END IF;
      INSERT INTO events (run_id, seq, command_id, category, name, event_key, observed_at, data)
        SELECT p_run, v_last + x.i, x.command_id, x.category, x.name, x.event_key, x.observed_at,
          x.data
        FROM jsonb_to_recordset(p_rows) AS x(i integer, command_id text, category text,
          name text, event_key text, observed_at timestamptz, data jsonb);
      UPDATE runs SET last_seq = v_last + jsonb_array_length(p_rows), updated_at = now()
        WHERE run_id = p_run;
      UPDATE commands c SET event_count = c.event_count + v.count, last_event_seq = v_last + v.last_i
        FROM jsonb_to_recordset(p_counts) AS v(command_id text, count integer, last_i integer)
        WHERE c.command_id = v.command_id;
      PERFORM pg_notify(p_channel, p_wake);
      RETURN v_last + 1;
    END
    $fn$`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP FUNCTION IF EXISTS svc_append_events(text, text, text, jsonb, jsonb, text[], text, text)`.execute(
    db,
  );
}
