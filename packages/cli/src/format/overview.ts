import type { Commander, QueueStats } from '@svc/contracts';
import { summaryLines } from './tasks.js';

const counts = (byState: Record<string, number>) =>
  Object.entries(byState)
    .map(([state, n]) => `${state} ${n}`)
    .join(' · ');

export function statsLines(s: QueueStats): string[] {
  const lines = [
    `queue ${s.queue ?? '(all)'}: ${s.tasks.total} task(s), changeSeq ${s.changeSeq}`,
    `  tasks: ${counts(s.tasks.byState)}`,
    `  paused: ${s.paused.length === 0 ? 'no' : `${s.paused.join(', ')} (queue resume <queue> lets its tasks start)`}`,
    `  attempts: ${s.attempts.total} (retries ${s.attempts.retries}): ${counts(s.attempts.byState)}`,
  ];
  const kinds = Object.entries(s.attempts.byFailureKind);
  if (kinds.length > 0)
    lines.push(`  failure kinds: ${kinds.map(([k, n]) => `${k} ${n}`).join(' · ')}`);
  lines.push('  queue/lane  state  profile  count');
  for (const g of s.groups)
    lines.push(`    ${g.queue}/${g.lane}  ${g.state}  ${g.backendProfile}  ${g.count}`);
  if (s.groupsTruncated) lines.push('    (more groups not shown)');
  return lines;
}

export function commanderLines(c: Commander): string[] {
  const lines = [
    `commander: queue ${c.queue ?? '(all)'}${c.readerId ? `, reader ${c.readerId}` : ''}` +
      ` · ${c.stats.total} task(s): ${Object.entries(c.stats.byState)
        .filter(([, n]) => n > 0)
        .map(([s, n]) => `${s} ${n}`)
        .join(' · ')}${c.unread !== null ? ` · unread ${c.unread}` : ''}`,
  ];
  if (c.paused.length > 0)
    lines.push(
      `  paused queues: ${c.paused.join(', ')} (queue resume <queue> lets their tasks start)`,
    );
  if (c.items.length === 0) lines.push('  nothing needs attention');
  for (const item of c.items) {
    const [head = '', ...rest] = summaryLines(item.task);
    lines.push(`[${item.reason}] ${head}`, ...rest);
  }
  if (c.truncated) lines.push('  (more items: raise --limit)');
  if (c.next.length > 0) lines.push('next:', ...c.next.map((n) => `  ${n}`));
  return lines;
}
