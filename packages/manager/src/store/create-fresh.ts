import { sql, type Insertable } from 'kysely';
import type { CommandRow } from './commands.js';
import type { Executor } from './runs.js';
import type { CommandsTable } from './schema.js';
import { WAKE_CHANNEL } from './wakeups.js';
import { PREPARED } from './prepared.js';

/**
 * A new command of a plain run in one call (`svc_create_command`, migration 0017): the
 * command, the run's seq and latest command, the wake-up. Undefined when the general path must
 * decide (see the migration).
 */
export async function createFresh(
  db: Executor,
  row: Insertable<CommandsTable>,
  payload: Record<string, unknown>,
  latest: boolean,
  terminalRunStates: readonly string[],
  wakeKey: string,
): Promise<CommandRow | undefined> {
  // The payload travels as JSON inside the row, not as the string the table writer takes.
  const record = JSON.stringify({ ...row, payload });
  const { rows } = await sql<CommandRow>`${PREPARED}
    SELECT * FROM svc_create_command(${row.run_id}, ${record}::jsonb, ${latest},
      ${terminalRunStates}::text[], ${WAKE_CHANNEL}, ${wakeKey})`.execute(db);
  return rows[0];
}
