import { sql } from 'kysely';
import { existingKeys, insertEvents, type NewEvent } from '../store/events.js';
import type { RunRow, Tx } from '../store/runs.js';
import { eventsWakeKey, wakeOnCommit } from '../store/wakeups.js';
import { eventsAppended } from '../metrics/registry.js';

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
  await insertEvents(trx, run.run_id, run.last_seq + 1, fresh);
  const lastSeq = run.last_seq + fresh.length;
  await trx
    .updateTable('runs')
    .set({ last_seq: lastSeq, updated_at: sql`now()` } as never)
    .where('run_id', '=', run.run_id)
    .execute();
  await countPerCommand(trx, fresh, run.last_seq + 1);
  await wakeOnCommit(trx, eventsWakeKey(run.run_id));
  // Counted before the commit: a rolled-back append may be counted, which a rate tolerates.
  eventsAppended.inc(fresh.length);
  run.last_seq = lastSeq; // the caller's row stays current for further writes in this transaction
  return { written, lastSeq };
}

/** Per-command counters, so a result never counts a turn's events row by row. */
async function countPerCommand(trx: Tx, fresh: NewEvent[], firstSeq: number): Promise<void> {
  const perCommand = new Map<string, { count: number; last: number }>();
  fresh.forEach((event, i) => {
    if (event.commandId === null) return;
    const entry = perCommand.get(event.commandId) ?? { count: 0, last: 0 };
    entry.count += 1;
    entry.last = firstSeq + i;
    perCommand.set(event.commandId, entry);
  });
  for (const [commandId, { count, last }] of perCommand) {
    await trx
      .updateTable('commands')
      .set({ event_count: sql`event_count + ${count}`, last_event_seq: last } as never)
      .where('command_id', '=', commandId)
      .execute();
  }
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
