import { Type, type Static } from '@sinclair/typebox';
import { Id, JsonObject, Nullable, SAFE_INT_MAX, StringEnum, Text, Timestamp } from './common.js';
import { ExecutionPolicyInput, ResourceBundleRef, SessionRef, WorkspaceRef } from './runs.js';
import { RunnerJobCreateBody, WorkReadySummary } from './runner-jobs.js';
import { JudgeSpec, TaskRetryPolicy, TaskScheduling, TaskWaiting } from './scheduler.js';
import { Supervisor } from './sessions.js';

/**
 * The task queue (spec/3): tasks wait here until a manual dispatch turns one into an attempt
 * (a session, a run, a turn command and a runner Job). Views are read from the queue's own
 * rows; output and trace stay behind the session endpoints.
 */
export const TASK_STATES = [
  'queued',
  'dispatched',
  'running',
  'completed',
  'failed',
  'blocked',
  'cancelled',
] as const;
export type TaskState = (typeof TASK_STATES)[number];
/** A task in one of these states accepts no further dispatch. */
export const FINAL_TASK_STATES: readonly TaskState[] = ['completed', 'cancelled'];
/** A task in one of these states may be retried: requeued with a fresh attempt budget. */
export const RETRYABLE_TASK_STATES = ['failed', 'blocked', 'cancelled'] as const;
export type RetryableTaskState = (typeof RETRYABLE_TASK_STATES)[number];

export const ATTEMPT_STATES = [
  'dispatched',
  'running',
  'completed',
  'failed',
  'blocked',
  'cancelled',
] as const;
export type AttemptState = (typeof ATTEMPT_STATES)[number];
export const OPEN_ATTEMPT_STATES: readonly AttemptState[] = ['dispatched', 'running'];

export const QUEUE_PAGE_DEFAULT = 50;
export const QUEUE_PAGE_MAX = 200;
export const DEFAULT_MAX_ATTEMPTS = 3;
export const MAX_ATTEMPTS_LIMIT = 20;
/** Attempts a task view lists (manual dispatches and recoveries may add to maxAttempts). */
export const TASK_ATTEMPTS_SHOWN = 100;
export const TASK_REFERENCE_KINDS = [
  'issue',
  'pr',
  'repository',
  'commit',
  'document',
  'other',
] as const;
export const READER_KINDS = ['user', 'agent', 'client'] as const;

export const QueueName = Type.String({ pattern: '^[a-z0-9][a-z0-9._-]{0,63}$' });
export const ReaderIdText = Type.String({
  minLength: 1,
  maxLength: 128,
  pattern: '^[A-Za-z0-9._:@-]+$',
});

/** A concurrency key: any text without control characters, at most 200 characters. */
export const CONCURRENCY_KEY_MAX = 200;
export const ConcurrencyKey = Type.String({
  minLength: 1,
  maxLength: CONCURRENCY_KEY_MAX,
  pattern: '^[^\\u0000-\\u001f\\u007f]+$',
});

export const TaskReference = Type.Object(
  {
    kind: StringEnum(TASK_REFERENCE_KINDS),
    ref: Text(1024),
    url: Type.Optional(Text(2048)),
    title: Type.Optional(Text(200)),
  },
  { additionalProperties: false },
);
export type TaskReference = Static<typeof TaskReference>;

/** `payload.prompt` is the task text; other payload fields travel with the turn command. */
export const TaskPayload = Type.Object(
  { prompt: Type.String({ minLength: 1, maxLength: 256 * 1024, pattern: '^[^\\u0000]*$' }) },
  { additionalProperties: true },
);

export const TaskSubmitBody = Type.Object(
  {
    /** Optional client-chosen id: resubmitting the same task returns it (idempotent). */
    taskId: Type.Optional(Id),
    tenantId: Text(128),
    projectId: Text(128),
    queue: QueueName,
    lane: Type.Optional(QueueName),
    title: Text(200),
    priority: Type.Optional(Type.Integer({ minimum: -1000, maximum: 1000 })),
    backendProfile: Type.Optional(Type.String({ maxLength: 200 })),
    providerId: Type.Optional(Type.String({ pattern: '^[a-z0-9][a-z0-9._-]{0,63}$' })),
    workspaceRef: Type.Optional(WorkspaceRef),
    resourceBundleRef: Type.Optional(Nullable(ResourceBundleRef)),
    sessionRef: Type.Optional(Nullable(SessionRef)),
    executionPolicy: Type.Optional(ExecutionPolicyInput),
    payload: TaskPayload,
    summary: Type.Optional(Text(1000, 0)),
    metadata: Type.Optional(Type.Record(Type.String({ maxLength: 128 }), Type.Unknown())),
    maxAttempts: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_ATTEMPTS_LIMIT })),
    references: Type.Optional(Type.Array(TaskReference, { maxItems: 32 })),
    /** Not started before this time (the scheduler waits; a manual dispatch does not). */
    runAfter: Type.Optional(Type.String({ format: 'date-time', maxLength: 40 })),
    retryPolicy: Type.Optional(TaskRetryPolicy),
    judge: Type.Optional(JudgeSpec),
    /** Tasks sharing a key run at most `concurrencyLimit` attempts at once, across replicas. */
    concurrencyKey: Type.Optional(ConcurrencyKey),
    /** Open attempts allowed per key (default 1); needs `concurrencyKey`. */
    concurrencyLimit: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000 })),
    dryRun: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type TaskSubmitBody = Static<typeof TaskSubmitBody>;

