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

const MAX_GROUPS = 500;

const zeroes = (states: readonly string[]) =>
  Object.fromEntries(states.map((s) => [s, 0])) as Record<string, number>;

async function tasksByState(db: Executor, queue: string | undefined) {
  let q = db
    .selectFrom('queue_tasks')
    .select(['state', sql<number>`count(*)::int`.as('n')])
    .groupBy('state');
  if (queue) q = q.where('queue', '=', queue);
  const byState = zeroes(TASK_STATES);
  let total = 0;
  for (const row of await q.execute()) {
    byState[row.state] = row.n;
    total += row.n;
  }
  return { total, byState };
}

/** Statistics grouped from the queue's own rows (tasks and attempts), never from events. */
export async function queueStats(ctx: Pick<Ctx, 'db'>, queue?: string): Promise<QueueStats> {
  let groups = ctx.db
    .selectFrom('queue_tasks')
    .select(['queue', 'lane', 'state', 'backend_profile', sql<number>`count(*)::int`.as('n')])
    .groupBy(['queue', 'lane', 'state', 'backend_profile'])
    .orderBy('queue')
    .orderBy('lane')
    .orderBy('state')
    .orderBy('backend_profile')
    .limit(MAX_GROUPS + 1);
  if (queue) groups = groups.where('queue', '=', queue);
  let attempts = ctx.db
    .selectFrom('queue_attempts as a')
    .innerJoin('queue_tasks as t', 't.task_id', 'a.task_id')
    .select([
      'a.state',
      'a.failure_kind',
      sql<number>`count(*)::int`.as('n'),
      sql<number>`count(*) FILTER (WHERE a.retry_index > 0)::int`.as('retries'),
    ])
    .groupBy(['a.state', 'a.failure_kind']);
  if (queue) attempts = attempts.where('t.queue', '=', queue);
  const [groupRows, attemptRows, tasks, changeSeq] = await Promise.all([
    groups.execute(),
    attempts.execute(),
    tasksByState(ctx.db, queue),
    currentChangeSeq(ctx.db),
  ]);
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

type Reason = Commander['items'][number]['reason'];
const RANK: Record<string, number> = { failed: 0, blocked: 1, running: 2, dispatched: 3 };

/**
 * What needs a person first, from task summaries and statistics: failed and blocked tasks,
 * then work in flight, then (for a reader) finished tasks not read yet, then queued tasks.
 */
export async function commander(ctx: Pick<Ctx, 'db'>, query: CommanderQuery): Promise<Commander> {
  const limit = query.limit ?? QUEUE_PAGE_DEFAULT;
  const reader = query.readerId ?? null;
  const unread = sql<boolean>`(rc.read_version IS NULL OR rc.read_version < t.version)`;
  let q = ctx.db
    .selectFrom('queue_tasks as t')
    .leftJoin('queue_read_cursors as rc', (join) =>
      join.onRef('rc.task_id', '=', 't.task_id').on('rc.reader_id', '=', reader ?? ''),
    )
    .selectAll('t')
    .select([
      'rc.read_version',
      sql<number>`CASE t.state WHEN 'failed' THEN 0 WHEN 'blocked' THEN 1 WHEN 'running' THEN 2
        WHEN 'dispatched' THEN 3 WHEN 'queued' THEN 5 ELSE 4 END`.as('rank'),
    ])
    .where((eb) =>
      reader
        ? eb.or([eb('t.state', 'not in', ['completed', 'cancelled']), unread])
        : eb('t.state', 'not in', ['completed', 'cancelled']),
    );
  if (query.queue) q = q.where('t.queue', '=', query.queue);
  let unreadCount: Promise<number | null> = Promise.resolve(null);
  if (reader) {
    let c = ctx.db
      .selectFrom('queue_tasks as t')
      .leftJoin('queue_read_cursors as rc', (join) =>
        join.onRef('rc.task_id', '=', 't.task_id').on('rc.reader_id', '=', reader),
      )
      .select(sql<number>`count(*)::int`.as('n'))
      .where(unread);
    if (query.queue) c = c.where('t.queue', '=', query.queue);
    unreadCount = c.executeTakeFirstOrThrow().then((r) => r.n);
  }
  const [rows, stats, changeSeq, unreadN] = await Promise.all([
    q
      .orderBy('rank')
      .orderBy('t.priority', 'desc')
      .orderBy('t.enqueue_seq')
      .limit(limit + 1)
      .execute(),
    tasksByState(ctx.db, query.queue),
    currentChangeSeq(ctx.db),
    unreadCount,
  ]);
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
