import { isServiceError, type DispatchResponse } from '@svc/contracts';
import { sql, type RawBuilder } from 'kysely';
import type { SchedulerSettings } from '../../config.js';
import type { Executor, Tx } from '../../store/runs.js';
import type { Ctx } from '../context.js';
import { checkDispatchable, createAttempts } from '../queue/attempts.js';
import { prepare } from '../queue/dispatch.js';
import { launchAttempt, type QueueDeps } from '../queue/launch.js';
import { changeTask, lockTask, type AttemptRow, type TaskRow } from '../queue/store.js';
import {
  capacityCtes,
  capacityOf,
  lockCapacity,
  type CapacityColumns,
  pickFair,
  type Candidate,
} from './capacity.js';
import { backoffDelay, retryPolicyOf } from './task-policy.js';
import { PREPARED } from '../../store/prepared.js';

export interface Claimed {
  task: TaskRow;
  /** The task as it was before the claim (to put it back if the attempt cannot start). */
  before: TaskRow;
  attempt: AttemptRow;
}

/**
 * One scheduling decision, in one transaction under the capacity lock: read what runs, lock up
 * to a batch of ready tasks per tenant (`FOR UPDATE SKIP LOCKED`: a task a manual dispatch or
 * cancel holds is passed over, never waited for), pick fairly within every limit and create
 * their attempts as a manual dispatch would, one statement per kind for the whole batch.
 * `write` adds the attempts' further records to the same transaction (their tasks still
 * locked); returns the claimed attempts, what `write` returned and whether another claim may
 * find more at once (`more`), or null when none.
 */