/** The attempt record with its summary (outcome, runner identity, duration, output reference). */
export const Attempt = Type.Object({
  attemptId: Type.String(),
  taskId: Type.String(),
  retryIndex: Type.Integer(),
  state: StringEnum(ATTEMPT_STATES),
  runId: Nullable(Type.String()),
  commandId: Nullable(Type.String()),
  runnerJobId: Nullable(Type.String()),
  sessionId: Nullable(Type.String()),
  sessionPath: Nullable(Type.String()),
  /** `bootstrapped`: a new session made for this attempt (never a resume); else the task's own. */
  sessionOrigin: Nullable(StringEnum(['task-session-ref', 'bootstrapped'] as const)),
  thread: Nullable(StringEnum(['start', 'resume'] as const)),
  terminalStatus: Nullable(Type.String()),
  failureKind: Nullable(Type.String()),
  message: Nullable(Type.String()),
  runner: Type.Object({
    runnerId: Nullable(Type.String()),
    jobName: Nullable(Type.String()),
    phase: Nullable(Type.String()),
  }),
  durationMs: Nullable(Type.Integer()),
  eventCount: Nullable(Type.Integer()),
  lastEventSeq: Nullable(Type.Integer()),
  /** Where the output lives (references only, never the output itself). */
  outputRef: Nullable(Type.Object({ result: Type.String(), output: Type.String() })),
  /** Snapshot taken when dispatch or refresh last ran; never read from a trace by the views. */
  supervisor: Nullable(Supervisor),
  supervisorAt: Nullable(Timestamp),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  startedAt: Nullable(Timestamp),
  terminalAt: Nullable(Timestamp),
});
export type Attempt = Static<typeof Attempt>;

const Counters = Type.Object({
  attempts: Type.Integer(),
  failed: Type.Integer(),
  blocked: Type.Integer(),
  /** Times the task was retried (requeued with a fresh budget). */
  retries: Type.Integer(),
  /** Attempts since the last retry: the ones that count against maxAttempts. */
  sinceRetry: Type.Integer(),
});

const ReaderState = Type.Object({
  readerId: Type.String(),
  readVersion: Nullable(Type.Integer()),
  unread: Type.Boolean(),
});

const summaryFields = {
  taskId: Type.String(),
  queue: Type.String(),
  lane: Type.String(),
  title: Type.String(),
  priority: Type.Integer(),
  state: StringEnum(TASK_STATES),
  backendProfile: Type.String(),
  summary: Nullable(Type.String()),
  maxAttempts: Type.Integer(),
  /** The task's concurrency key and its limit (null: none). */
  concurrencyKey: Nullable(Type.String()),
  concurrencyLimit: Nullable(Type.Integer()),
  counters: Counters,
  sessionId: Nullable(Type.String()),
  sessionPath: Nullable(Type.String()),
  latestAttempt: Nullable(Attempt),
  /** Why the task waits, when it does (queued, dispatched, or failed with a retry coming). */
  waiting: Nullable(TaskWaiting),
  /**
   * The command to run next: never a dispatch the scheduler will make itself or would refuse
   * (capacity, a busy session); a waiting task points at `queue show`.
   */
  next: Nullable(Type.String()),
  version: Type.Integer(),
  changeSeq: Type.Integer(),
  updatedAt: Timestamp,
  createdAt: Timestamp,
  /** Position token: pass as `cursor` to continue after this task. */
  cursor: Type.String(),
  reader: Type.Optional(Nullable(ReaderState)),
};

/** Inputs shown by `view=full` listings and always by the task view. */
const inputFields = {
  payload: JsonObject,
  workspaceRef: JsonObject,
  resourceBundleRef: Nullable(JsonObject),
  metadata: JsonObject,
};

