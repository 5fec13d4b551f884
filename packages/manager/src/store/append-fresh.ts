import { sql } from 'kysely';
import type { Db } from './db.js';
import type { NewEvent } from './events.js';
import { eventBatch } from './event-batch.js';
import { json } from './json.js';
import { WAKE_CHANNEL } from './wakeups.js';
import { PREPARED } from './prepared.js';

/** A runner's batch as the one-call writers take it. */
export interface FreshAppend {
  runId: string;
  runnerId: string;
  /** Digest of the lease token the runner sent (null: none sent). */
  tokenHash: string | null;
  events: readonly NewEvent[];
  wakeKey: string;
}

/**
 * Whether a batch can take the one-call path at all: events to write, no key twice (a key
 * twice in one batch is answered by the general path).
 */
export function isPlainBatch(events: readonly NewEvent[]): boolean {
  const keys = events.map((e) => e.key).filter((k): k is string => k !== null);
  return events.length > 0 && new Set(keys).size === keys.length;
}

/**
 * The plain append in one call (`svc_append_events`, migration 0015): every key new, every
 * command the run's, the lease held. Returns the first seq written, or null when the batch
 * needs the general path (a refusal to explain, a retried key, a key twice in the batch).
 */
export async function appendFresh(db: Db, append: FreshAppend): Promise<number | null> {
  if (!isPlainBatch(append.events)) return null;
  const batch = eventBatch(append.events);
  const result = await sql<{ first: number | null }>`${PREPARED}
    SELECT svc_append_events(${append.runId}, ${append.runnerId}, ${append.tokenHash},
      ${batch.rows}::jsonb, ${batch.counts}::jsonb, ${batch.commandIds}::text[], ${WAKE_CHANNEL},
      ${append.wakeKey}) AS first`.execute(db);
  return result.rows[0]?.first ?? null;
}

/**
 * Plain batches of several runs (one each) in one call and one commit (`svc_append_groups`,
 * migration 0020). Each answer is what `appendFresh` would have answered for that batch alone.
 */
export async function appendFreshGroup(
  db: Db,
  appends: readonly FreshAppend[],
): Promise<(number | null)[]> {
  const batches = appends.map((append, n) => {
    const batch = eventBatch(append.events);
    return {
      n,
      run: append.runId,
      runner: append.runnerId,
      token_hash: append.tokenHash,
      rows: batch.rowList,
      counts: batch.countList,
      commands: batch.commandIds,
      wake: append.wakeKey,
    };
  });
  const result = await sql<{ n: number; first_seq: number | null }>`${PREPARED}
    SELECT n, first_seq FROM svc_append_groups(${json(batches)}::jsonb, ${WAKE_CHANNEL})`.execute(
    db,
  );
  const firsts = new Array<number | null>(appends.length).fill(null);
  for (const row of result.rows) firsts[row.n] = row.first_seq;
  return firsts;
}
