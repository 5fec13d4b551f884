import { sql, type Kysely } from 'kysely';

/**
 * Recurring schedules (cron): a schedule row holds a task template and its next tick. A tick
 * is fired by a conditional update of `next_run_at` from that tick to the next one, in the
 * transaction that inserts the task; the task records its schedule and tick, unique together,
 * so two replicas never both fire one tick. Tasks keep their schedule id after the schedule
 * is deleted (no foreign key): the task still shows what made it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE queue_schedules (
      schedule_id text PRIMARY KEY,
      name text,
      cron text NOT NULL,
      timezone text NOT NULL,
      tenant_id text NOT NULL,
      queue text NOT NULL,
      template jsonb NOT NULL,
      next_run_at timestamptz NOT NULL,
      last_run_at timestamptz,
      last_task_id text,
      fired_count integer NOT NULL DEFAULT 0,
      last_error text,
      last_error_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  // The schedulers' wake-up reads the earliest tick; the firing pass reads the due ones.
  await sql`CREATE INDEX queue_schedules_next_run_idx ON queue_schedules (next_run_at)`.execute(db);
  await sql`
    ALTER TABLE queue_tasks
      ADD COLUMN schedule_id text,
      ADD COLUMN schedule_tick timestamptz`.execute(db);
  await sql`
    CREATE UNIQUE INDEX queue_tasks_schedule_tick_idx ON queue_tasks (schedule_id, schedule_tick)
    WHERE schedule_id IS NOT NULL`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS queue_tasks_schedule_tick_idx`.execute(db);
  await sql`
    ALTER TABLE queue_tasks DROP COLUMN IF EXISTS schedule_id,
      DROP COLUMN IF EXISTS schedule_tick`.execute(db);
  await sql`DROP TABLE IF EXISTS queue_schedules`.execute(db);
}