export const TaskSummary = Type.Object({
  ...summaryFields,
  payload: Type.Optional(inputFields.payload),
  workspaceRef: Type.Optional(inputFields.workspaceRef),
  resourceBundleRef: Type.Optional(inputFields.resourceBundleRef),
  metadata: Type.Optional(inputFields.metadata),
});
export type TaskSummary = Static<typeof TaskSummary>;

/** A judge's review of one attempt: a real agent turn whose verdict may retry the task. */
export const JudgeRun = Type.Object({
  judgeRunId: Type.String(),
  attemptId: Nullable(Type.String()),
  state: StringEnum(['requested', 'completed', 'failed'] as const),
  verdict: Nullable(StringEnum(['pass', 'fail'] as const)),
  request: JsonObject,
  result: Nullable(JsonObject),
  failureKind: Nullable(Type.String()),
  retrySuggestion: Nullable(Type.String()),
  backendProfile: Nullable(Type.String()),
  sessionId: Nullable(Type.String()),
  runId: Nullable(Type.String()),
  commandId: Nullable(Type.String()),
  createdAt: Timestamp,
  terminalAt: Nullable(Timestamp),
});
export type JudgeRun = Static<typeof JudgeRun>;

export const JudgeRunList = Type.Object({
  taskId: Type.String(),
  judgeRuns: Type.Array(JudgeRun),
});
export type JudgeRunList = Static<typeof JudgeRunList>;

/** One retry in a task's history. */
export const TaskRetry = Type.Object({
  retryId: Type.String(),
  at: Timestamp,
  by: Type.String(),
  reason: Nullable(Type.String()),
  /** The state the task left. */
  fromState: StringEnum(RETRYABLE_TASK_STATES),
  /** The failure kind of its latest attempt then (null when it had none). */
  failureKind: Nullable(Type.String()),
  /** Attempts made before the retry; attempts from here count against maxAttempts. */
  attemptsBefore: Type.Integer(),
  /** Part of a bulk retry. */
  bulk: Type.Boolean(),
});
export type TaskRetry = Static<typeof TaskRetry>;

export const Task = Type.Object({
  ...summaryFields,
  ...inputFields,
  tenantId: Type.String(),
  projectId: Type.String(),
  providerId: Type.String(),
  sessionRef: Nullable(SessionRef),
  executionPolicy: Nullable(JsonObject),
  references: Type.Array(TaskReference),
  judgeRuns: Type.Array(JudgeRun),
  /** Every attempt, oldest first (the newest TASK_ATTEMPTS_SHOWN when there are more). */
  attempts: Type.Array(Attempt),
  /** Every retry a person asked for, oldest first. */
  retries: Type.Array(TaskRetry),
  scheduling: TaskScheduling,
  cancelReason: Nullable(Type.String()),
  terminalAt: Nullable(Timestamp),
  /** The recurring schedule that submitted this task, and its tick; null when submitted. */
  schedule: Nullable(Type.Object({ scheduleId: Type.String(), tick: Timestamp })),
  valuesPrinted: Type.Literal(false),
});
export type Task = Static<typeof Task>;

export const TaskListQuery = Type.Object(
  {
    queue: Type.Optional(QueueName),
    state: Type.Optional(StringEnum(TASK_STATES)),
    cursor: Type.Optional(Type.String({ maxLength: 400, pattern: '^[A-Za-z0-9_-]+$' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: QUEUE_PAGE_MAX })),
    /** A changeSeq watermark: only tasks changed after it, in changeSeq order. */
    updatedAfter: Type.Optional(Type.Integer({ minimum: 0, maximum: SAFE_INT_MAX })),
    view: Type.Optional(StringEnum(['summary', 'full'] as const)),
  },
  { additionalProperties: false },
);
export type TaskListQuery = Static<typeof TaskListQuery>;

export const TaskPage = Type.Object({
  tasks: Type.Array(TaskSummary),
  order: StringEnum(['priority', 'changeSeq'] as const),
  nextCursor: Nullable(Type.String()),
  /** The watermark to pass as `updatedAfter` next time (changeSeq order only). */
  nextUpdatedAfter: Nullable(Type.Integer()),
  /** The queue-wide changeSeq when the page was read. */
  changeSeq: Type.Integer(),
});
export type TaskPage = Static<typeof TaskPage>;

