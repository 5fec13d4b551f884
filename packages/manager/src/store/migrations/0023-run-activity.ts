import { sql, type Kysely } from 'kysely';

/**
 * A run's activity (store/run-view.ts) asks whether the run has an open turn, and whether a
 * runner acknowledged it: a probe per run of a listing page. Open turns are few (a turn ends
 * within its idle budget), so this partial index stays small however many commands a store
 * holds, and the probe is one index lookup.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX commands_open_turns_idx ON commands (run_id, state)
    WHERE state IN ('accepted', 'delivered', 'confirmed') AND type IN ('turn', 'resume')`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX IF EXISTS commands_open_turns_idx`.execute(db);
}
