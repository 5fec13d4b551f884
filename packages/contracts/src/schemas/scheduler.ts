import { Type, type Static } from '@sinclair/typebox';
import { FAILURE_KIND_NAMES, type FailureKind } from '../failure-kinds.js';
import { Nullable, StringEnum, Timestamp } from './common.js';

/**
 * The automatic scheduler (spec/3's later stage): how a task is retried, which judge reviews
 * its attempts, and what the scheduler read shows (capacity in use, backlog, next wake-up).
 */

/**
 * Failure kinds retried by default: infrastructure, provider availability, a lost runner (its
 * command expired, or the agent process died). Schema, policy, auth and prompt kinds are never
 * retried by default: the same input would fail the same way.
 */
export const DEFAULT_RETRYABLE_KINDS = [
  'infra-failed',
  'provider-unavailable',
  'command-expired',
  'backend-failed',
] as const satisfies readonly FailureKind[];

/** Kinds a task may never ask to retry: retrying them repeats the same refusal. */
export const NEVER_RETRYABLE_KINDS = [
  'schema-invalid',
  'tenant-policy-denied',
  'provider-auth-failed',
  'auth-failed',
  'secret-unavailable',
  'prompt-unavailable',
  'prompt-too-large',
  'required-skill-unavailable',
  'cancelled',
] as const satisfies readonly FailureKind[];

export const TaskRetryPolicy = Type.Object(
  {
    /** First retry waits about this long; each further retry doubles it (jitter ±20%). */
    backoffMs: Type.Optional(Type.Integer({ minimum: 0, maximum: 3_600_000 })),
    /** Upper bound of one wait. */
    maxBackoffMs: Type.Optional(Type.Integer({ minimum: 0, maximum: 86_400_000 })),
    /** Failure kinds retried (default DEFAULT_RETRYABLE_KINDS). */
    retryOn: Type.Optional(Type.Array(StringEnum(FAILURE_KIND_NAMES), { maxItems: 16 })),
  },
  { additionalProperties: false },
);
export type TaskRetryPolicy = Static<typeof TaskRetryPolicy>;