export const TaskCancelBody = Type.Object(
  { reason: Type.Optional(Text(1000, 0)), dryRun: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);
export type TaskCancelBody = Static<typeof TaskCancelBody>;

export const TaskReadBody = Type.Object(
  {
    readerId: ReaderIdText,
    readerKind: Type.Optional(StringEnum(READER_KINDS)),
    dryRun: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type TaskReadBody = Static<typeof TaskReadBody>;

export const ReadCursor = Type.Object({
  taskId: Type.String(),
  queue: Type.String(),
  readerId: Type.String(),
  readerKind: Type.String(),
  readVersion: Type.Integer(),
  readChangeSeq: Type.Integer(),
  readAt: Timestamp,
  unread: Type.Boolean(),
});
export type ReadCursor = Static<typeof ReadCursor>;

export const DispatchBody = Type.Object(
  {
    /** Names the attempt; a repeated dispatch with the same id returns that attempt. */
    attemptId: Type.Optional(Id),
    runnerJob: Type.Optional(
      Type.Omit(RunnerJobCreateBody, ['commandId', 'dryRun', 'attemptId', 'idempotencyKey']),
    ),
    dryRun: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type DispatchBody = Static<typeof DispatchBody>;

export const DispatchResponse = Type.Object({
  taskId: Type.String(),
  created: Type.Boolean(),
  attempt: Attempt,
  run: Nullable(Type.Object({ runId: Type.String(), state: Type.String() })),
  command: Nullable(
    Type.Object({ commandId: Type.String(), type: Type.String(), state: Type.String() }),
  ),
  runnerJob: Nullable(
    Type.Object({
      runnerJobId: Type.String(),
      attemptId: Type.String(),
      jobName: Type.String(),
      phase: Type.String(),
    }),
  ),
  session: Type.Object({
    sessionId: Type.String(),
    sessionPath: Type.String(),
    origin: StringEnum(['task-session-ref', 'bootstrapped'] as const),
    thread: Nullable(StringEnum(['start', 'resume'] as const)),
  }),
  sessionPath: Type.String(),
  workReady: Nullable(WorkReadySummary),
  dryRun: Type.Literal(false),
  mutation: Type.Boolean(),
  valuesPrinted: Type.Literal(false),
});
export type DispatchResponse = Static<typeof DispatchResponse>;

export const RefreshBody = Type.Object(
  { dryRun: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);
export type RefreshBody = Static<typeof RefreshBody>;

/** What a dry run of any queue mutation answers: the plan, and nothing written. */
export const QueuePlan = Type.Object({
  action: StringEnum(['submit', 'cancel', 'read', 'dispatch', 'refresh', 'retry'] as const),
  taskId: Nullable(Type.String()),
  dryRun: Type.Literal(true),
  mutation: Type.Literal(false),
  plan: JsonObject,
  valuesPrinted: Type.Literal(false),
});
export type QueuePlan = Static<typeof QueuePlan>;

export const QueueFilterQuery = Type.Object(
  { queue: Type.Optional(QueueName) },
  { additionalProperties: false },
);

const ByState = Type.Record(Type.String(), Type.Integer());

export const QueueStats = Type.Object({
  queue: Nullable(Type.String()),
  /** Paused queues (of this one, when asked for one queue). */
  paused: Type.Array(Type.String()),
  changeSeq: Type.Integer(),
  generatedAt: Timestamp,
  tasks: Type.Object({ total: Type.Integer(), byState: ByState }),
  groups: Type.Array(
    Type.Object({
      queue: Type.String(),
      lane: Type.String(),
      state: Type.String(),
      backendProfile: Type.String(),
      count: Type.Integer(),
    }),
  ),
  groupsTruncated: Type.Boolean(),
  attempts: Type.Object({
    total: Type.Integer(),
    byState: ByState,
    byFailureKind: ByState,
    retries: Type.Integer(),
  }),
});
export type QueueStats = Static<typeof QueueStats>;

export const CommanderQuery = Type.Object(
  {
    queue: Type.Optional(QueueName),
    readerId: Type.Optional(ReaderIdText),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: QUEUE_PAGE_MAX })),
    view: Type.Optional(StringEnum(['summary', 'full'] as const)),
  },
  { additionalProperties: false },
);
export type CommanderQuery = Static<typeof CommanderQuery>;

export const COMMANDER_REASONS = [
  'failed',
  'blocked',
  'running',
  'dispatched',
  'unread',
  'queued',
] as const;

export const Commander = Type.Object({
  queue: Nullable(Type.String()),
  readerId: Nullable(Type.String()),
  changeSeq: Type.Integer(),
  generatedAt: Timestamp,
  stats: Type.Object({ total: Type.Integer(), byState: ByState }),
  /** Paused queues (of this one, when asked for one queue): their tasks wait for `queue resume`. */
  paused: Type.Array(Type.String()),
  unread: Nullable(Type.Integer()),
  items: Type.Array(Type.Object({ reason: StringEnum(COMMANDER_REASONS), task: TaskSummary })),
  truncated: Type.Boolean(),
  /** Suggested next commands, most urgent first. */
  next: Type.Array(Type.String()),
});
export type Commander = Static<typeof Commander>;
