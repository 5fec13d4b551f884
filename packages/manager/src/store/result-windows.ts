import { sql } from 'kysely';
import type { Db } from './db.js';
import type { ArtifactRow, Scope, ToolRow, ToolTally } from './result-queries.js';
import { PREPARED } from './prepared.js';

/**
 * Incremental totals of the result envelope's window (tool calls by their latest state,
 * artifact sums). A window of a scope — its events with afterSeq < seq <= throughSeq — never
 * changes once throughSeq is at or below the scope's committed last seq: seqs grow per run
 * under the run's lock, so a later append always lands past it. The totals of a window are
 * therefore kept per manager process and, when the same scope is read again with a larger
 * throughSeq, only the events in between are read and folded in. A 50,000-event window is
 * aggregated once; every read after that pays for the new events only.
 */
export interface WindowTotals {
  tools: { tallies: ToolTally[]; recent: ToolRow[] };
  artifacts: ArtifactRow;
}

const REFERENCES_MAX = 10;
/** Tool items kept over all cached windows (about 100 bytes each). */
const ITEMS_BUDGET = 250_000;
const ENTRIES_MAX = 2_000;

interface Entry {
  throughSeq: number;
  /** Each tool item's latest state, as its tally key. */
  items: Map<string, string>;
  tallies: Map<string, number>;
  recent: ToolRow[];
  sums: Omit<ArtifactRow, 'references'>;
  references: string[];
}

interface Cache {
  entries: Map<string, Entry>;
  /** One fold at a time per window: a second reader waits and then reads the result. */
  busy: Map<string, Promise<void>>;
  items: number;
}

const caches = new WeakMap<Db, Cache>();

function cacheOf(db: Db): Cache {
  let cache = caches.get(db);
  if (!cache) {
    cache = { entries: new Map(), busy: new Map(), items: 0 };
    caches.set(db, cache);
  }
  return cache;
}

export async function windowTotals(
  db: Db,
  scope: Scope,
  afterSeq: number,
  throughSeq: number,
  recentLimit: number,
): Promise<WindowTotals> {
  const cache = cacheOf(db);
  const key = `${scope.runId}\u0000${scope.commandId ?? ''}\u0000${afterSeq}`;
  for (let pending = cache.busy.get(key); pending; pending = cache.busy.get(key)) await pending;
  const known = cache.entries.get(key);
  // A reader behind another (an older last seq) gets its own window, read whole, not kept.
  if (known && known.throughSeq > throughSeq)
    return totalsOf(await fold(db, scope, emptyEntry(afterSeq), throughSeq), recentLimit);
  if (known && known.throughSeq === throughSeq) {
    touch(cache, key, known);
    return totalsOf(known, recentLimit);
  }
  let release!: () => void;
  cache.busy.set(key, new Promise<void>((resolve) => (release = resolve)));
  try {
    const entry = known ?? emptyEntry(afterSeq);
    const before = entry.items.size;
    await fold(db, scope, entry, throughSeq);
    cache.items += entry.items.size - before;
    touch(cache, key, entry);
    evict(cache);
    return totalsOf(entry, recentLimit);
  } catch (error) {
    // A failed fold may have left the entry half-updated: forget it.
    forget(cache, key);
    throw error;
  } finally {
    cache.busy.delete(key);
    release();
  }
}

function emptyEntry(afterSeq: number): Entry {
  return {
    throughSeq: afterSeq,
    items: new Map(),
    tallies: new Map(),
    recent: [],
    sums: {
      output_events: 0,
      output_bytes: 0,
      kept_bytes: 0,
      truncated_outputs: 0,
      diff_events: 0,
      diff_bytes: 0,
    },
    references: [],
  };
}

function inScope(scope: Scope) {
  return scope.commandId === null
    ? sql`run_id = ${scope.runId}`
    : sql`run_id = ${scope.runId} AND command_id = ${scope.commandId}`;
}

