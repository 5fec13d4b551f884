import { sql, type Kysely } from 'kysely';

/**
 * Run listing, newest first: one index for the unfiltered list and one per selective filter
 * an operator uses most (tenant and project, state), each ending in the keyset order so a page
 * is an index range scan whatever the table size. Session filters use runs_session_idx.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX runs_listing_idx ON runs (created_at DESC, run_id DESC)`.execute(db);
  await sql`CREATE INDEX runs_tenant_listing_idx ON runs (tenant_id, project_id, created_at DESC, run_id DESC)`.execute(
    db,
  );
  await sql`CREATE INDEX runs_state_listing_idx ON runs (state, created_at DESC, run_id DESC)`.execute(
    db,
  );
}