export async function claimBatch<W>(
  ctx: Ctx,
  settings: SchedulerSettings,
  write: (trx: Tx, claimed: Claimed[]) => Promise<W>,
): Promise<{ claimed: Claimed[]; written: W; more: boolean } | null> {
  return ctx.db.transaction().execute(async (trx) => {
    await lockCapacity(trx);
    // Capacity and candidates in one statement, after the lock: up to a batch of ready tasks
    // per tenant under its limit (configured limits are whole numbers, never null), no more
    // than the global limit leaves room for. `pickFair` checks every limit again per task.
    const rows = await sql<TaskRow & CapacityColumns & { capacity_room: number }>`${PREPARED}
      WITH ${capacityCtes(settings, settings.batchSize)},
      open_tenants AS (
        SELECT q.tenant_id FROM (
          SELECT DISTINCT tenant_id FROM queue_tasks WHERE state = 'queued'
        ) q
        WHERE ${limitIn(
          sql`(SELECT value FROM queue_limits WHERE scope = 'tenant' AND name = q.tenant_id)`,
          settings.tenants,
          sql.ref('q.tenant_id'),
          settings.perTenant,
        )} > (SELECT coalesce(sum(n), 0) FROM used u WHERE u.tenant_id = q.tenant_id)
      ),
      -- Profiles and queues at their limit, once per claim (the few with slots or a limit).
      full_profiles AS (
        SELECT p.name FROM (
          SELECT backend_profile AS name FROM used
          UNION SELECT name FROM queue_limits WHERE scope = 'profile'
          UNION SELECT jsonb_object_keys(${JSON.stringify(settings.profiles)}::jsonb)
        ) p
        WHERE ${limitIn(
          sql`(SELECT value FROM queue_limits WHERE scope = 'profile' AND name = p.name)`,
          settings.profiles,
          sql.ref('p.name'),
          settings.perProfile,
        )} <= (SELECT coalesce(sum(n), 0) FROM used u WHERE u.backend_profile = p.name)
      ),
      full_queues AS (
        SELECT q.name FROM (
          SELECT queue AS name FROM used
          UNION SELECT queue FROM queue_settings WHERE max_running IS NOT NULL
          UNION SELECT jsonb_object_keys(${JSON.stringify(settings.queues)}::jsonb)
        ) q
        WHERE ${limitIn(
          sql`(SELECT max_running FROM queue_settings WHERE queue = q.name)`,
          settings.queues,
          sql.ref('q.name'),
          settings.perQueue,
        )} <= (SELECT coalesce(sum(n), 0) FROM used u WHERE u.queue = q.name)
      )
      SELECT cap.capacity_queues, cap.capacity_used, cap.capacity_paused, cap.capacity_stored,
        cap.capacity_rates, cap.room AS capacity_room, c.*
      FROM capacity cap, open_tenants ten
      CROSS JOIN LATERAL (
        SELECT t.* FROM queue_tasks t
        WHERE ${dueTask(sql.ref('t'))} AND t.tenant_id = ten.tenant_id
          -- Tasks that could not start anyway are passed over here, so they never fill a
          -- batch ahead of tasks that can: paused queues, full keys, profiles at their rate,
          -- full profiles and queues.
          AND t.queue NOT IN (SELECT queue FROM queue_settings WHERE paused)
          AND (t.concurrency_key IS NULL OR coalesce(t.concurrency_limit, 1) >
            (SELECT coalesce(sum(n), 0) FROM used u WHERE u.concurrency_key = t.concurrency_key))
          AND t.backend_profile NOT IN (SELECT profile FROM rates WHERE starts >= rate)
          AND t.backend_profile NOT IN (SELECT name FROM full_profiles)
          AND t.queue NOT IN (SELECT name FROM full_queues)
        ORDER BY t.priority DESC, t.enqueue_seq
        LIMIT cap.room
        FOR UPDATE OF t SKIP LOCKED
      ) c`.execute(trx);
    if (rows.rows.length === 0) return null;
    const { limits, use } = capacityOf(settings, rows.rows[0]!);
    const room = rows.rows[0]!.capacity_room;
    const tasks = rows.rows.map(
      ({
        capacity_queues: _queues,
        capacity_used: _used,
        capacity_paused: _paused,
        capacity_stored: _stored,
        capacity_rates: _rates,
        capacity_room: _room,
        ...task
      }) => task,
    );
    const byId = new Map(tasks.map((row) => [row.task_id, row]));
    const byTenant = new Map<string, Candidate[]>();
    for (const row of tasks) {
      const list = byTenant.get(row.tenant_id) ?? [];
      list.push({
        taskId: row.task_id,
        tenantId: row.tenant_id,
        backendProfile: row.backend_profile,
        queue: row.queue,
        concurrencyKey: row.concurrency_key,
        concurrencyLimit: row.concurrency_limit,
      });
      byTenant.set(row.tenant_id, list);
    }
    const picked: TaskRow[] = [];
    const fair = pickFair(byTenant, limits, use, room);
    for (const pick of fair) {
      const before = byId.get(pick.taskId)!;
      try {
        checkDispatchable(before, undefined);
      } catch {
        continue; // out of attempts: left queued for a person (the view says why)
      }
      picked.push(before);
    }
    if (picked.length === 0) return null;
    const made = await createAttempts(trx, picked);
    const claimed = made.map(({ task, attempt }, i) => ({ task, before: picked[i]!, attempt }));
    // Candidates held back by this batch's own picks (a key, tenant, profile or queue that the
    // batch filled) while room is left: the next claim, which sees them full, finds others.
    const more = fair.length < room && fair.length < tasks.length;
    return { claimed, written: await write(trx, claimed), more };
  });
}

/**
 * The limit in force for `name`: stored through the API, else configured by name, else the
 * configured default; no limit at all reads as the largest integer.
 */
const limitIn = (
  stored: RawBuilder<unknown>,
  configured: Record<string, number>,
  name: RawBuilder<unknown>,
  fallback: number | null,
) =>
  sql`coalesce(${stored}, (${JSON.stringify(configured)}::jsonb ->> ${name})::int, ${fallback}::int, 2147483647)`;

/** A queued task whose `runAfter`, if any, has come: what a claim may start. */
const dueTask = (t: RawBuilder<unknown>) =>
  sql`${t}.state = 'queued' AND (${t}.run_after IS NULL OR ${t}.run_after <= now())`;

