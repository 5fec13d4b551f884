import { sql } from 'kysely';
import type { CommandRow } from './commands.js';
import type { Executor } from './runs.js';

/**
 * A runner's progress report (the thread and turn of an acknowledged command) in one statement
 * (one round trip, committed durably): the command's run row locked, the lease fenced (owner
 * and token digest), the ids recorded on a `confirmed` command. Undefined when any condition
 * fails (unknown command, lease not held, command not confirmed): the caller then takes the
 * general path, which tells these apart. The state condition is re-checked on the command's
 * newest version if another transaction changed it meanwhile (READ COMMITTED update).
 */
export async function recordProgress(
  db: Executor,
  commandId: string,
  runnerId: string,
  tokenHash: string,
  ids: { threadId: string | null; turnId: string | null },
): Promise<CommandRow | undefined> {
  const { rows } = await sql<CommandRow>`
    WITH run AS (
      SELECT run_id, lease_owner, lease_token_hash FROM runs
      WHERE run_id = (SELECT run_id FROM commands WHERE command_id = ${commandId})
      FOR UPDATE
    ),
    fenced AS (
      SELECT run_id FROM run WHERE lease_owner = ${runnerId} AND lease_token_hash = ${tokenHash}
    )
    UPDATE commands c SET
      thread_id = coalesce(${ids.threadId}::text, c.thread_id),
      turn_id = coalesce(${ids.turnId}::text, c.turn_id),
      updated_at = now()
    FROM fenced f
    WHERE c.command_id = ${commandId} AND c.run_id = f.run_id AND c.state = 'confirmed'
    RETURNING c.*`.execute(db);
  return rows[0];
}
