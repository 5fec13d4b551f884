import { sql, type Selectable } from 'kysely';
import type { EventsTable } from './schema.js';
import type { Executor } from './runs.js';
import { PREPARED } from './prepared.js';

export type EventRow = Selectable<EventsTable>;

export interface NewEvent {
  key: string | null;
  commandId: string | null;
  category: string;
  name: string | null;
  observedAt: Date;
  data: Record<string, unknown>;
}

/** Seqs already taken by these keys in this run (a retried append). */
export async function existingKeys(
  db: Executor,
  runId: string,
  keys: string[],
): Promise<Map<string, number>> {
  if (keys.length === 0) return new Map();
  const rows = await db
    .selectFrom('events')
    .select(['event_key', 'seq'])
    .where('run_id', '=', runId)
    .where('event_key', 'in', keys)
    .execute();
  return new Map(rows.map((r) => [r.event_key!, r.seq]));
}

export async function pageEvents(
  db: Executor,
  runId: string,
  afterSeq: number,
  limit: number,
  filter: { categories?: readonly string[]; commandIds?: readonly string[] } = {},
): Promise<EventRow[]> {
  let query = db
    .selectFrom('events')
    .selectAll()
    .where('run_id', '=', runId)
    .where('seq', '>', afterSeq);
  // A filter spells out its lists, one text per length: only the plain page is prepared.
  if (!filter.categories && !filter.commandIds)
    return query.orderBy('seq').limit(limit).modifyEnd(PREPARED).execute();
  if (filter.categories) query = query.where('category', 'in', filter.categories);
  if (filter.commandIds) query = query.where('command_id', 'in', filter.commandIds);
  return query.orderBy('seq').limit(limit).execute();
}

export async function eventAt(
  db: Executor,
  runId: string,
  seq: number,
): Promise<EventRow | undefined> {
  return db
    .selectFrom('events')
    .selectAll()
    .where('run_id', '=', runId)
    .where('seq', '=', seq)
    .modifyEnd(PREPARED)
    .executeTakeFirst();
}

export async function commandIdsOfRun(
  db: Executor,
  runId: string,
  ids: string[],
): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db
    .selectFrom('commands')
    .select('command_id')
    .where('run_id', '=', runId)
    .where('command_id', 'in', ids)
    .execute();
  return new Set(rows.map((r) => r.command_id));
}

export const lastEventOfScope = (db: Executor, runId: string, commandId: string) =>
  db
    .selectFrom('events')
    .selectAll()
    .where('run_id', '=', runId)
    .where('command_id', '=', commandId)
    .orderBy('seq', 'desc')
    .limit(1)
    .executeTakeFirst();

export { sql };
