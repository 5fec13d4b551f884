import { sql } from 'kysely';
import { existingKeys, type NewEvent } from '../../store/events.js';
import { eventBatch } from '../../store/event-batch.js';
import type { RunRow, Tx } from '../../store/runs.js';
import { eventsWakeKey, WAKE_CHANNEL } from '../../store/wakeups.js';
import { eventsAppended } from '../../metrics/registry.js';

export interface Written {
  key: string | null;
  seq: number;
  duplicate: boolean;
}

/**
 * The one way an event enters the log. The caller holds the run row lock (lockRun), so seqs
 * are allocated without races and stay contiguous: last_seq moves in the same transaction.
 * An event whose key is already in the run returns its existing seq and is not written again.
 */
export async function writeEvents(
  trx: Tx,
  run: RunRow,
  events: NewEvent[],
): Promise<{ written: Written[]; lastSeq: number }> {
  const keys = events.map((e) => e.key).filter((k): k is string => k !== null);
  const existing = await existingKeys(trx, run.run_id, keys);
  const fresh: NewEvent[] = [];
  const written: Written[] = [];
  let next = run.last_seq + 1;
  for (const event of events) {
    const seen = event.key !== null ? existing.get(event.key) : undefined;
    if (seen !== undefined) {
      written.push({ key: event.key, seq: seen, duplicate: true });
      continue;
    }
    fresh.push(event);
    written.push({ key: event.key, seq: next++, duplicate: false });
    if (event.key !== null) existing.set(event.key, next - 1);
  }
  if (fresh.length === 0) return { written, lastSeq: run.last_seq };
  const lastSeq = run.last_seq + fresh.length;
  await appendRows(trx, run.run_id, run.last_seq + 1, fresh);
  // Counted before the commit: a rolled-back append may be counted, which a rate tolerates.
  eventsAppended.inc(fresh.length);
  run.last_seq = lastSeq; // the caller's row stays current for further writes in this transaction
  return { written, lastSeq };
}

/**
 * The events, the run's last seq, the per-command counters and the wake-up in one statement:
 * one round trip under the run lock the caller holds, whatever the batch holds. Data-modifying
 * CTEs run exactly once and to completion, whether or not the outer query reads them.
 */
async function appendRows(
  trx: Tx,
  runId: string,
  firstSeq: number,
  fresh: NewEvent[],
): Promise<void> {
  const batch = eventBatch(fresh);
  const before = firstSeq - 1;
  await sql`
    WITH inserted AS (
      INSERT INTO events (run_id, seq, command_id, category, name, event_key, observed_at, data)
      SELECT ${runId}, ${before} + x.i, x.command_id, x.category, x.name, x.event_key,
        x.observed_at, x.data
      FROM jsonb_to_recordset(${batch.rows}::jsonb) AS x(i integer, command_id text,
        category text, name text, event_key text, observed_at timestamptz, data jsonb)
      RETURNING 1
    ), moved AS (
      UPDATE runs SET last_seq = ${before + fresh.length}, updated_at = now()
      WHERE run_id = ${runId} RETURNING 1
    ), counted AS (
      UPDATE commands c SET event_count = c.event_count + v.count,
        last_event_seq = ${before} + v.last_i
      FROM jsonb_to_recordset(${batch.counts}::jsonb) AS v(command_id text, count integer,
        last_i integer)
      WHERE c.command_id = v.command_id RETURNING 1
    )
    SELECT pg_notify(${WAKE_CHANNEL}, ${eventsWakeKey(runId)})`.execute(trx);
}

/** A manager-written system or terminal event (key makes it idempotent). */
export function managerEvent(
  category: 'system' | 'terminal_status' | 'error',
  name: string,
  key: string,
  commandId: string | null,
  data: Record<string, unknown>,
): NewEvent {
  return {
    key,
    commandId,
    category,
    name,
    observedAt: new Date(),
    data: { ...data, source: 'run-manager' },
  };
}

/** What a command's terminal_status event says (`details` only for an outcome other than completed). */
export interface TerminalFacts {
  status: string;
  failureKind: string | null;
  message: string | null;
  /** Absent when the ending says nothing of the turn (a run ended under it). */
  threadId?: string | null;
  turnId?: string | null;
  details?: Record<string, unknown>;
  via: string;
}

/** A command's terminal_status event: one per command, its key makes a repeat a duplicate. */
export function terminalEvent(commandId: string, facts: TerminalFacts): NewEvent {
  const { details, ...rest } = facts;
  return managerEvent('terminal_status', 'command.terminal', terminalKeyOf(commandId), commandId, {
    ...rest,
    ...(details ? { details } : {}),
  });
}

export const terminalKeyOf = (commandId: string) => `terminal:${commandId}`;
