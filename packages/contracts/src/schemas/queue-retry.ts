import { Type, type Static } from '@sinclair/typebox';
import { FAILURE_KIND_NAMES } from '../failure-kinds.js';
import { StringEnum, Text } from './common.js';
import { QueueName, ReaderIdText, RETRYABLE_TASK_STATES, TaskSummary } from './queue.js';

/**
 * Retry of failed work: a task that ended failed, blocked or cancelled goes back to `queued`
 * with a fresh attempt budget (its maxAttempts counts again from the retry). Earlier attempts
 * stay, and attempt numbers keep increasing.
 */
export const RETRY_BULK_DEFAULT = 100;
export const RETRY_BULK_MAX = 500;

const RetryWho = {
  /** Who asked for the retry (kept in the task's retry history); the caller's kind if absent. */
  by: Type.Optional(ReaderIdText),
  reason: Type.Optional(Text(1000, 0)),
};

export const TaskRetryBody = Type.Object(
  {
    ...RetryWho,
    /** Answer the plan (the state it would leave, the budget it would get); change nothing. */
    dryRun: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type TaskRetryBody = Static<typeof TaskRetryBody>;

const RetryState = StringEnum(RETRYABLE_TASK_STATES);

export const TaskRetryBulkBody = Type.Object(
  {
    queue: Type.Optional(QueueName),
    /** One state or a list of them (default `failed`). */
    state: Type.Optional(
      Type.Union([RetryState, Type.Array(RetryState, { minItems: 1, maxItems: 3 })]),
    ),
    /** The failure kind of the task's latest attempt. */
    failureKind: Type.Optional(StringEnum(FAILURE_KIND_NAMES)),
    /** Only tasks whose last change came after this time. */
    updatedAfter: Type.Optional(Type.String({ format: 'date-time', maxLength: 40 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: RETRY_BULK_MAX })),
    /** Answer the tasks that would be retried; change nothing. */
    dryRun: Type.Optional(Type.Boolean()),
    ...RetryWho,
  },
  { additionalProperties: false },
);
export type TaskRetryBulkBody = Static<typeof TaskRetryBulkBody>;

export const TaskRetryBulkResponse = Type.Object({
  /** The tasks retried (as requeued), or with dryRun the ones that would be (as they are). */
  tasks: Type.Array(TaskSummary),
  dryRun: Type.Boolean(),
  /** Whether anything was written: false with dryRun (the rule of every queue dry run). */
  mutation: Type.Boolean(),
  /** More tasks matched than the limit: run it again for the next ones. */
  more: Type.Boolean(),
  limit: Type.Integer(),
});
export type TaskRetryBulkResponse = Static<typeof TaskRetryBulkResponse>;
