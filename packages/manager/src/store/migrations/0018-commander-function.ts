import { sql, type Kysely } from 'kysely';

/**
 * The commander's page in one call: `svc_commander_tasks` walks the task states in commander
 * order (failed, blocked, running, dispatched, then finished tasks the reader has not read at
 * their latest version, then queued), each in queue order on (queue, state, priority,
 * enqueue_seq), and stops as soon as `p_want` tasks were found, so its cost follows the page,
 * not the queue. The application walked the same way with one round trip per state.
 *
 * It returns the task ids in page order with the reader's read version. It is STABLE: its
 * queries share the snapshot of the statement that calls it, which joins the task rows and
 * their latest attempts, so the page is one consistent read. Each query is written once with
 * and once without the queue filter: a cached plan never has to serve both.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION svc_commander_tasks(p_queue text, p_reader text, p_want integer)
    RETURNS TABLE (page_task_id text, page_read_version integer)
    LANGUAGE plpgsql STABLE AS $fn$
    DECLARE
      v_state text;
      v_left integer := p_want;
      v_rows integer;
    BEGIN
      FOREACH v_state IN ARRAY ARRAY['failed', 'blocked', 'running', 'dispatched', 'finished', 'queued'] LOOP
        EXIT WHEN v_left <= 0;
        IF v_state = 'finished' THEN
          -- Finished tasks are shown only to a reader, and only those it has not read.
          CONTINUE WHEN p_reader IS NULL;
          IF p_queue IS NULL THEN
            RETURN QUERY SELECT x.task_id, x.read_version FROM (
              (SELECT t.task_id, rc.read_version, t.priority, t.enqueue_seq FROM queue_tasks t
                 LEFT JOIN queue_read_cursors rc ON rc.task_id = t.task_id AND rc.reader_id = p_reader
                 WHERE t.state = 'completed' AND (rc.read_version IS NULL OR rc.read_version < t.version)
                 ORDER BY t.priority DESC, t.enqueue_seq LIMIT v_left)
              UNION ALL
              (SELECT t.task_id, rc.read_version, t.priority, t.enqueue_seq FROM queue_tasks t
                 LEFT JOIN queue_read_cursors rc ON rc.task_id = t.task_id AND rc.reader_id = p_reader
                 WHERE t.state = 'cancelled' AND (rc.read_version IS NULL OR rc.read_version < t.version)
                 ORDER BY t.priority DESC, t.enqueue_seq LIMIT v_left)
            ) x ORDER BY x.priority DESC, x.enqueue_seq LIMIT v_left;
          ELSE
            RETURN QUERY SELECT x.task_id, x.read_version FROM (
              (SELECT t.task_id, rc.read_version, t.priority, t.enqueue_seq FROM queue_tasks t
                 LEFT JOIN queue_read_cursors rc ON rc.task_id = t.task_id AND rc.reader_id = p_reader
                 WHERE t.queue = p_queue AND t.state = 'completed'
                   AND (rc.read_version IS NULL OR rc.read_version < t.version)
                 ORDER BY t.priority DESC, t.enqueue_seq LIMIT v_left)
              UNION ALL
              (SELECT t.task_id, rc.read_version, t.priority, t.enqueue_seq FROM queue_tasks t
                 LEFT JOIN queue_read_cursors rc ON rc.task_id = t.task_id AND rc.reader_id = p_reader
                 WHERE t.queue = p_queue AND t.state = 'cancelled'
                   AND (rc.read_version IS NULL OR rc.read_version < t.version)
                 ORDER BY t.priority DESC, t.enqueue_seq LIMIT v_left)
            ) x ORDER BY x.priority DESC, x.enqueue_seq LIMIT v_left;
          END IF;
        ELSIF p_queue IS NULL THEN
          RETURN QUERY SELECT t.task_id, rc.read_version FROM queue_tasks t
            LEFT JOIN queue_read_cursors rc
              ON rc.task_id = t.task_id AND rc.reader_id = coalesce(p_reader, '')
            WHERE t.state = v_state
            ORDER BY t.priority DESC, t.enqueue_seq LIMIT v_left;
        ELSE
          RETURN QUERY SELECT t.task_id, rc.read_version FROM queue_tasks t
            LEFT JOIN queue_read_cursors rc
              ON rc.task_id = t.task_id AND rc.reader_id = coalesce(p_reader, '')
            WHERE t.queue = p_queue AND t.state = v_state
            ORDER BY t.priority DESC, t.enqueue_seq LIMIT v_left;
        END IF;
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        v_left := v_left - v_rows;
      END LOOP;
    END
    $fn$`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP FUNCTION IF EXISTS svc_commander_tasks(text, text, integer)`.execute(db);
}
