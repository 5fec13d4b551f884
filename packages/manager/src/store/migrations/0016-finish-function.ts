import { sql, type Kysely } from 'kysely';

/**
 * A runner's terminal report in one call: `svc_finish_command` locks the command's run,
 * checks the lease (owner and token digest), reads the command after the lock (each statement
 * of the function takes a fresh snapshot, so a change committed by a writer it waited for is
 * seen), checks that it is acknowledged and that the batch's keys are new, then writes the
 * runner's last events and the terminal_status event, the run's last seq, the per-command
 * counters, the command's terminal state and the wake-up. Where the general path pays ten
 * round trips, this pays one.
 *
 * It answers with the command row:
 * - terminal: finished here;
 * - unchanged (not terminal): `p_standalone` was set and the run has a session, or the command
 *   a queue attempt or a judge run still open, whose records must follow in the same
 *   transaction: the caller calls again inside its own transaction, then runs those hooks;
 * - no row: anything else (no lease, not acknowledged, a key already stored): the caller takes
 *   the general path, which explains the refusal or answers the repeat.
 *
 * The terminal_status row in `p_rows` carries null threadId/turnId when the report names none;
 * they are filled from the command, as the general path does.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION svc_finish_command(
      p_command text, p_runner text, p_token_hash text, p_state text, p_failure text,
      p_message text, p_thread text, p_turn text, p_steer jsonb, p_rows jsonb, p_counts jsonb,
      p_channel text, p_wake_prefix text, p_standalone boolean
    ) RETURNS SETOF commands LANGUAGE plpgsql AS $fn$
    DECLARE
      v_run text;
      v_last integer;
      v_owner text;
      v_hash text;
      v_session text;
      v_command commands%ROWTYPE;
    BEGIN
      SELECT run_id INTO v_run FROM commands WHERE command_id = p_command;
      IF NOT FOUND THEN
        RETURN;
      END IF;
      SELECT last_seq, lease_owner, lease_token_hash, session_id
        INTO v_last, v_owner, v_hash, v_session
        FROM runs WHERE run_id = v_run FOR UPDATE;
      IF NOT FOUND OR v_owner IS DISTINCT FROM p_runner OR v_hash IS NULL
         OR p_token_hash IS NULL OR v_hash <> p_token_hash THEN
        RETURN;
      END IF;
      SELECT * INTO v_command FROM commands WHERE command_id = p_command;
      IF v_command.state <> 'confirmed' THEN
        RETURN;
      END IF;
      IF EXISTS (
        SELECT 1 FROM events WHERE run_id = v_run AND event_key = ANY (
          ARRAY(SELECT x->>'event_key' FROM jsonb_array_elements(p_rows) x))
      ) THEN
        RETURN;
      END IF;
      IF p_standalone AND (
        v_session IS NOT NULL
        OR EXISTS (SELECT 1 FROM queue_attempts WHERE command_id = p_command
                   AND state IN ('dispatched', 'running'))
        OR EXISTS (SELECT 1 FROM queue_judge_runs WHERE command_id = p_command
                   AND state = 'requested')
      ) THEN
        RETURN NEXT v_command;
        RETURN;
      END IF;
      INSERT INTO events (run_id, seq, command_id, category, name, event_key, observed_at, data)
        SELECT v_run, v_last + x.i, x.command_id, x.category, x.name, x.event_key, x.observed_at,
          CASE WHEN x.category = 'terminal_status' THEN x.data || jsonb_build_object(
            'threadId', COALESCE(p_thread, v_command.thread_id),
            'turnId', COALESCE(p_turn, v_command.turn_id)) ELSE x.data END
        FROM jsonb_to_recordset(p_rows) AS x(i integer, command_id text, category text,
          name text, event_key text, observed_at timestamptz, data jsonb);
      UPDATE runs SET last_seq = v_last + jsonb_array_length(p_rows), updated_at = now()
        WHERE run_id = v_run;
      UPDATE commands c SET event_count = c.event_count + v.count, last_event_seq = v_last + v.last_i
        FROM jsonb_to_recordset(p_counts) AS v(command_id text, count integer, last_i integer)
        WHERE c.command_id = v.command_id;
      PERFORM pg_notify(p_channel, p_wake_prefix || v_run);
      RETURN QUERY
        UPDATE commands SET
          state = p_state, failure_kind = p_failure, message = p_message, terminal_at = now(),
          runner_id = p_runner, thread_id = COALESCE(p_thread, thread_id),
          turn_id = COALESCE(p_turn, turn_id), steer_delivery = COALESCE(p_steer, steer_delivery),
          updated_at = now()
        WHERE command_id = p_command
        RETURNING *;
    END
    $fn$`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP FUNCTION IF EXISTS svc_finish_command(text, text, text, text, text, text, text,
    text, jsonb, jsonb, jsonb, text, text, boolean)`.execute(db);
}
