import { sql, type Kysely } from 'kysely';

/**
 * A session send is idempotent over the whole request (prompt, profile, run base, runner Job
 * overrides), not only the turn payload its command keeps: the send's own hash is stored with
 * the command it created, so a reused key with other content is a conflict.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE commands ADD COLUMN request_hash text`.execute(db);
}
