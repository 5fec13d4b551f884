import { sql } from 'kysely';
import type { Db } from './db.js';
import type { NewEvent } from './events.js';
import { eventBatch } from './event-batch.js';
import { WAKE_CHANNEL } from './wakeups.js';
import { PREPARED } from './prepared.js';

/**
 * The plain append in one call (`svc_append_events`, migration 0015): every key new, every
 * command the run's, the lease held. Returns the first seq written, or null when the batch
 * needs the general path (a refusal to explain, a retried key, a key twice in the batch).
 */
export async function appendFresh(
  db: Db,
  runId: string,
  runnerId: string,
  tokenHash: string | null,
  events: readonly NewEvent[],
  wakeKey: string,
): Promise<number | null> {
  const keys = events.map((e) => e.key).filter((k): k is string => k !== null);
  if (events.length === 0 || new Set(keys).size !== keys.length) return null;
  const batch = eventBatch(events);
  const result = await sql<{ first: number | null }>`${PREPARED}
    SELECT svc_append_events(${runId}, ${runnerId}, ${tokenHash}, ${batch.rows}::jsonb,
      ${batch.counts}::jsonb, ${batch.commandIds}::text[], ${WAKE_CHANNEL}, ${wakeKey}) AS first`.execute(
    db,
  );
  return result.rows[0]?.first ?? null;
}
