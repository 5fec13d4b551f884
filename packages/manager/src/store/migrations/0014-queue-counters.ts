import { sql, type Kysely } from 'kysely';

/**
 * Queue statistics kept as counters, so stats and the commander read a handful of rows instead
 * of grouping every task per request.
 *
 * Each counter table is a log of signed deltas written by triggers in the very transaction that
 * moves a task, an attempt or a read cursor; a reader sums the rows of its key under one snapshot,
 * so a count is exact whatever commits concurrently. Writers only insert, never update a shared
 * row: a hot counter row would serialize every task change and, taken in a different order than
 * the `queue_watermark` row lock, could deadlock. `foldQueueCounters` collapses the log into one
 * row per key (delete and re-insert in one statement, so readers never see a half-folded sum).
 *
 * Read counters count, per reader and queue, the cursors that are current (read_version at the
 * task's version); unread = tasks in the queue minus current cursors.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  // No writer may slip a change between the backfill and the triggers.
  await sql`LOCK TABLE queue_tasks, queue_attempts, queue_read_cursors IN SHARE ROW EXCLUSIVE MODE`.execute(
    db,
  );
  await sql`
    CREATE TABLE queue_task_counts (
      queue text NOT NULL,
      lane text NOT NULL,
      state text NOT NULL,
      backend_profile text NOT NULL,
      n bigint NOT NULL
    )`.execute(db);
  await sql`CREATE INDEX queue_task_counts_key_idx ON queue_task_counts (queue, lane, state, backend_profile)`.execute(
    db,
  );
  await sql`
    CREATE TABLE queue_attempt_counts (
      queue text NOT NULL,
      state text NOT NULL,
      failure_kind text,
      n bigint NOT NULL,
      retries bigint NOT NULL
    )`.execute(db);
  await sql`CREATE INDEX queue_attempt_counts_queue_idx ON queue_attempt_counts (queue)`.execute(
    db,
  );
  await sql`
    CREATE TABLE queue_read_counts (
      reader_id text NOT NULL,
      queue text NOT NULL,
      n bigint NOT NULL
    )`.execute(db);
  await sql`CREATE INDEX queue_read_counts_reader_idx ON queue_read_counts (reader_id, queue)`.execute(
    db,
  );
  // A task's change finds the cursors it makes stale.
  await sql`CREATE INDEX queue_read_cursors_task_idx ON queue_read_cursors (task_id, read_version)`.execute(
    db,
  );
  // The commander walks each state in queue order and stops at a page.
  await sql`CREATE INDEX queue_tasks_state_order_idx ON queue_tasks (state, priority DESC, enqueue_seq)`.execute(
    db,
  );
  await sql`CREATE INDEX queue_tasks_queue_state_order_idx ON queue_tasks (queue, state, priority DESC, enqueue_seq)`.execute(
    db,
  );

  await sql`
    CREATE FUNCTION queue_tasks_count() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP IN ('UPDATE', 'DELETE') AND (TG_OP = 'DELETE'
          OR (OLD.queue, OLD.lane, OLD.state, OLD.backend_profile)
             IS DISTINCT FROM (NEW.queue, NEW.lane, NEW.state, NEW.backend_profile)) THEN
        INSERT INTO queue_task_counts VALUES (OLD.queue, OLD.lane, OLD.state, OLD.backend_profile, -1);
      END IF;
      IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE'
          AND (OLD.queue, OLD.lane, OLD.state, OLD.backend_profile)
              IS DISTINCT FROM (NEW.queue, NEW.lane, NEW.state, NEW.backend_profile)) THEN
        INSERT INTO queue_task_counts VALUES (NEW.queue, NEW.lane, NEW.state, NEW.backend_profile, 1);
      END IF;
      -- Cursors current at the old version are stale now (their reader has news).
      IF TG_OP = 'UPDATE' AND NEW.version > OLD.version THEN
        INSERT INTO queue_read_counts
          SELECT reader_id, OLD.queue, -count(*) FROM queue_read_cursors
          WHERE task_id = OLD.task_id AND read_version >= OLD.version AND read_version < NEW.version
          GROUP BY reader_id;
      END IF;
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER queue_tasks_count AFTER INSERT OR UPDATE OR DELETE ON queue_tasks
    FOR EACH ROW EXECUTE FUNCTION queue_tasks_count()`.execute(db);

  await sql`
    CREATE FUNCTION queue_attempts_count() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE q text;
    BEGIN
      SELECT queue INTO q FROM queue_tasks
        WHERE task_id = CASE WHEN TG_OP = 'DELETE' THEN OLD.task_id ELSE NEW.task_id END;
      IF q IS NULL THEN RETURN NULL; END IF;
      IF TG_OP = 'DELETE' OR (TG_OP = 'UPDATE'
          AND (OLD.state, OLD.failure_kind, OLD.retry_index > 0)
              IS DISTINCT FROM (NEW.state, NEW.failure_kind, NEW.retry_index > 0)) THEN
        INSERT INTO queue_attempt_counts
          VALUES (q, OLD.state, OLD.failure_kind, -1, CASE WHEN OLD.retry_index > 0 THEN -1 ELSE 0 END);
      END IF;
      IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE'
          AND (OLD.state, OLD.failure_kind, OLD.retry_index > 0)
              IS DISTINCT FROM (NEW.state, NEW.failure_kind, NEW.retry_index > 0)) THEN
        INSERT INTO queue_attempt_counts
          VALUES (q, NEW.state, NEW.failure_kind, 1, CASE WHEN NEW.retry_index > 0 THEN 1 ELSE 0 END);
      END IF;
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER queue_attempts_count AFTER INSERT OR UPDATE OR DELETE ON queue_attempts
    FOR EACH ROW EXECUTE FUNCTION queue_attempts_count()`.execute(db);

  // FOR SHARE: a concurrent task change either commits first (we see its version) or waits for
  // us (its trigger then sees this cursor), so a cursor is never counted current against a
  // version that has moved on.
  await sql`
    CREATE FUNCTION queue_read_cursors_count() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE v integer; was boolean; now_current boolean;
    BEGIN
      SELECT version INTO v FROM queue_tasks WHERE task_id = NEW.task_id FOR SHARE;
      was := TG_OP = 'UPDATE' AND OLD.read_version >= v;
      now_current := NEW.read_version >= v;
      IF was <> now_current THEN
        INSERT INTO queue_read_counts VALUES (NEW.reader_id, NEW.queue,
          CASE WHEN now_current THEN 1 ELSE -1 END);
      END IF;
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER queue_read_cursors_count AFTER INSERT OR UPDATE ON queue_read_cursors
    FOR EACH ROW EXECUTE FUNCTION queue_read_cursors_count()`.execute(db);

  await sql`
    INSERT INTO queue_task_counts
      SELECT queue, lane, state, backend_profile, count(*) FROM queue_tasks
      GROUP BY queue, lane, state, backend_profile`.execute(db);
  await sql`
    INSERT INTO queue_attempt_counts
      SELECT t.queue, a.state, a.failure_kind, count(*), count(*) FILTER (WHERE a.retry_index > 0)
      FROM queue_attempts a JOIN queue_tasks t USING (task_id)
      GROUP BY t.queue, a.state, a.failure_kind`.execute(db);
  await sql`
    INSERT INTO queue_read_counts
      SELECT rc.reader_id, t.queue, count(*) FROM queue_read_cursors rc JOIN queue_tasks t USING (task_id)
      WHERE rc.read_version >= t.version
      GROUP BY rc.reader_id, t.queue`.execute(db);
}
