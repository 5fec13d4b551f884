import { sql } from 'kysely';
import type { Db } from './db.js';
import type { NewEvent } from './events.js';
import { json } from './json.js';
import { WAKE_CHANNEL } from './wakeups.js';

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
  const rows = events.map((e, i) => ({
    i: i + 1,
    command_id: e.commandId,
    category: e.category,
    name: e.name,
    event_key: e.key,
    observed_at: e.observedAt.toISOString(),
    data: e.data,
  }));
  const counts = new Map<string, { command_id: string; count: number; last_i: number }>();
  events.forEach((e, i) => {
    if (e.commandId === null) return;
    const entry = counts.get(e.commandId) ?? { command_id: e.commandId, count: 0, last_i: 0 };
    entry.count += 1;
    entry.last_i = i + 1;
    counts.set(e.commandId, entry);
  });
  const result = await sql<{ first: number | null }>`
    SELECT svc_append_events(${runId}, ${runnerId}, ${tokenHash}, ${json(rows)}::jsonb,
      ${json([...counts.values()])}::jsonb, ${[...counts.keys()]}::text[], ${WAKE_CHANNEL},
      ${wakeKey}) AS first`.execute(db);
  return result.rows[0]?.first ?? null;
}
