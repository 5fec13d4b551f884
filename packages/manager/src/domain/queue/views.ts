import { sql } from 'kysely';
import {
  QUEUE_PAGE_DEFAULT,
  ServiceError,
  TASK_ATTEMPTS_SHOWN,
  type Task,
  type TaskListQuery,
  type TaskPage,
  type TaskSummary,
} from '@svc/contracts';
import type { Executor } from '../../store/runs.js';
import type { Ctx } from '../context.js';
import { decodeCursor, encodeCursor, toSummary, toTask } from './records.js';
import { waitingView } from './waiting.js';
import {
  currentChangeSeq,
  findAttempt,
  findAttempts,
  findTask,
  listAttempts,
  listJudgeRuns,
  listReferences,
  listRetries,
  type AttemptRow,
  type TaskRow,
} from './store.js';

/**
 * Queue views read the queue's own rows (tasks, attempts with their summaries, references,
 * judge runs, read cursors) and nothing else: no run, command, event or trace.
 */
export async function getTaskRow(db: Executor, taskId: string): Promise<TaskRow> {
  const row = await findTask(db, taskId);
  if (!row) throw new ServiceError('not-found', `task ${taskId} not found`);
  return row;
}

export async function getTask(ctx: Pick<Ctx, 'db' | 'config'>, taskId: string): Promise<Task> {
  const row = await getTaskRow(ctx.db, taskId);
  const [attempt, references, judgeRuns, attempts, view, retries] = await Promise.all([
    row.latest_attempt_id ? findAttempt(ctx.db, row.latest_attempt_id) : Promise.resolve(undefined),
    listReferences(ctx.db, taskId),
    listJudgeRuns(ctx.db, taskId),
    listAttempts(ctx.db, taskId, TASK_ATTEMPTS_SHOWN),
    waitingView(ctx.db, ctx.config.scheduler, [row]),
    listRetries(ctx.db, taskId),
  ]);
  return toTask(row, attempt ?? null, references, judgeRuns, view, attempts, retries);
}

/** Latest attempts of a page of tasks, in one query. */
export async function latestAttempts(
  db: Executor,
  rows: readonly TaskRow[],
): Promise<Map<string, AttemptRow>> {
  const ids = rows.map((r) => r.latest_attempt_id).filter((id): id is string => id !== null);
  return new Map((await findAttempts(db, ids)).map((a) => [a.attempt_id, a]));
}

/**
 * A page of task summaries. Without `updatedAfter`: queue order (priority desc, then first
 * submitted first). With it: every task changed after that changeSeq, in changeSeq order, for
 * incremental polling; `nextUpdatedAfter` is the watermark for the next poll.
 */
export async function listTasks(
  ctx: Pick<Ctx, 'db' | 'config'>,
  query: TaskListQuery,
): Promise<TaskPage> {
  const limit = query.limit ?? QUEUE_PAGE_DEFAULT;
  const polling = query.updatedAfter !== undefined;
  const cursor = query.cursor ? decodeCursor(query.cursor) : null;
  if (cursor && (cursor.kind === 'seq') !== polling)
    throw new ServiceError(
      'schema-invalid',
      polling
        ? 'this cursor belongs to the queue-order listing; drop updatedAfter or the cursor'
        : 'this cursor belongs to updatedAfter polling; pass updatedAfter with it',
      { field: 'cursor' },
    );
  let q = ctx.db.selectFrom('queue_tasks').selectAll();
  if (query.queue) q = q.where('queue', '=', query.queue);
  if (query.state) q = q.where('state', '=', query.state);
  if (polling) {
    const after = Math.max(query.updatedAfter ?? 0, cursor?.seq ?? 0);
    q = q.where('change_seq', '>', after).orderBy('change_seq');
  } else {
    if (cursor?.kind === 'priority')
      q = q.where(
        sql<boolean>`(priority < ${cursor.priority} OR (priority = ${cursor.priority} AND enqueue_seq > ${cursor.seq}))`,
      );
    q = q.orderBy('priority', 'desc').orderBy('enqueue_seq');
  }
  const [rows, changeSeq] = await Promise.all([
    q.limit(limit + 1).execute(),
    currentChangeSeq(ctx.db),
  ]);
  const page = rows.slice(0, limit);
  const [attempts, view] = await Promise.all([
    latestAttempts(ctx.db, page),
    waitingView(ctx.db, ctx.config.scheduler, page),
  ]);
  const full = query.view === 'full';
  const tasks = page.map((row) => {
    const attempt = attempts.get(row.latest_attempt_id ?? '') ?? null;
    const summary = toSummary(row, attempt, view, { full });
    if (polling) summary.cursor = encodeCursor({ kind: 'seq', seq: Number(row.change_seq) });
    return summary;
  });
  const last: TaskSummary | undefined = tasks.at(-1);
  return {
    tasks,
    order: polling ? 'changeSeq' : 'priority',
    nextCursor: rows.length > limit && last ? last.cursor : null,
    nextUpdatedAfter: polling
      ? (last?.changeSeq ?? Math.max(query.updatedAfter ?? 0, cursor?.seq ?? 0))
      : null,
    changeSeq,
  };
}
