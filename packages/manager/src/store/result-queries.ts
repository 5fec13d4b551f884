import { sql, type Expression, type SqlBool } from 'kysely';
import type { EventRow } from './events.js';
import type { Executor } from './runs.js';

/**
 * Queries behind the result envelope. A scope is one command's events (commandId set) or, for
 * a run without commands, all of the run's events. Every query walks the (run_id, command_id,
 * seq) index, newest first where only the latest row matters.
 */
export interface Scope {
  runId: string;
  commandId: string | null;
}

function inScope(scope: Scope): Expression<SqlBool> {
  return scope.commandId === null
    ? sql<SqlBool>`run_id = ${scope.runId}`
    : sql<SqlBool>`run_id = ${scope.runId} AND command_id = ${scope.commandId}`;
}

export async function latestTerminal(db: Executor, scope: Scope): Promise<EventRow | undefined> {
  const ownLevel = scope.commandId === null ? sql`command_id IS NULL` : sql`TRUE`;
  const result = await sql<EventRow>`
    SELECT * FROM events WHERE ${inScope(scope)} AND ${ownLevel} AND category = 'terminal_status'
    ORDER BY seq DESC LIMIT 1`.execute(db);
  return result.rows[0];
}

/** The last assistant event before `beforeSeq` with non-empty text, optionally authoritative. */
export async function latestAssistant(
  db: Executor,
  scope: Scope,
  beforeSeq: number,
  authoritative: boolean,
): Promise<EventRow | undefined> {
  const authority = authoritative
    ? sql`AND data->>'final' = 'true' AND data->>'replyAuthority' = 'true'`
    : sql``;
  const result = await sql<EventRow>`
    SELECT * FROM events
    WHERE ${inScope(scope)} AND category = 'assistant_message' AND seq < ${beforeSeq}
      AND coalesce(data->>'text', '') <> '' ${authority}
    ORDER BY seq DESC LIMIT 1`.execute(db);
  return result.rows[0];
}

/** Every part of one split assistant message, in part order. */
export async function assistantParts(
  db: Executor,
  scope: Scope,
  itemId: string,
  beforeSeq: number,
): Promise<EventRow[]> {
  const result = await sql<EventRow>`
    SELECT * FROM events
    WHERE ${inScope(scope)} AND category = 'assistant_message' AND seq < ${beforeSeq} AND data->>'itemId' = ${itemId}
    ORDER BY (data->>'part')::int NULLS FIRST, seq LIMIT 1000`.execute(db);
  return result.rows;
}

export async function scopeCounts(
  db: Executor,
  scope: Scope,
): Promise<{ count: number; lastSeq: number | null }> {
  const result = await sql<{ count: number; last_seq: number | null }>`
    SELECT count(*)::int AS count, max(seq) AS last_seq FROM events WHERE ${inScope(scope)}`.execute(
    db,
  );
  const row = result.rows[0];
  return { count: row?.count ?? 0, lastSeq: row?.last_seq ?? null };
}

export interface ToolRow {
  seq: number;
  item_id: string | null;
  method: string | null;
  tool_name: string | null;
  type: string | null;
  status: string | null;
  exit_code: number | null;
  command: string | null;
}

export interface ToolTally {
  status: string | null;
  exit_code: number | null;
  n: number;
}

/**
 * Tool calls inside a window, by the latest state of each call (its item id): counts by
 * status and exit code, and the most recent calls. Aggregated in SQL, so a turn with
 * thousands of tool calls sends a handful of rows, not one per call.
 */