/** A judge: a real agent turn over an attempt's result, answering pass or fail. */
export const JudgeSpec = Type.Object(
  {
    prompt: Type.String({ minLength: 1, maxLength: 16 * 1024, pattern: '^[^\\u0000]*$' }),
    backendProfile: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);
export type JudgeSpec = Static<typeof JudgeSpec>;

/**
 * Why a task waits. Known reasons (a later version may add more; clients show an unknown
 * reason with its message):
 * - `capacity`: a limit (global, tenant, profile, queue) is reached; `limit` names it and its use;
 * - `concurrency-key`: its concurrency key holds its limit of open attempts; `limit` names the
 *   key (scope `concurrency-key`), the task's limit and the slots in use;
 * - `profile-rate`: its provider profile started its rate of attempts over the last minute;
 *   `limit` names the profile (scope `profile-rate`), the rate and the starts; `until` is when
 *   it can start;
 * - `queue-paused`: its queue is paused (`queue resume` lets it start);
 * - `backoff`: a retry (or a start the scheduler could not make) waits until `until`;
 * - `run-after`: the task's `runAfter` (`until`) has not come;
 * - `blocked`: it cannot start without a person (all attempts used);
 * - `session-busy`: its session serves another turn;
 * - `dispatching`: ready, the scheduler starts it on its next pass;
 * - `scheduler-off`: ready, but this manager's scheduler is off: `queue dispatch` starts it;
 * - `waiting-runner`: dispatched, its runner has not taken the turn yet.
 */
export const WAITING_REASONS = [
  'capacity',
  'concurrency-key',
  'profile-rate',
  'queue-paused',
  'backoff',
  'run-after',
  'blocked',
  'session-busy',
  'dispatching',
  'scheduler-off',
  'waiting-runner',
] as const;
export type WaitingReason = (typeof WAITING_REASONS)[number];
export const CAPACITY_SCOPES = [
  'global',
  'tenant',
  'profile',
  'queue',
  'concurrency-key',
  'profile-rate',
] as const;

export const TaskWaiting = Type.Object({
  reason: Type.String({
    description: `why the task waits: ${WAITING_REASONS.join(', ')} (open: later versions may add reasons)`,
  }),
  message: Type.String(),
  /** When the wait ends by itself (backoff, runAfter, profile rate); null when it ends on an event. */
  until: Nullable(Timestamp),
  /**
   * The limit it waits on, with its current use (reasons `capacity`, `concurrency-key`,
   * `profile-rate`).
   */
  limit: Nullable(
    Type.Object({
      scope: StringEnum(CAPACITY_SCOPES),
      /** The tenant, profile, queue or concurrency key; null for the global limit. */
      key: Nullable(Type.String()),
      limit: Type.Integer(),
      used: Type.Integer(),
    }),
  ),
});
export type TaskWaiting = Static<typeof TaskWaiting>;

/** How the scheduler sees a task (shown with the task). */
export const TaskScheduling = Type.Object({
  runAfter: Nullable(Timestamp),
  retryPolicy: Type.Object({
    backoffMs: Type.Integer(),
    maxBackoffMs: Type.Integer(),
    retryOn: Type.Array(Type.String()),
  }),
  judge: Nullable(Type.Object({ prompt: Type.String(), backendProfile: Type.String() })),
  retryNote: Nullable(Type.String()),
  deferrals: Type.Integer(),
  lastRefusal: Nullable(
    Type.Object({ failureKind: Type.String(), message: Type.String(), at: Timestamp }),
  ),
});
export type TaskScheduling = Static<typeof TaskScheduling>;

const Counts = Type.Record(Type.String(), Type.Integer());

/** Where a limit in force comes from: configuration (the default) or `PUT /queue/limits`. */
export const LimitSource = StringEnum(['configured', 'stored'] as const);
const Sources = Type.Record(Type.String(), LimitSource);

/** The capacity limits in force (configuration, overridden by limits set at run time). */
export const SchedulerLimits = Type.Object({
  global: Type.Integer(),
  perTenant: Nullable(Type.Integer()),
  tenants: Counts,
  perProfile: Nullable(Type.Integer()),
  profiles: Counts,
  perQueue: Nullable(Type.Integer()),
  queues: Counts,
  /** Attempt starts allowed per minute, per provider profile (set at run time only). */
  profileRates: Counts,
  /** Where each limit comes from. */
  sources: Type.Object({ global: LimitSource, tenants: Sources, profiles: Sources }),
});
export type SchedulerLimits = Static<typeof SchedulerLimits>;

export const SchedulerView = Type.Object({
  enabled: Type.Boolean(),
  instanceId: Type.String(),
  generatedAt: Timestamp,
  limits: SchedulerLimits,
  inUse: Type.Object({
    global: Type.Integer(),
    byTenant: Counts,
    byProfile: Counts,
    byQueue: Counts,
    /** Slots held per concurrency key. */
    byKey: Counts,
  }),
  /** Queues with settings stored (`PUT /queue/queues/:queue/settings`): limit and pause. */
  queues: Type.Array(
    Type.Object({
      queue: Type.String(),
      maxRunning: Nullable(Type.Integer()),
      paused: Type.Boolean(),
    }),
  ),
  /** Per profile with a start rate: the rate, starts over the last minute, the next free start. */
  rates: Type.Array(
    Type.Object({
      profile: Type.String(),
      perMinute: Type.Integer(),
      startsLastMinute: Type.Integer(),
      nextStartAt: Nullable(Timestamp),
    }),
  ),
  backlog: Type.Array(
    Type.Object({
      tenantId: Type.String(),
      queue: Type.String(),
      ready: Type.Integer(),
      waiting: Type.Integer(),
      nextRunAfter: Nullable(Timestamp),
    }),
  ),
  judges: Type.Object({ open: Type.Integer() }),
  replacements: Type.Object({ pending: Type.Integer(), maxPerRun: Type.Integer() }),
  lastPassAt: Nullable(Timestamp),
  nextWakeAt: Nullable(Timestamp),
  scanIntervalMs: Type.Integer(),
});
export type SchedulerView = Static<typeof SchedulerView>;

/** A queue's settings: a field left out keeps its stored value. */
export const QueueSettingsBody = Type.Object(
  {
    maxRunning: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: 100_000 }))),
    /** A paused queue dispatches nothing, by the scheduler or by hand. */
    paused: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type QueueSettingsBody = Static<typeof QueueSettingsBody>;

export const QueueSettings = Type.Object({
  queue: Type.String(),
  maxRunning: Nullable(Type.Integer()),
  paused: Type.Boolean(),
  updatedAt: Timestamp,
});
export type QueueSettings = Static<typeof QueueSettings>;

/** A tenant or provider profile name in a limits map. */
const LimitName = Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$' });
const LimitMap = (value: ReturnType<typeof Type.Integer>) =>
  Type.Record(LimitName, Nullable(value), { maxProperties: 200, additionalProperties: false });
export const MAX_LIMIT = 100_000;
export const MAX_PROFILE_RATE = 10_000;

/**
 * Limits set at run time, stored in the database and used by every replica's next pass. A
 * field left out keeps what is stored; null removes a stored value (back to configuration).
 */
export const QueueLimitsBody = Type.Object(
  {
    global: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: MAX_LIMIT }))),
    tenants: Type.Optional(LimitMap(Type.Integer({ minimum: 0, maximum: MAX_LIMIT }))),
    profiles: Type.Optional(LimitMap(Type.Integer({ minimum: 0, maximum: MAX_LIMIT }))),
    /** Attempt starts per minute per provider profile (a rate of 0 would be a pause: refused). */
    profileRates: Type.Optional(LimitMap(Type.Integer({ minimum: 1, maximum: MAX_PROFILE_RATE }))),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type QueueLimitsBody = Static<typeof QueueLimitsBody>;
