import { sql } from 'kysely';
import {
  ATTEMPT_STATES,
  QUEUE_PAGE_DEFAULT,
  TASK_STATES,
  type Commander,
  type CommanderQuery,
  type QueueStats,
  type TaskSummary,
} from '@svc/contracts';
import type { Executor } from '../../store/runs.js';
import type { Ctx } from '../context.js';
import { toSummary } from './records.js';
import { currentChangeSeq } from './store.js';
import type { AttemptRow, TaskRow } from './store.js';
import { attemptCounts, currentReads, taskCounts } from './counters.js';
import { dispatchHelps, waitingView } from './waiting.js';
import { PREPARED } from '../../store/prepared.js';

const MAX_GROUPS = 500;

const zeroes = (states: readonly string[]) =>
  Object.fromEntries(states.map((s) => [s, 0])) as Record<string, number>;

async function tasksByState(db: Executor, queue: string | undefined) {
  const byState = zeroes(TASK_STATES);
  let total = 0;
  for (const row of await taskCounts(db, queue)) {
    byState[row.state] = (byState[row.state] ?? 0) + row.n;
    total += row.n;
  }
  return { total, byState };
}

/** Queues paused now (of this one, when given). */
export async function pausedQueues(db: Executor, queue?: string): Promise<string[]> {
  let q = db.selectFrom('queue_settings').select('queue').where('paused', '=', true);
  if (queue) q = q.where('queue', '=', queue);
  const rows = await q.orderBy('queue').execute();
  return rows.map((r) => r.queue);
}

/**
 * Statistics from the queue's counters (migration 0014), kept by the transactions that move
 * tasks and attempts: constant time whatever the number of tasks, never derived from events.
 */
export async function queueStats(ctx: Pick<Ctx, 'db'>, queue?: string): Promise<QueueStats> {
  const [groupRows, attemptRows, changeSeq, paused] = await Promise.all([
    taskCounts(ctx.db, queue),
    attemptCounts(ctx.db, queue),
    currentChangeSeq(ctx.db),
    pausedQueues(ctx.db, queue),
  ]);
  const tasks = { total: 0, byState: zeroes(TASK_STATES) };
  for (const row of groupRows) {
    tasks.byState[row.state] = (tasks.byState[row.state] ?? 0) + row.n;
    tasks.total += row.n;
  }
  const byState = zeroes(ATTEMPT_STATES);
  const byFailureKind: Record<string, number> = {};
  let total = 0;
  let retries = 0;
  for (const row of attemptRows) {
    byState[row.state] = (byState[row.state] ?? 0) + row.n;
    if (row.failure_kind)
      byFailureKind[row.failure_kind] = (byFailureKind[row.failure_kind] ?? 0) + row.n;
    total += row.n;
    retries += row.retries;
  }
  return {
    queue: queue ?? null,
    paused,
    changeSeq,
    generatedAt: new Date().toISOString(),
    tasks,
    groups: groupRows.slice(0, MAX_GROUPS).map((g) => ({
      queue: g.queue,
      lane: g.lane,
      state: g.state,
      backendProfile: g.backend_profile,
      count: g.n,
    })),
    groupsTruncated: groupRows.length > MAX_GROUPS,
    attempts: { total, byState, byFailureKind, retries },
  };
}

/** A task of the commander's page, with the reader's read version and its latest attempt. */
type PageRow = TaskRow & {
  read_version: number | null;
  /** The attempt row as JSON (its timestamps as text): null when the task has none. */
  latest_attempt: (Omit<AttemptRow, AttemptTime> & Record<AttemptTime, string | null>) | null;
};

type AttemptTime = 'supervisor_at' | 'created_at' | 'updated_at' | 'started_at' | 'terminal_at';
const ATTEMPT_TIMES: readonly AttemptTime[] = [
  'supervisor_at',
  'created_at',
  'updated_at',
  'started_at',
  'terminal_at',
];

/**
 * The first `want` tasks in commander order with their latest attempts, in one statement:
 * `svc_commander_tasks` (migration 0018) walks the states by urgency and stops as soon as the
 * page is full, so the cost follows the page, not the queue. Finished tasks appear only for a
 * reader, filtered on its cursor.
 */
