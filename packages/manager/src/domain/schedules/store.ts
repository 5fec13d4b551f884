import {
  newId,
  QUEUE_PAGE_DEFAULT,
  ServiceError,
  type Schedule,
  type ScheduleCreateBody,
  type ScheduleListQuery,
  type SchedulePage,
} from '@svc/contracts';
import type { Selectable } from 'kysely';
import { iso, isoRequired, json } from '../../store/json.js';
import type { Executor } from '../../store/runs.js';
import type { QueueSchedulesTable } from '../../store/schema.js';
import { QUEUE_WAKE_KEY } from '../../store/wakeups.js';
import type { Ctx } from '../context.js';
import { submitTask } from '../queue/submit.js';
import { checkCron, checkTimezone, nextTick } from './cron.js';

export type ScheduleRow = Selectable<QueueSchedulesTable>;

export function toSchedule(row: ScheduleRow): Schedule {
  return {
    scheduleId: row.schedule_id,
    name: row.name,
    cron: row.cron,
    timezone: row.timezone,
    tenantId: row.tenant_id,
    queue: row.queue,
    nextRunAt: isoRequired(row.next_run_at),
    lastRunAt: iso(row.last_run_at),
    lastTaskId: row.last_task_id,
    firedCount: row.fired_count,
    lastError:
      row.last_error && row.last_error_at
        ? { message: row.last_error, at: isoRequired(row.last_error_at) }
        : null,
    task: row.template,
    createdAt: isoRequired(row.created_at),
  };
}

/**
 * Store a schedule. The cron expression and zone are checked first, then the template passes
 * every check of `POST /queue/tasks` as a dry run of that same path (which stores nothing): a
 * template the submit would refuse is refused here, before anything is written.
 */
export async function createSchedule(ctx: Ctx, body: ScheduleCreateBody): Promise<Schedule> {
  const timezone = checkTimezone(body.timezone ?? 'UTC');
  const cron = checkCron(body.cron, timezone);
  await submitTask(ctx, { ...body.task, dryRun: true });
  const row = await ctx.db
    .insertInto('queue_schedules')
    .values({
      schedule_id: newId('sch'),
      name: body.name ?? null,
      cron,
      timezone,
      tenant_id: body.task.tenantId,
      queue: body.task.queue,
      template: json(body.task),
      next_run_at: nextTick(cron, timezone, new Date()),
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  // Every replica's scheduler plans its next wake-up again, now with this schedule's tick.
  await ctx.wakeups.publish(QUEUE_WAKE_KEY);
  return toSchedule(row);
}

export async function getSchedule(db: Executor, scheduleId: string): Promise<Schedule> {
  const row = await db
    .selectFrom('queue_schedules')
    .selectAll()
    .where('schedule_id', '=', scheduleId)
    .executeTakeFirst();
  if (!row) throw new ServiceError('not-found', `schedule ${scheduleId} not found`);
  return toSchedule(row);
}

/** Oldest first; the cursor is the last schedule id of a page (ids sort by creation). */
export async function listSchedules(db: Executor, query: ScheduleListQuery): Promise<SchedulePage> {
  const limit = query.limit ?? QUEUE_PAGE_DEFAULT;
  let select = db
    .selectFrom('queue_schedules')
    .selectAll()
    .orderBy('schedule_id')
    .limit(limit + 1);
  if (query.cursor) select = select.where('schedule_id', '>', query.cursor);
  const rows = await select.execute();
  const page = rows.slice(0, limit);
  return {
    schedules: page.map(toSchedule),
    nextCursor: rows.length > limit ? page[page.length - 1]!.schedule_id : null,
  };
}

/**
 * Delete a schedule: it fires no more. A tick being fired holds the row's lock, so the delete
 * waits for that commit and the tick's task stands; no tick fires after the delete.
 */
export async function deleteSchedule(ctx: Ctx, scheduleId: string): Promise<Schedule> {
  const row = await ctx.db
    .deleteFrom('queue_schedules')
    .where('schedule_id', '=', scheduleId)
    .returningAll()
    .executeTakeFirst();
  if (!row) throw new ServiceError('not-found', `schedule ${scheduleId} not found`);
  return toSchedule(row);
}

/** The earliest tick of any schedule (the schedulers sleep until it). */
export async function nextScheduleAt(db: Executor): Promise<Date | null> {
  const row = await db
    .selectFrom('queue_schedules')
    .select((eb) => eb.fn.min('next_run_at').as('due'))
    .executeTakeFirst();
  return row?.due ? new Date(row.due) : null;
}
