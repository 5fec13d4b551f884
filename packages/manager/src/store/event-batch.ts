import type { NewEvent } from './events.js';
import { json } from './json.js';

/**
 * A batch of new events as the one-statement writers take it: the rows and the per-command
 * counters, each row and each command's last event by its 1-based place in the batch (`i`,
 * `last_i`), so the writer that holds the run's last seq turns places into seqs. As JSON text
 * (`rows`, `counts`) for a call of one batch, as values (`rowList`, `countList`) to nest in
 * the JSON of a group.
 */
export function eventBatch(events: readonly NewEvent[]) {
  const rowList = events.map((e, i) => ({
    i: i + 1,
    command_id: e.commandId,
    category: e.category,
    name: e.name,
    event_key: e.key,
    observed_at: e.observedAt.toISOString(),
    data: e.data,
  }));
  // Per-command counters, so a result never counts a turn's events row by row.
  const counts = new Map<string, { command_id: string; count: number; last_i: number }>();
  events.forEach((e, i) => {
    if (e.commandId === null) return;
    const entry = counts.get(e.commandId) ?? { command_id: e.commandId, count: 0, last_i: 0 };
    entry.count += 1;
    entry.last_i = i + 1;
    counts.set(e.commandId, entry);
  });
  const countList = [...counts.values()];
  return {
    get rows() {
      return json(rowList);
    },
    get counts() {
      return json(countList);
    },
    rowList,
    countList,
    commandIds: [...counts.keys()],
  };
}
