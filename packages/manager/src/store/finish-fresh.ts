import { sql } from 'kysely';
import type { CommandRow } from './commands.js';
import type { NewEvent } from './events.js';
import { eventBatch } from './event-batch.js';
import type { Executor } from './runs.js';
import { EVENTS_WAKE_PREFIX, WAKE_CHANNEL } from './wakeups.js';
import { PREPARED } from './prepared.js';

export interface FreshFinish {
  commandId: string;
  runnerId: string;
  tokenHash: string | null;
  state: 'completed' | 'failed' | 'cancelled';
  failureKind: string | null;
  message: string | null;
  threadId: string | null;
  turnId: string | null;
  steerDelivery: string | null;
  /** The runner's last events, then the terminal_status event (null ids filled in SQL). */
  events: readonly NewEvent[];
}

/**
 * The plain terminal report in one call (`svc_finish_command`, migration 0016). `standalone`:
 * a call of its own that commits at once, declining (the command unchanged) when the run's
 * session or the command's queue attempt or judge run must follow in the same transaction;
 * otherwise the caller's transaction, which runs those hooks next. Undefined: the general path
 * decides (see the migration).
 */
export async function finishFresh(
  db: Executor,
  finish: FreshFinish,
  standalone: boolean,
): Promise<CommandRow | undefined> {
  const batch = eventBatch(finish.events);
  const { rows } = await sql<CommandRow>`${PREPARED}
    SELECT * FROM svc_finish_command(${finish.commandId}, ${finish.runnerId},
      ${finish.tokenHash}, ${finish.state}, ${finish.failureKind}, ${finish.message},
      ${finish.threadId}, ${finish.turnId}, ${finish.steerDelivery}::jsonb, ${batch.rows}::jsonb,
      ${batch.counts}::jsonb, ${WAKE_CHANNEL}, ${EVENTS_WAKE_PREFIX}, ${standalone})`.execute(db);
  return rows[0];
}