/**
 * When a profile held back by its start rate next has room, for its queued tasks: the
 * scheduler wakes itself then. Null when no rate holds a queued task back.
 */
export async function nextRateFreeAt(db: Executor): Promise<Date | null> {
  const { rows } = await sql<{ at: Date | null }>`${PREPARED}
    SELECT min((
      SELECT a.created_at + interval '1 minute'
      FROM queue_attempts a JOIN queue_tasks t ON t.task_id = a.task_id
      WHERE a.created_at > now() - interval '1 minute' AND t.backend_profile = l.name
      ORDER BY a.created_at DESC OFFSET l.value - 1 LIMIT 1)) AS at
    FROM queue_limits l
    WHERE l.scope = 'profile-rate' AND EXISTS (
      SELECT 1 FROM queue_tasks q WHERE q.state = 'queued' AND q.backend_profile = l.name)`.execute(
    db,
  );
  return rows[0]?.at ? new Date(rows[0].at) : null;
}

/** Whether any queued task is due: the claim would find a candidate, capacity permitting. */
export async function anyReady(db: Executor): Promise<boolean> {
  const { rows } = await sql<{ ready: boolean }>`${PREPARED}
    SELECT EXISTS (SELECT 1 FROM queue_tasks t WHERE ${dueTask(sql.ref('t'))}) AS ready`.execute(
    db,
  );
  return rows[0]!.ready;
}

/**
 * Start a claimed attempt: the dispatch checks, then the session, run, turn and runner Job,
 * exactly as a manual dispatch does. A check that refuses (profile not ready, session busy)
 * puts the task back, attempt unspent, to be tried again after a backoff; a failure after the
 * attempt began is recorded by the dispatch code as the attempt's outcome.
 */
export async function startClaimed(
  ctx: Ctx,
  deps: QueueDeps,
  claimed: Claimed,
): Promise<DispatchResponse | null> {
  let prepared;
  try {
    prepared = await prepare(ctx, deps, claimed.task, {});
  } catch (error) {
    await release(ctx, claimed, error);
    return null;
  }
  try {
    return await launchAttempt(ctx, deps, claimed.task, claimed.attempt, prepared, {});
  } catch (error) {
    ctx.logger.warn(
      {
        taskId: claimed.task.task_id,
        attemptId: claimed.attempt.attempt_id,
        failureKind: isServiceError(error) ? error.failureKind : 'infra-failed',
      },
      'scheduled attempt failed to start',
    );
    return null;
  }
}

async function release(ctx: Ctx, claimed: Claimed, error: unknown): Promise<void> {
  const failureKind = isServiceError(error) ? error.failureKind : 'infra-failed';
  const message = ctx.redactor
    .redact(error instanceof Error ? error.message : String(error))
    .slice(0, 500);
  const { before, attempt } = claimed;
  const delay = backoffDelay(retryPolicyOf(before, ctx.config.scheduler), before.deferrals + 1);
  await ctx.db.transaction().execute(async (trx) => {
    await lockTask(trx, before.task_id);
    const removed = await trx
      .deleteFrom('queue_attempts')
      .where('attempt_id', '=', attempt.attempt_id)
      .where('state', '=', 'dispatched')
      .where('run_id', 'is', null)
      .executeTakeFirst();
    // A cancel got there first: the attempt is its record now.
    if (Number(removed.numDeletedRows) === 0) return;
    await changeTask(trx, before.task_id, {
      state: 'queued',
      attempt_count: before.attempt_count,
      latest_attempt_id: before.latest_attempt_id,
      session_id: before.session_id,
      deferrals: before.deferrals + 1,
      run_after: sql`now() + make_interval(secs => ${delay / 1000})`,
      last_refusal: JSON.stringify({ failureKind, message, at: new Date().toISOString() }),
    });
  });
  ctx.logger.info(
    { taskId: before.task_id, failureKind, retryInMs: delay },
    'scheduler deferred a task it could not start',
  );
}