/** Read the events in (entry.throughSeq, throughSeq] and fold them into the entry. */
async function fold(db: Db, scope: Scope, entry: Entry, throughSeq: number): Promise<Entry> {
  const from = entry.throughSeq;
  const num = (field: string) =>
    sql`CASE WHEN jsonb_typeof(data->${field}) = 'number' THEN (data->>${field})::numeric ELSE 0 END`;
  const [tools, artifacts] = await Promise.all([
    sql<ToolRow & { item: string }>`${PREPARED}
      SELECT DISTINCT ON (coalesce(data->>'itemId', seq::text))
        coalesce(data->>'itemId', seq::text) AS item,
        seq, data->>'itemId' AS item_id, data->>'method' AS method, data->>'toolName' AS tool_name,
        data->>'type' AS type, data->>'status' AS status,
        CASE WHEN jsonb_typeof(data->'exitCode') = 'number' THEN (data->>'exitCode')::numeric::int END AS exit_code,
        left(data->>'command', 200) AS command
      FROM events
      WHERE ${inScope(scope)} AND category = 'tool_call' AND seq > ${from} AND seq <= ${throughSeq}
      ORDER BY coalesce(data->>'itemId', seq::text), seq DESC`.execute(db),
    sql<ArtifactRow>`${PREPARED}
      SELECT
        count(*) FILTER (WHERE category = 'command_output')::int AS output_events,
        coalesce(sum(${num('originalBytes')}) FILTER (WHERE category = 'command_output'), 0)::bigint AS output_bytes,
        coalesce(sum(${num('keptBytes')}) FILTER (WHERE category = 'command_output'), 0)::bigint AS kept_bytes,
        count(*) FILTER (WHERE category = 'command_output' AND data->>'outputTruncated' = 'true')::int AS truncated_outputs,
        count(*) FILTER (WHERE category = 'diff')::int AS diff_events,
        coalesce(sum(${num('originalBytes')}) FILTER (WHERE category = 'diff'), 0)::bigint AS diff_bytes,
        (array_agg(DISTINCT data->>'logRef' COLLATE "C") FILTER (WHERE data->>'logRef' IS NOT NULL))[1:${REFERENCES_MAX}] AS references
      FROM events
      WHERE ${inScope(scope)} AND category IN ('command_output', 'diff') AND seq > ${from} AND seq <= ${throughSeq}`.execute(
      db,
    ),
  ]);

  const fresh = tools.rows.sort((a, b) => b.seq - a.seq);
  for (const row of fresh) {
    const previous = entry.items.get(row.item);
    if (previous !== undefined) bump(entry.tallies, previous, -1);
    const tally = tallyKey(row.status, row.exit_code);
    entry.items.set(row.item, tally);
    bump(entry.tallies, tally, 1);
  }
  // Every new latest state is newer than every kept one: it goes first, and an item it
  // replaces leaves the recent list.
  const replaced = new Set(fresh.map((row) => row.item));
  entry.recent = [
    ...fresh.slice(0, REFERENCES_MAX).map(({ item: _item, ...row }) => row),
    ...entry.recent.filter((row) => !replaced.has(row.item_id ?? String(row.seq))),
  ].slice(0, REFERENCES_MAX);

  const sums = artifacts.rows[0]!;
  entry.sums.output_events += sums.output_events;
  entry.sums.output_bytes += Number(sums.output_bytes);
  entry.sums.kept_bytes += Number(sums.kept_bytes);
  entry.sums.truncated_outputs += sums.truncated_outputs;
  entry.sums.diff_events += sums.diff_events;
  entry.sums.diff_bytes += Number(sums.diff_bytes);
  entry.references = [...new Set([...entry.references, ...(sums.references ?? [])])]
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
    .slice(0, REFERENCES_MAX);
  entry.throughSeq = throughSeq;
  return entry;
}

function totalsOf(entry: Entry, recentLimit: number): WindowTotals {
  const tallies: ToolTally[] = [];
  for (const [key, n] of entry.tallies) {
    if (n === 0) continue;
    const [status, exit] = JSON.parse(key) as [string | null, number | null];
    tallies.push({ status, exit_code: exit, n });
  }
  return {
    tools: { tallies, recent: entry.recent.slice(0, recentLimit) },
    artifacts: {
      ...entry.sums,
      references: entry.references.length > 0 ? [...entry.references] : null,
    },
  };
}

const tallyKey = (status: string | null, exitCode: number | null) =>
  JSON.stringify([status, exitCode]);

function bump(tallies: Map<string, number>, key: string, by: number): void {
  tallies.set(key, (tallies.get(key) ?? 0) + by);
}

/** Most recently used last (a Map keeps insertion order). */
function touch(cache: Cache, key: string, entry: Entry): void {
  cache.entries.delete(key);
  cache.entries.set(key, entry);
}

function forget(cache: Cache, key: string): void {
  const entry = cache.entries.get(key);
  if (!entry) return;
  cache.items -= entry.items.size;
  cache.entries.delete(key);
}

function evict(cache: Cache): void {
  for (const key of cache.entries.keys()) {
    if (cache.items <= ITEMS_BUDGET && cache.entries.size <= ENTRIES_MAX) return;
    forget(cache, key);
  }
}
