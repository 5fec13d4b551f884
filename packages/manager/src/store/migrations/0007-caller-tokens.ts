import { sql, type Kysely } from 'kysely';

/**
 * Caller tokens, stored only as SHA-256 digests: each runner Job's own token (looked up by its
 * digest on every runner request, hence the unique index), and the lease token a claim hands to
 * the run's lease owner (fencing compares it, never the public runner id).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE runner_jobs ADD COLUMN token_hash text`.execute(db);
  await sql`CREATE UNIQUE INDEX runner_jobs_token_hash_idx ON runner_jobs (token_hash) WHERE token_hash IS NOT NULL`.execute(
    db,
  );
  await sql`ALTER TABLE runs ADD COLUMN lease_token_hash text`.execute(db);
}
