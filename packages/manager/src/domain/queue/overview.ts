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
import { latestAttempts } from './views.js';
import { attemptCounts, currentReads, taskCounts } from './counters.js';
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

/**
 * Statistics from the queue's counters (migration 0014), kept by the transactions that move
 * tasks and attempts: constant time whatever the number of tasks, never derived from events.
 */
export async function queueStats(ctx: Pick<Ctx, 'db'>, queue?: string): Promise<QueueStats> {
  const [groupRows, attemptRows, changeSeq] = await Promise.all([
    taskCounts(ctx.db, queue),
    attemptCounts(ctx.db, queue),
    currentChangeSeq(ctx.db),
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

/** Commander order: states by urgency; finished tasks only when a reader has not read them. */
const COMMANDER_ORDER: readonly (readonly string[])[] = [
  ['failed'],
  ['blocked'],
  ['running'],
  ['dispatched'],
  ['completed', 'cancelled'],
  ['queued'],
];

/**
 * The first `want` tasks in commander order, state by state, each walked in queue order on
 * (queue, state, priority, enqueue_seq) and stopped as soon as the page is full, so the cost
 * follows the page, not the queue. Finished tasks are filtered on the reader's cursor.
 */
async function commanderRows(
  db: Executor,
  queue: string | undefined,
  reader: string | null,
  want: number,
) {
  const rows = [];
  for (const states of COMMANDER_ORDER) {
    if (rows.length >= want) break;
    const finished = states.includes('completed');
    if (finished && !reader) continue;
    const part = [];
    for (const state of states) {
      let q = db
        .selectFrom('queue_tasks as t')
        .leftJoin('queue_read_cursors as rc', (join) =>
          join.onRef('rc.task_id', '=', 't.task_id').on('rc.reader_id', '=', reader ?? ''),
        )
        .selectAll('t')
        .select('rc.read_version')
        .where('t.state', '=', state);
      if (queue) q = q.where('t.queue', '=', queue);
      if (finished)
        q = q.where(sql<boolean>`(rc.read_version IS NULL OR rc.read_version < t.version)`);
      part.push(
        ...(await q
          .orderBy('t.priority', 'desc')
          .orderBy('t.enqueue_seq')
          .limit(want - rows.length)
          .modifyEnd(PREPARED)
          .execute()),
      );
    }
    if (states.length > 1)
      part.sort((a, b) => b.priority - a.priority || Number(a.enqueue_seq) - Number(b.enqueue_seq));
    rows.push(...part.slice(0, want - rows.length));
  }
  return rows;
}

type Reason = Commander['items'][number]['reason'];
const RANK: Record<string, number> = { failed: 0, blocked: 1, running: 2, dispatched: 3 };

/**
 * What needs a person first, from task summaries and statistics: failed and blocked tasks,
 * then work in flight, then (for a reader) finished tasks not read yet, then queued tasks.
 */
export async function commander(ctx: Pick<Ctx, 'db'>, query: CommanderQuery): Promise<Commander> {
  const limit = query.limit ?? QUEUE_PAGE_DEFAULT;
  const reader = query.readerId ?? null;
  const [rows, stats, changeSeq, current] = await Promise.all([
    commanderRows(ctx.db, query.queue, reader, limit + 1),
    tasksByState(ctx.db, query.queue),
    currentChangeSeq(ctx.db),
    reader ? currentReads(ctx.db, reader, query.queue) : Promise.resolve(null),
  ]);
  // Every task the reader has not read at its latest version, from the counters.
  const unreadN = current === null ? null : stats.total - current;
  const page = rows.slice(0, limit);
  const attempts = await latestAttempts(ctx.db, page);
  const items = page.map((row) => {
    const reason: Reason =
      row.state in RANK ? (row.state as Reason) : row.state === 'queued' ? 'queued' : 'unread';
    const task: TaskSummary = toSummary(row, attempts.get(row.latest_attempt_id ?? '') ?? null, {
      full: query.view === 'full',
      reader: reader ? { readerId: reader, readVersion: row.read_version ?? null } : null,
    });
    return { reason, task };
  });
  return {
    queue: query.queue ?? null,
    readerId: reader,
    changeSeq,
    generatedAt: new Date().toISOString(),
    stats,
    unread: unreadN,
    items,
    truncated: rows.length > limit,
    next: nextSteps(items, reader),
  };
}

function nextSteps(items: Commander['items'], reader: string | null): string[] {
  const steps: string[] = [];
  for (const { reason, task } of items) {
    if (steps.length >= 5) break;
    if (reason === 'failed' || reason === 'blocked') {
      steps.push(
        task.counters.attempts < task.maxAttempts
          ? `queue dispatch ${task.taskId}`
          : `queue cancel ${task.taskId}`,
      );
      if (task.next && task.next !== `queue dispatch ${task.taskId}`) steps.push(task.next);
    } else if (reason === 'unread' && reader) {
      if (task.next) steps.push(task.next);
      steps.push(`queue read ${task.taskId} --reader-id ${reader}`);
    } else if (task.next) steps.push(task.next);
  }
  return steps.slice(0, 5);
}
