import { sql, type Expression, type SqlBool } from 'kysely';
import type { EventRow } from './events.js';
import type { Executor } from './runs.js';
import { PREPARED } from './prepared.js';

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
  const result = await sql<EventRow>`${PREPARED}
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
  const result = await sql<EventRow>`${PREPARED}
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
  const result = await sql<EventRow>`${PREPARED}
    SELECT * FROM events
    WHERE ${inScope(scope)} AND category = 'assistant_message' AND seq < ${beforeSeq} AND data->>'itemId' = ${itemId}
    ORDER BY (data->>'part')::int NULLS FIRST, seq LIMIT 1000`.execute(db);
  return result.rows;
}

export async function scopeCounts(
  db: Executor,
  scope: Scope,
): Promise<{ count: number; lastSeq: number | null }> {
  const result = await sql<{ count: number; last_seq: number | null }>`${PREPARED}
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

export interface ArtifactRow {
  output_events: number;
  output_bytes: number;
  kept_bytes: number;
  truncated_outputs: number;
  diff_events: number;
  diff_bytes: number;
  references: string[] | null;
}

/** Tool calls whose latest state (among the most recent 200 tool events) is still running. */
export async function openToolCalls(db: Executor, scope: Scope): Promise<number> {
  const result = await sql<{ open: number }>`${PREPARED}
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
  const result = await sql<{ found: boolean }>`${PREPARED}
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
