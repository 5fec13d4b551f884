import { sql, type Kysely } from 'kysely';

/**
 * Appends of many runs in one call and one commit (`svc_append_groups`): the manager collects
 * the plain batches that arrive while its previous group commits and sends them together. Each
 * batch keeps the guarantees of `svc_append_events` (migration 0019) on its own: it is written
 * whole or not at all, its keys are new, its commands are its run's, its run's lease is held
 * with that token. A batch failing a check is left out and answered NULL (its caller takes the
 * general path, which explains the refusal or returns the seqs of a retried batch); the others
 * are written. One statement per table: the events of every accepted batch in one INSERT, the
 * runs' last seqs in one UPDATE, the per-command counters in one UPDATE.
 *
 * The runs are locked first, in run_id order, so groups sent by several replicas at once never
 * deadlock; the checks and writes after the lock read fresh snapshots (keys committed by an
 * append this one waited for are seen). A run appears at most once per group (the caller
 * makes sure; a second batch of one run would collide on seq and fail the whole call, which the
 * caller then retries batch by batch). The wake-up goes out only for runs a reader is
 * watching, as in 0019.
 *
 * `p_batches`: [{ n, run, runner, token_hash, rows, counts, commands, wake }] with rows and
 * counts as `eventBatch` builds them. Answers one row per batch: n and its first seq (or NULL).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION svc_append_groups(p_batches jsonb, p_channel text)
    RETURNS TABLE (n integer, first_seq integer) LANGUAGE plpgsql AS $fn$
    #variable_conflict use_column
    DECLARE
      v_ok integer[];
    BEGIN
      PERFORM 1 FROM runs
        WHERE run_id IN (SELECT b->>'run' FROM jsonb_array_elements(p_batches) b)
        ORDER BY run_id FOR UPDATE;
      SELECT coalesce(array_agg(b.n), '{}') INTO v_ok
        FROM jsonb_to_recordset(p_batches) AS b(n integer, run text, runner text,
          token_hash text, rows jsonb, commands text[])
        JOIN runs r ON r.run_id = b.run
        WHERE r.lease_owner = b.runner AND r.lease_token_hash = b.token_hash
          AND (cardinality(b.commands) = 0 OR (
            SELECT count(*) FROM commands c WHERE c.run_id = b.run AND c.command_id = ANY (b.commands)
          ) = cardinality(b.commands))
          AND NOT EXISTS (
            SELECT 1 FROM events e WHERE e.run_id = b.run AND e.event_key = ANY (
              ARRAY(SELECT x->>'event_key' FROM jsonb_array_elements(b.rows) x)));
      IF cardinality(v_ok) > 0 THEN
        INSERT INTO events (run_id, seq, command_id, category, name, event_key, observed_at, data)
          SELECT b.run, r.last_seq + x.i, x.command_id, x.category, x.name, x.event_key,
            x.observed_at, x.data
          FROM jsonb_to_recordset(p_batches) AS b(n integer, run text, rows jsonb)
          JOIN runs r ON r.run_id = b.run
          CROSS JOIN LATERAL jsonb_to_recordset(b.rows) AS x(i integer, command_id text,
            category text, name text, event_key text, observed_at timestamptz, data jsonb)
          WHERE b.n = ANY (v_ok);
        -- Before the runs move on: the counters turn batch places into seqs from the old last seq.
        UPDATE commands c SET event_count = c.event_count + v.count,
            last_event_seq = r.last_seq + v.last_i
          FROM jsonb_to_recordset(p_batches) AS b(n integer, run text, counts jsonb)
          JOIN runs r ON r.run_id = b.run
          CROSS JOIN LATERAL jsonb_to_recordset(b.counts) AS v(command_id text, count integer,
            last_i integer)
          WHERE b.n = ANY (v_ok) AND c.command_id = v.command_id;
        PERFORM pg_notify(p_channel, b.wake)
          FROM jsonb_to_recordset(p_batches) AS b(n integer, run text, wake text)
          JOIN runs r ON r.run_id = b.run
          WHERE b.n = ANY (v_ok) AND r.events_watched_until > now();
      END IF;
      RETURN QUERY
        WITH moved AS (
          UPDATE runs r SET last_seq = r.last_seq + b.size, updated_at = now()
            FROM (SELECT b.n, b.run, jsonb_array_length(b.rows) AS size
                  FROM jsonb_to_recordset(p_batches) AS b(n integer, run text, rows jsonb)) b
            WHERE r.run_id = b.run AND b.n = ANY (v_ok)
            RETURNING b.n, r.last_seq - b.size + 1 AS first_seq
        )
        SELECT b.n, m.first_seq
          FROM jsonb_to_recordset(p_batches) AS b(n integer)
          LEFT JOIN moved m ON m.n = b.n;
    END
    $fn$`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP FUNCTION IF EXISTS svc_append_groups(jsonb, text)`.execute(db);
}
