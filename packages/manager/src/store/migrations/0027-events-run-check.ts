import { sql, type Kysely } from 'kysely';

/**
 * The events' reference to their run, checked once per statement instead of once per row. The
 * foreign key checked each inserted event on its own (a row lock taken again on the same run
 * for each of a group's thousand events): a third of PostgreSQL's time per appended event
 * (45 -> 30 µs for a group of 28 batches of 40 events). The same guarantees, by triggers:
 *
 * - an INSERT (or UPDATE) of events whose run does not exist fails with the foreign key's
 *   error (SQLSTATE 23503, its constraint name, the same message), after taking the key-share
 *   lock the foreign key took, once per run of the statement, so the run cannot go while the
 *   writer's transaction is open;
 * - deleting runs deletes their events in the same statement (the foreign key's ON DELETE
 *   CASCADE), and truncating runs truncates events;
 * - a run's id cannot change while events name it (the foreign key's NO ACTION on update).
 *
 * Events are append-only: the UPDATE check costs the append path nothing.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE events DROP CONSTRAINT events_run_id_fkey`.execute(db);
  await sql`
    CREATE FUNCTION svc_events_run_exists() RETURNS trigger LANGUAGE plpgsql AS $fn$
    DECLARE
      v_missing text;
    BEGIN
      SELECT n.run_id INTO v_missing
        FROM (SELECT DISTINCT run_id FROM new_events) n
        LEFT JOIN LATERAL (
          SELECT 1 AS found FROM runs r WHERE r.run_id = n.run_id FOR KEY SHARE
        ) l ON true
        WHERE l.found IS NULL
        LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION 'insert or update on table "events" violates foreign key constraint "events_run_id_fkey"'
          USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'events_run_id_fkey',
            TABLE = 'events',
            DETAIL = format('Key (run_id)=(%s) is not present in table "runs".', v_missing);
      END IF;
      RETURN NULL;
    END
    $fn$`.execute(db);
  await sql`
    CREATE TRIGGER events_run_exists AFTER INSERT ON events
      REFERENCING NEW TABLE AS new_events
      FOR EACH STATEMENT EXECUTE FUNCTION svc_events_run_exists()`.execute(db);
  await sql`
    CREATE TRIGGER events_run_exists_update AFTER UPDATE ON events
      REFERENCING NEW TABLE AS new_events
      FOR EACH STATEMENT EXECUTE FUNCTION svc_events_run_exists()`.execute(db);
  await sql`
    CREATE FUNCTION svc_runs_delete_events() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      DELETE FROM events WHERE run_id IN (SELECT run_id FROM old_runs);
      RETURN NULL;
    END
    $fn$`.execute(db);
  await sql`
    CREATE TRIGGER runs_delete_events AFTER DELETE ON runs
      REFERENCING OLD TABLE AS old_runs
      FOR EACH STATEMENT EXECUTE FUNCTION svc_runs_delete_events()`.execute(db);
  await sql`
    CREATE FUNCTION svc_runs_truncate_events() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      TRUNCATE events;
      RETURN NULL;
    END
    $fn$`.execute(db);
  await sql`
    CREATE TRIGGER runs_truncate_events AFTER TRUNCATE ON runs
      FOR EACH STATEMENT EXECUTE FUNCTION svc_runs_truncate_events()`.execute(db);
  // Only an UPDATE that sets run_id fires it: renewals and appends never do.
  await sql`
    CREATE FUNCTION svc_runs_keep_id() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      IF EXISTS (SELECT 1 FROM events WHERE run_id = OLD.run_id) THEN
        RAISE EXCEPTION 'update or delete on table "runs" violates foreign key constraint "events_run_id_fkey" on table "events"'
          USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'events_run_id_fkey',
            TABLE = 'runs',
            DETAIL = format('Key (run_id)=(%s) is still referenced from table "events".', OLD.run_id);
      END IF;
      RETURN NEW;
    END
    $fn$`.execute(db);
  await sql`
    CREATE TRIGGER runs_keep_id BEFORE UPDATE OF run_id ON runs
      FOR EACH ROW WHEN (OLD.run_id IS DISTINCT FROM NEW.run_id)
      EXECUTE FUNCTION svc_runs_keep_id()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TRIGGER IF EXISTS runs_keep_id ON runs`.execute(db);
  await sql`DROP FUNCTION IF EXISTS svc_runs_keep_id()`.execute(db);
  await sql`DROP TRIGGER IF EXISTS runs_truncate_events ON runs`.execute(db);
  await sql`DROP FUNCTION IF EXISTS svc_runs_truncate_events()`.execute(db);
  await sql`DROP TRIGGER IF EXISTS runs_delete_events ON runs`.execute(db);
  await sql`DROP FUNCTION IF EXISTS svc_runs_delete_events()`.execute(db);
  await sql`DROP TRIGGER IF EXISTS events_run_exists_update ON events`.execute(db);
  await sql`DROP TRIGGER IF EXISTS events_run_exists ON events`.execute(db);
  await sql`DROP FUNCTION IF EXISTS svc_events_run_exists()`.execute(db);
  await sql`
    ALTER TABLE events ADD CONSTRAINT events_run_id_fkey
      FOREIGN KEY (run_id) REFERENCES runs (run_id) ON DELETE CASCADE`.execute(db);
}