export async function toolCalls(
  db: Executor,
  scope: Scope,
  afterSeq: number,
  throughSeq: number,
  recentLimit: number,
): Promise<{ tallies: ToolTally[]; recent: ToolRow[] }> {
  const result = await sql<{ tallies: ToolTally[] | null; recent: ToolRow[] | null }>`
    WITH latest AS (
      SELECT DISTINCT ON (coalesce(data->>'itemId', seq::text))
        seq, data->>'itemId' AS item_id, data->>'method' AS method, data->>'toolName' AS tool_name,
        data->>'type' AS type, data->>'status' AS status,
        CASE WHEN jsonb_typeof(data->'exitCode') = 'number' THEN (data->>'exitCode')::numeric::int END AS exit_code,
        left(data->>'command', 200) AS command
      FROM events
      WHERE ${inScope(scope)} AND category = 'tool_call' AND seq > ${afterSeq} AND seq <= ${throughSeq}
      ORDER BY coalesce(data->>'itemId', seq::text), seq DESC
    )
    SELECT
      (SELECT json_agg(t) FROM (SELECT status, exit_code, count(*)::int AS n FROM latest GROUP BY status, exit_code) t) AS tallies,
      (SELECT json_agg(r) FROM (SELECT * FROM latest ORDER BY seq DESC LIMIT ${recentLimit}) r) AS recent`.execute(
    db,
  );
  const row = result.rows[0];
  return { tallies: row?.tallies ?? [], recent: row?.recent ?? [] };
}

export interface ArtifactRow {
  output_events: number;
  output_bytes: number;
  kept_bytes: number;
  truncated_outputs: number;
  diff_events: number;
  diff_bytes: number;
  references: string[] | null;
}

export async function artifacts(
  db: Executor,
  scope: Scope,
  afterSeq: number,
  throughSeq: number,
): Promise<ArtifactRow> {
  const num = (field: string) =>
    sql`CASE WHEN jsonb_typeof(data->${field}) = 'number' THEN (data->>${field})::numeric ELSE 0 END`;
  const result = await sql<ArtifactRow>`
    SELECT
      count(*) FILTER (WHERE category = 'command_output')::int AS output_events,
      coalesce(sum(${num('originalBytes')}) FILTER (WHERE category = 'command_output'), 0)::bigint AS output_bytes,
      coalesce(sum(${num('keptBytes')}) FILTER (WHERE category = 'command_output'), 0)::bigint AS kept_bytes,
      count(*) FILTER (WHERE category = 'command_output' AND data->>'outputTruncated' = 'true')::int AS truncated_outputs,
      count(*) FILTER (WHERE category = 'diff')::int AS diff_events,
      coalesce(sum(${num('originalBytes')}) FILTER (WHERE category = 'diff'), 0)::bigint AS diff_bytes,
      (array_agg(DISTINCT data->>'logRef') FILTER (WHERE data->>'logRef' IS NOT NULL))[1:10] AS references
    FROM events
    WHERE ${inScope(scope)} AND category IN ('command_output', 'diff') AND seq > ${afterSeq} AND seq <= ${throughSeq}`.execute(
    db,
  );
  return result.rows[0]!;
}

/** Tool calls whose latest state (among the most recent 200 tool events) is still running. */
export async function openToolCalls(db: Executor, scope: Scope): Promise<number> {
  const result = await sql<{ open: number }>`
    SELECT count(*)::int AS open FROM (
      SELECT DISTINCT ON (item) status FROM (
        SELECT coalesce(data->>'itemId', seq::text) AS item, data->>'status' AS status, seq
        FROM events WHERE ${inScope(scope)} AND category = 'tool_call'
        ORDER BY seq DESC LIMIT 200
      ) recent ORDER BY item, seq DESC
    ) latest WHERE status IN ('started', 'inProgress')`.execute(db);
  return result.rows[0]?.open ?? 0;
}

/** Whether the target command produced events after `afterSeq` (steer delivery evidence). */
export async function targetEventsAfter(
  db: Executor,
  runId: string,
  steerCommandId: string,
  targetCommandId: string,
  fallbackSeq: number,
): Promise<boolean> {
  // "Later" means after the runner recorded the steer's delivery (`steer.delivered`); the
  // steer's terminal status lands after a further round trip, by which time a short target
  // turn may have finished. Without a delivery event the terminal event is the mark.
  const result = await sql<{ found: boolean }>`
    SELECT EXISTS (
      SELECT 1 FROM events
      WHERE run_id = ${runId} AND command_id = ${targetCommandId} AND category <> 'terminal_status'
        AND seq > COALESCE(
          (SELECT min(seq) FROM events
           WHERE run_id = ${runId} AND command_id = ${steerCommandId}
             AND category = 'backend_status' AND name = 'steer.delivered'),
          ${fallbackSeq})
    ) AS found`.execute(db);
  return result.rows[0]?.found ?? false;
}
