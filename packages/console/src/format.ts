// How times and durations read in the console: one place, so every view says them alike.

/** A duration as a person reads it: 0.4 s, 12.3 s, 4m 05s, 2h 03m. */
export function duration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '–';
  if (ms < 10_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
}

/** Milliseconds between two instants; an open end is now. */
export function between(
  start: string | null | undefined,
  end: string | null | undefined,
  now = Date.now(),
): number | null {
  if (!start) return null;
  const from = Date.parse(start);
  const to = end ? Date.parse(end) : now;
  return Number.isNaN(from) || Number.isNaN(to) ? null : Math.max(0, to - from);
}

/** Relative age: 5s, 3m, 2h 10m. */
export function ago(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m}m`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}

const sameDay = (a: Date, b: Date) =>
  a.getFullYear() === b.getFullYear() &&
  a.getMonth() === b.getMonth() &&
  a.getDate() === b.getDate();

/** Clock time of an instant (with its date when not today), to the second. */
export function clock(at: string): string {
  const date = new Date(at);
  const time = date.toLocaleTimeString(undefined, { hour12: false });
  return sameDay(date, new Date()) ? time : `${date.toLocaleDateString()} ${time}`;
}

/** One line of a longer text, cut at `max` characters. */
export function oneLine(text: string | null | undefined, max = 120): string {
  if (!text) return '';
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}
