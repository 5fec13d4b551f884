import type { Task, TaskRetryBulkResponse } from '@svc/contracts';
import { summaryLines, taskLines } from './tasks.js';

/** A single retry: what changed in one line, then the task as `queue show` prints it. */
export function retryLines(t: Task): string[] {
  const last = t.retries.at(-1);
  const head = last
    ? `retried ${t.taskId}: ${last.fromState} -> ${t.state}, fresh budget of ${t.maxAttempts} attempt(s) (${last.attemptsBefore} earlier kept; retry ${t.counters.retries} by ${last.by})`
    : `retried ${t.taskId}: ${t.state}`;
  return [head, ...taskLines(t)];
}

/** A bulk retry: how many, each task's summary, and whether more matched. */
export function retryBulkLines(answer: TaskRetryBulkResponse): string[] {
  const n = answer.tasks.length;
  const lines = [
    answer.dryRun
      ? `${n} task(s) would be retried (dry run: nothing changed)`
      : `${n} task(s) retried: queued again with a fresh attempt budget`,
  ];
  for (const t of answer.tasks) lines.push(...summaryLines(t));
  if (answer.more)
    lines.push(
      `more matched than the limit of ${answer.limit}: run it again${answer.dryRun ? ' without --dry-run, then again' : ''} for the next ones`,
    );
  return lines;
}
