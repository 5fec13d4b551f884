import { sql, type Kysely } from 'kysely';

/**
 * The scheduler's run-time controls (docs/scheduler.md): a queue may be paused
 * (`queue_settings.paused`); a task may carry a concurrency key with a limit of open attempts
 * per key; capacity limits and per-profile start rates set through the API live in
 * `queue_limits` and override configuration. Attempt starts per profile over the last minute
 * are counted from `queue_attempts.created_at`, hence its index.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE queue_settings ADD COLUMN paused boolean NOT NULL DEFAULT false`.execute(
    db,
  );
  await sql`
    ALTER TABLE queue_tasks
      ADD COLUMN concurrency_key text
        CHECK (char_length(concurrency_key) BETWEEN 1 AND 200),
      ADD COLUMN concurrency_limit integer CHECK (concurrency_limit >= 1),
      ADD CONSTRAINT queue_tasks_concurrency_limit_needs_key
        CHECK (concurrency_limit IS NULL OR concurrency_key IS NOT NULL)`.execute(db);
  await sql`
    CREATE TABLE queue_limits (
      scope text NOT NULL CHECK (scope IN ('global', 'tenant', 'profile', 'profile-rate')),
      -- The tenant or profile; '' for the global limit.
      name text NOT NULL,
      value integer NOT NULL CHECK (value >= 0),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (scope, name),
      CHECK ((scope = 'global') = (name = '')),
      CHECK (scope <> 'profile-rate' OR value >= 1)
    )`.execute(db);
  await sql`CREATE INDEX queue_attempts_created_idx ON queue_attempts (created_at)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS queue_attempts_created_idx`.execute(db);
  await sql`DROP TABLE IF EXISTS queue_limits`.execute(db);
  await sql`
    ALTER TABLE queue_tasks
      DROP CONSTRAINT IF EXISTS queue_tasks_concurrency_limit_needs_key,
      DROP COLUMN IF EXISTS concurrency_limit,
      DROP COLUMN IF EXISTS concurrency_key`.execute(db);
  await sql`ALTER TABLE queue_settings DROP COLUMN IF EXISTS paused`.execute(db);
}
