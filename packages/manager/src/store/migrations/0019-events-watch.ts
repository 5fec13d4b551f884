import { sql, type Kysely } from 'kysely';
import { up as appendFunctionOf0015 } from './0015-append-function.js';

/**
 * An append wakes other replicas only when someone waits. A NOTIFY makes its transaction's
 * commit take a database-wide lock held through the commit's WAL flush, so every append that
 * notified committed one at a time (measured: 800-1,055 appends/s with it, 1,520-1,840 without,
 * on the function alone). `runs.events_watched_until` is set by a reader about to wait for the
 * run's events (a result or events long-poll, an event stream) and `svc_append_events` sends
 * its wake-up only while that time has not passed.
 *
 * No wake-up is lost: the function reads the mark under the run's row lock. A mark committed
 * before the append locked the row is seen, so the append notifies; a mark written while the
 * append holds the lock waits for its commit, and the reader's read after its mark then sees
 * the append's events. The function is otherwise the one of migration 0015.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE runs ADD COLUMN events_watched_until timestamptz`.execute(db);
  await sql`
    CREATE OR REPLACE FUNCTION svc_append_events(
      p_run text, p_runner text, p_token_hash text, p_rows jsonb, p_counts jsonb,
      p_commands text[], p_channel text, p_wake text
    ) RETURNS integer LANGUAGE plpgsql AS $fn$
    DECLARE
      v_last integer;
      v_owner text;
      v_hash text;
      v_watched timestamptz;
    BEGIN
      SELECT last_seq, lease_owner, lease_token_hash, events_watched_until
        INTO v_last, v_owner, v_hash, v_watched
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
      IF v_watched > now() THEN
        PERFORM pg_notify(p_channel, p_wake);
      END IF;
      RETURN v_last + 1;
    END
    $fn$`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  // The function of 0015 first: the one above reads the column dropped next.
  await appendFunctionOf0015(db);
  await sql`ALTER TABLE runs DROP COLUMN IF EXISTS events_watched_until`.execute(db);
}
