import { Type, type Static } from '@sinclair/typebox';
import {
  Id,
  INT32_MAX,
  JsonObject,
  Nullable,
  SAFE_INT_MAX,
  SeqPosition,
  StringEnum,
  Text,
  Timestamp,
} from './common.js';
import { Liveness } from './liveness.js';
import { ExecutionPolicyInput, ResourceBundleRef, TraceSink, WorkspaceRef } from './runs.js';
import { RunnerJobCreateBody } from './runner-jobs.js';

export const SESSION_STATES = ['idle', 'running', 'terminal'] as const;
export type SessionExecutionState = (typeof SESSION_STATES)[number];
export const SESSION_LIST_STATES = [
  'default',
  'running',
  'unread',
  'terminal',
  'idle',
  'all',
] as const;
export const SESSIONS_PAGE_DEFAULT = 50;
export const SESSIONS_PAGE_MAX = 200;

const ReaderId = Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._:@-]+$' });

/** The run fields a session reuses for every run it starts (its profile is the session's). */
export const RunBase = Type.Object(
  {
    tenantId: Text(128),
    projectId: Text(128),
    workspaceRef: WorkspaceRef,
    providerId: Type.String({ pattern: '^[a-z0-9][a-z0-9._-]{0,63}$' }),
    executionPolicy: Type.Optional(ExecutionPolicyInput),
    traceSink: Type.Optional(Nullable(TraceSink)),
    resourceBundleRef: Type.Optional(Nullable(ResourceBundleRef)),
    metadata: Type.Optional(Type.Record(Type.String({ maxLength: 128 }), Type.Unknown())),
  },
  { additionalProperties: false },
);
export type RunBase = Static<typeof RunBase>;

export const SessionCreateBody = Type.Object(
  {
    sessionId: Type.Optional(Id),
    conversationId: Type.Optional(Text(255)),
    backendProfile: Type.Optional(Type.String({ maxLength: 200 })),
    providerProfile: Type.Optional(Type.String({ maxLength: 200 })),
    threadId: Type.Optional(Text(255)),
    runBase: RunBase,
    expiresInSeconds: Type.Optional(Type.Integer({ minimum: 60, maximum: 90 * 24 * 3600 })),
  },
  { additionalProperties: false },
);
export type SessionCreateBody = Static<typeof SessionCreateBody>;

/** What the storage holds and when it expires: on the session and on the storage routes. */
const storageFacts = {
  storage_size_bytes: Nullable(Type.Integer()),
  storage_files_count: Nullable(Type.Integer()),
  storage_sha256: Nullable(Type.String()),
  storage_updated_at: Nullable(Timestamp),
  storage_evicted_at: Nullable(Timestamp),
  expires_at: Timestamp,
  valuesPrinted: Type.Literal(false),
};

export const SessionStorage = Type.Object({
  storageKind: StringEnum(['pvc', 'evicted'] as const),
  pvcName: Type.String(),
  pvcNamespace: Type.String(),
  pvcPhase: Nullable(Type.String()),
  ...storageFacts,
});
export type SessionStorage = Static<typeof SessionStorage>;

export const Supervisor = Type.Object({
  phase: Type.String(),
  lastActivitySeq: Nullable(Type.Integer()),
  lastActivityEventId: Nullable(Type.String()),
  timeoutBudget: Type.Object({
    state: Type.String(),
    remainingMs: Type.Integer(),
    timeoutMs: Type.Integer(),
  }),
  recoveryAction: Type.String(),
  next: Type.String(),
});
export type Supervisor = Static<typeof Supervisor>;

export const Session = Type.Object(
  {
    sessionId: Type.String(),
    sessionPath: Type.String(),
    conversationId: Nullable(Type.String()),
    threadId: Nullable(Type.String()),
    backendProfile: Type.String(),
    tenantId: Type.String(),
    projectId: Type.String(),
    executionState: StringEnum(SESSION_STATES),
    activeRunId: Nullable(Type.String()),
    activeCommandId: Nullable(Type.String()),
    lastRunId: Nullable(Type.String()),
    lastCommandId: Nullable(Type.String()),
    lastOutcome: Nullable(Type.String()),
    version: Type.Integer(),
    reader: Nullable(
      Type.Object({
        readerId: Type.String(),
        readVersion: Nullable(Type.Integer()),
        unread: Type.Boolean(),
      }),
    ),
    storage: SessionStorage,
    createdAt: Timestamp,
    updatedAt: Timestamp,
    liveness: Type.Optional(Nullable(Liveness)),
    supervisor: Type.Optional(Nullable(Supervisor)),
  },
  { $id: 'Session' },
);
export type Session = Static<typeof Session>;

