import { sql } from 'kysely';
import {
  DEFAULT_MAX_ATTEMPTS,
  newId,
  payloadHash,
  ServiceError,
  type QueuePlan,
  type Task,
  type TaskReference,
  type TaskSubmitBody,
} from '@svc/contracts';
import { json } from '../../store/json.js';
import type { Ctx } from '../context.js';
import { QUEUE_SUBMIT_KEY, WAKE_CHANNEL } from '../../store/wakeups.js';
import {
  checkSessionRef,
  checkTaskInputs,
  profileOf,
  runBaseOfBody,
  TASK_DEFAULTS,
} from './inputs.js';
import { schedulingColumns } from '../scheduler/task-policy.js';
import { findTask, LAST_CHANGE_SEQ, takeChangeSeqs } from './store.js';
import type { Executor, Tx } from '../../store/runs.js';
import type { TaskRow } from './store.js';
import { toTask } from './records.js';
import { waitingView } from './waiting.js';
import { getTask } from './views.js';
import { PREPARED } from '../../store/prepared.js';

export type SubmitOutcome =
  { kind: 'task'; task: Task; created: boolean } | { kind: 'plan'; plan: QueuePlan };

/**
 * Store a task (state `queued`). Nothing is scheduled and no run is created. Resubmitting a
 * taskId with the same content returns the stored task; other content is an
 * `idempotency-conflict`.
 */
export async function submitTask(ctx: Ctx, body: TaskSubmitBody): Promise<SubmitOutcome> {
  const { row, hash, profile, givenId } = await checkedRow(ctx, ctx.db, body);
  if (givenId) {
    const existing = await findTask(ctx.db, givenId);
    if (existing) {
      if (existing.payload_hash !== hash)
        throw new ServiceError(
          'idempotency-conflict',
          `task ${givenId} exists with different content`,
          { taskId: givenId },
        );
      if (!body.dryRun) return { kind: 'task', task: await getTask(ctx, givenId), created: false };
    }
  }
  const references = body.references ?? [];

  if (body.dryRun) {
    return {
      kind: 'plan',
      plan: {
        action: 'submit',
        taskId: givenId ?? null,
        dryRun: true,
        mutation: false,
        plan: {
          storeTask: {
            queue: row.queue,
            lane: row.lane,
            title: row.title,
            priority: row.priority,
            state: 'queued',
            backendProfile: profile,
            providerId: row.provider_id,
            maxAttempts: row.max_attempts,
            sessionRef: body.sessionRef ?? null,
            references: references.length,
          },
          createsRun: false,
          exists: givenId ? (await findTask(ctx.db, givenId)) !== undefined : false,
        },
        valuesPrinted: false,
      },
    };
  }

  const inserted = await insertTask(ctx, ctx.db, row, references);
  // A racing submit of the same id won: answer like a resubmission.
  if (!inserted) return submitTask(ctx, body);
  // This replica's scheduler starts now, not when the NOTIFY comes back.
  ctx.wakeups.committed(QUEUE_SUBMIT_KEY);
  // The task as it was written: new, no attempt or judge run yet.
  const { woke: _woke, ...written } = inserted.written;
  // Why it waits: with the scheduler on it is the scheduler's to start (capacity is read when a
  // view of the task is asked for, not on every submit); off, a person's dispatch, if it fits.
  const view = await waitingView(ctx.db, ctx.config.scheduler, [written], {
    capacity: !ctx.config.scheduler.enabled,
  });
  const task = toTask(written, null, inserted.stored, [], view);
  return { kind: 'task', task, created: true };
}

/** The tick of a recurring schedule a task is submitted for (schedules/fire.ts). */
export interface ScheduleOrigin {
  scheduleId: string;
  tick: Date;
}

/**
 * A schedule's tick submits its template through the same checks and insert as
 * `POST /queue/tasks`, inside the transaction that claims the tick: the task exists exactly
 * when the tick moved on. The task's (schedule, tick) is unique in the database as well.
 * The caller wakes this replica's claims after its commit (the NOTIFY goes on commit).
 */
