import { Type, type Static } from '@sinclair/typebox';
import { Id, Nullable, Text, Timestamp } from './common.js';
import { QUEUE_PAGE_MAX, TaskSubmitBody } from './queue.js';

/**
 * Recurring schedules: a task template submitted on every tick of a 5-field cron expression
 * (minute hour day-of-month month day-of-week) in an IANA time zone. Each tick makes one
 * ordinary queue task, whichever replica fires it.
 */

/**
 * The task each tick submits: a submission body without `taskId` (every tick is a new task)
 * and `dryRun`, checked at create time exactly as `POST /queue/tasks` checks a submission.
 */
export const ScheduleTaskTemplate = Type.Omit(TaskSubmitBody, ['taskId', 'dryRun'], {
  additionalProperties: false,
});
export type ScheduleTaskTemplate = Static<typeof ScheduleTaskTemplate>;

export const ScheduleCreateBody = Type.Object(
  {
    /** Five fields: minute hour day-of-month month day-of-week (no seconds field). */
    cron: Type.String({ minLength: 1, maxLength: 200, pattern: '^[^\\u0000]*$' }),
    /** An IANA zone name (`Europe/Berlin`); UTC when absent. */
    timezone: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    name: Type.Optional(Text(200)),
    task: ScheduleTaskTemplate,
  },
  { additionalProperties: false },
);
export type ScheduleCreateBody = Static<typeof ScheduleCreateBody>;

export const Schedule = Type.Object({
  scheduleId: Type.String(),
  name: Nullable(Type.String()),
  cron: Type.String(),
  timezone: Type.String(),
  tenantId: Type.String(),
  queue: Type.String(),
  /** The next tick this schedule fires (a tick missed while no manager ran fires once, now). */
  nextRunAt: Timestamp,
  /** The tick of the last task it created, and that task. */
  lastRunAt: Nullable(Timestamp),
  lastTaskId: Nullable(Type.String()),
  firedCount: Type.Integer(),
  /** Why a tick made no task (the template was refused when it fired), and when; else null. */
  lastError: Nullable(Type.Object({ message: Type.String(), at: Timestamp })),
  task: Type.Record(Type.String(), Type.Unknown()),
  createdAt: Timestamp,
});
export type Schedule = Static<typeof Schedule>;

export const ScheduleListQuery = Type.Object(
  {
    cursor: Type.Optional(Id),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: QUEUE_PAGE_MAX })),
  },
  { additionalProperties: false },
);
export type ScheduleListQuery = Static<typeof ScheduleListQuery>;

export const SchedulePage = Type.Object({
  schedules: Type.Array(Schedule),
  nextCursor: Nullable(Type.String()),
});
export type SchedulePage = Static<typeof SchedulePage>;
