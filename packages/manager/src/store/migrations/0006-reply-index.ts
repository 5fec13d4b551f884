import { sql, type Kysely } from 'kysely';

/**
 * Authoritative final replies, indexed on their own: the result envelope finds the last one of
 * a turn in one index probe however many events the turn has.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX events_final_reply_idx ON events (run_id, command_id, seq)
    WHERE category = 'assistant_message' AND data->>'final' = 'true' AND data->>'replyAuthority' = 'true'`.execute(
    db,
  );
}