export async function submitScheduled(
  ctx: Ctx,
  trx: Tx,
  body: TaskSubmitBody,
  origin: ScheduleOrigin,
): Promise<TaskRow> {
  const { row } = await checkedRow(ctx, trx, body);
  const scheduled = { ...row, schedule_id: origin.scheduleId, schedule_tick: origin.tick };
  const inserted = await insertTask(ctx, trx, scheduled, body.references ?? []);
  if (!inserted) throw new Error(`task ${row.task_id} exists already`);
  const { woke: _woke, ...written } = inserted.written;
  return written;
}

/** Every check a submission passes before it is stored, and the row it stores. */
async function checkedRow(ctx: Ctx, db: Executor, body: TaskSubmitBody) {
  const session = body.sessionRef
    ? await checkSessionRef(db, body.sessionRef, body.tenantId, body.projectId, {
        requireStorage: true,
      })
    : undefined;
  // A task continuing a session inherits its profile unless it names one (spec/2).
  const profile = session && !body.backendProfile ? session.backend_profile : profileOf(body);
  const runBase = runBaseOfBody(body, profile);
  checkTaskInputs(ctx, runBase, profile, body.payload);
  if (body.concurrencyLimit !== undefined && body.concurrencyKey === undefined)
    throw new ServiceError(
      'schema-invalid',
      'concurrencyLimit needs a concurrencyKey: the limit counts the attempts of one key',
      { field: 'concurrencyLimit' },
    );
  const { dryRun: _dryRun, taskId: givenId, ...content } = body;
  const hash = payloadHash(content);
  const row = {
    task_id: givenId ?? newId('tsk'),
    tenant_id: body.tenantId,
    project_id: body.projectId,
    queue: body.queue,
    lane: body.lane ?? TASK_DEFAULTS.lane,
    title: body.title,
    priority: body.priority ?? 0,
    state: 'queued',
    backend_profile: profile,
    provider_id: runBase.providerId,
    workspace_ref: json(runBase.workspaceRef),
    resource_bundle_ref: body.resourceBundleRef ? json(body.resourceBundleRef) : null,
    session_ref: body.sessionRef ? json(body.sessionRef) : null,
    execution_policy: body.executionPolicy ? json(body.executionPolicy) : null,
    payload: json(body.payload),
    payload_hash: hash,
    metadata: json(body.metadata ?? {}),
    summary: body.summary ?? null,
    max_attempts: body.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    concurrency_key: body.concurrencyKey ?? null,
    concurrency_limit: body.concurrencyKey === undefined ? null : (body.concurrencyLimit ?? 1),
    ...schedulingColumns(body, profile),
  };
  return { row, hash, profile, givenId };
}

type SubmittedRow = Awaited<ReturnType<typeof checkedRow>>['row'] & {
  schedule_id?: string;
  schedule_tick?: Date;
};

/**
 * Insert a checked row with its references; undefined when its task id exists already. Change
 * number, insert and the schedulers' wake-up (NOTIFY is sent on commit) in one statement; a
 * resubmission that inserts nothing wakes no one. Inside a transaction (a schedule's tick) the
 * references join it; otherwise they get one of their own.
 */
async function insertTask(
  ctx: Ctx,
  db: Executor,
  row: SubmittedRow,
  references: readonly TaskReference[],
) {
  const insertRow = (on: Executor) =>
    takeChangeSeqs(on)
      .insertInto('queue_tasks')
      .values({ ...row, change_seq: LAST_CHANGE_SEQ, enqueue_seq: LAST_CHANGE_SEQ })
      .onConflict((oc) => oc.column('task_id').doNothing())
      .returningAll()
      .returning(sql<string>`pg_notify(${WAKE_CHANNEL}, ${QUEUE_SUBMIT_KEY})::text`.as('woke'))
      .modifyEnd(PREPARED)
      .executeTakeFirst();
  if (references.length === 0)
    return insertRow(db).then((written) => written && { written, stored: [] });
  const withReferences = async (trx: Executor) => {
    const written = await insertRow(trx);
    if (!written) return undefined;
    const stored = await trx
      .insertInto('queue_task_references')
      .values(
        references.map((r, position) => ({
          task_id: written.task_id,
          position,
          kind: r.kind,
          ref: r.ref,
          url: r.url ?? null,
          title: r.title ?? null,
        })),
      )
      .returningAll()
      .execute();
    return { written, stored };
  };
  return db.isTransaction ? withReferences(db) : ctx.db.transaction().execute(withReferences);
}