async function commanderRows(
  db: Executor,
  queue: string | undefined,
  reader: string | null,
  want: number,
): Promise<Array<{ row: TaskRow & { read_version: number | null }; attempt: AttemptRow | null }>> {
  const { rows } = await sql<PageRow>`${PREPARED}
    SELECT t.*, c.page_read_version AS read_version, to_jsonb(a) AS latest_attempt
    FROM svc_commander_tasks(${queue ?? null}::text, ${reader}::text, ${want}::int)
      WITH ORDINALITY AS c(page_task_id, page_read_version, ord)
    JOIN queue_tasks t ON t.task_id = c.page_task_id
    LEFT JOIN queue_attempts a ON a.attempt_id = t.latest_attempt_id
    ORDER BY c.ord`.execute(db);
  // The rows are fresh from the driver: each is used as its task row, its attempt revived in place.
  return rows.map((row) => ({
    row,
    attempt: row.latest_attempt && attemptOfJson(row.latest_attempt),
  }));
}

function attemptOfJson(json: NonNullable<PageRow['latest_attempt']>): AttemptRow {
  const attempt = json as unknown as Record<AttemptTime, Date | null>;
  for (const key of ATTEMPT_TIMES) {
    const value = json[key];
    attempt[key] = value === null ? null : new Date(value);
  }
  return attempt as unknown as AttemptRow;
}

type Reason = Commander['items'][number]['reason'];
const RANK: Record<string, number> = { failed: 0, blocked: 1, running: 2, dispatched: 3 };

/**
 * What needs a person first, from task summaries and statistics: failed and blocked tasks,
 * then work in flight, then (for a reader) finished tasks not read yet, then queued tasks.
 */
export async function commander(
  ctx: Pick<Ctx, 'db' | 'config'>,
  query: CommanderQuery,
): Promise<Commander> {
  const limit = query.limit ?? QUEUE_PAGE_DEFAULT;
  const reader = query.readerId ?? null;
  const [rows, stats, changeSeq, current, paused] = await Promise.all([
    commanderRows(ctx.db, query.queue, reader, limit + 1),
    tasksByState(ctx.db, query.queue),
    currentChangeSeq(ctx.db),
    reader ? currentReads(ctx.db, reader, query.queue) : Promise.resolve(null),
    pausedQueues(ctx.db, query.queue),
  ]);
  // Every task the reader has not read at its latest version, from the counters.
  const unreadN = current === null ? null : stats.total - current;
  const shown = rows.slice(0, limit);
  const view = await waitingView(
    ctx.db,
    ctx.config.scheduler,
    shown.map(({ row }) => row),
  );
  // Tasks a person's dispatch would start now (the scheduler will not, nothing refuses it).
  const dispatchable = new Set<string>();
  const items = shown.map(({ row, attempt }) => {
    const reason: Reason =
      row.state in RANK ? (row.state as Reason) : row.state === 'queued' ? 'queued' : 'unread';
    const task: TaskSummary = toSummary(row, attempt, view, {
      full: query.view === 'full',
      reader: reader ? { readerId: reader, readVersion: row.read_version ?? null } : null,
    });
    if (dispatchHelps(row, attempt, task.waiting, view)) dispatchable.add(task.taskId);
    return { reason, task };
  });
  return {
    queue: query.queue ?? null,
    readerId: reader,
    changeSeq,
    generatedAt: new Date().toISOString(),
    stats,
    paused,
    unread: unreadN,
    items,
    truncated: rows.length > limit,
    next: nextSteps(items, reader, dispatchable),
  };
}

function nextSteps(
  items: Commander['items'],
  reader: string | null,
  dispatchable: ReadonlySet<string>,
): string[] {
  const steps: string[] = [];
  for (const { reason, task } of items) {
    if (steps.length >= 5) break;
    if (reason === 'failed' || reason === 'blocked') {
      // A dispatch only when it helps: not one the scheduler makes by itself (a retry), not
      // one capacity or a busy session would refuse. A task that used its budget is retried.
      const dispatch = `queue dispatch ${task.taskId}`;
      const retry = `queue retry ${task.taskId}`;
      if (dispatchable.has(task.taskId)) steps.push(dispatch);
      else if (task.counters.sinceRetry >= task.maxAttempts) steps.push(retry);
      if (task.next && task.next !== dispatch && task.next !== retry) steps.push(task.next);
    } else if (reason === 'unread' && reader) {
      if (task.next) steps.push(task.next);
      steps.push(`queue read ${task.taskId} --reader-id ${reader}`);
    } else if (task.next) steps.push(task.next);
  }
  return steps.slice(0, 5);
}