export const SessionListQuery = Type.Object(
  {
    state: Type.Optional(StringEnum(SESSION_LIST_STATES)),
    readerId: Type.Optional(ReaderId),
    backendProfile: Type.Optional(Type.String({ maxLength: 64 })),
    cursor: Type.Optional(Type.String({ maxLength: 200, pattern: '^[A-Za-z0-9_-]+$' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: SESSIONS_PAGE_MAX })),
  },
  { additionalProperties: false },
);
export type SessionListQuery = Static<typeof SessionListQuery>;

export const SessionPage = Type.Object({
  sessions: Type.Array(Session),
  nextCursor: Nullable(Type.String()),
  state: Type.String(),
  readerId: Nullable(Type.String()),
});
export type SessionPage = Static<typeof SessionPage>;

export const ReadBody = Type.Object({ readerId: ReaderId }, { additionalProperties: false });
export type ReadBody = Static<typeof ReadBody>;

export const ControlBody = Type.Object(
  { action: Type.Literal('cancel'), reason: Type.Optional(Text(1000, 0)) },
  { additionalProperties: false },
);
export type ControlBody = Static<typeof ControlBody>;

export const SendBody = Type.Object(
  {
    prompt: Type.Optional(Type.String({ minLength: 1, maxLength: 256 * 1024 })),
    payload: Type.Optional(JsonObject),
    runBase: Type.Optional(Type.Partial(RunBase)),
    backendProfile: Type.Optional(Type.String({ maxLength: 200 })),
    providerProfile: Type.Optional(Type.String({ maxLength: 200 })),
    /** Overrides for the runner job of a new run; `false`: create none. */
    runnerJob: Type.Optional(
      Type.Union([Type.Literal(false), Type.Omit(RunnerJobCreateBody, ['commandId', 'dryRun'])]),
    ),
    idempotencyKey: Type.Optional(
      Type.String({ minLength: 1, maxLength: 200, pattern: '^[\\x21-\\x7e]+$' }),
    ),
    dryRun: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type SendBody = Static<typeof SendBody>;

export const ActiveBefore = Type.Object({
  runId: Nullable(Type.String()),
  commandId: Nullable(Type.String()),
  commandType: Nullable(Type.String()),
  commandState: Nullable(Type.String()),
  runState: Nullable(Type.String()),
  leaseOwner: Nullable(Type.String()),
  leaseExpired: Nullable(Type.Boolean()),
  reason: Type.String(),
});
export type ActiveBefore = Static<typeof ActiveBefore>;

export const SendResponse = Type.Object({
  sessionId: Type.String(),
  decision: StringEnum(['steer', 'new-run'] as const),
  internalCommandType: StringEnum(['steer', 'turn'] as const),
  dryRun: Type.Boolean(),
  mutation: Type.Boolean(),
  activeBefore: ActiveBefore,
  run: Nullable(
    Type.Object({ runId: Type.String(), state: Type.String(), backendProfile: Type.String() }),
  ),
  command: Nullable(
    Type.Object({
      commandId: Type.String(),
      type: Type.String(),
      state: Type.String(),
      threadId: Nullable(Type.String()),
    }),
  ),
  runnerJob: Nullable(
    Type.Object({
      runnerJobId: Type.String(),
      attemptId: Type.String(),
      jobName: Type.String(),
      phase: Type.String(),
    }),
  ),
  plan: Nullable(JsonObject),
  sessionPath: Type.String(),
  valuesPrinted: Type.Literal(false),
});
export type SendResponse = Static<typeof SendResponse>;

export const StorageRefreshBody = Type.Object(
  {
    /** The runner holding the lease of the session's run (with its `x-lease-token`). */
    runnerId: Id,
    sizeBytes: Type.Integer({ minimum: 0, maximum: SAFE_INT_MAX }),
    filesCount: Type.Integer({ minimum: 0, maximum: INT32_MAX }),
    sha256: Type.String({ pattern: '^[0-9a-f]{64}$' }),
  },
  { additionalProperties: false },
);
export type StorageRefreshBody = Static<typeof StorageRefreshBody>;

export const StorageResponse = Type.Object({
  sessionId: Type.String(),
  pvcName: Type.String(),
  pvcPhase: Nullable(Type.String()),
  storage_kind: Type.String(),
  ...storageFacts,
});
export type StorageResponse = Static<typeof StorageResponse>;

export const SessionEventsQuery = Type.Object(
  {
    afterSeq: Type.Optional(SeqPosition),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
    runId: Type.Optional(Id),
  },
  { additionalProperties: false },
);
export type SessionEventsQuery = Static<typeof SessionEventsQuery>;
