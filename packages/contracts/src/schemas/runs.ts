import { Type, type Static } from '@sinclair/typebox';
import {
  Id,
  JsonObject,
  Nullable,
  RepoUrl,
  SecretRef,
  SecretRefRecord,
  Slug,
  Text,
  Timestamp,
  StringEnum,
} from './common.js';
import { COMMAND_STATES, COMMAND_TYPES } from './commands.js';

export const SANDBOX_LEVELS = ['read-only', 'workspace-write', 'danger-full-access'] as const;
/** Narrow to wide: `on-request` lets the agent ask to escalate (the headless runner declines). */
export const APPROVAL_LEVELS = ['on-request', 'never'] as const;
export const NETWORK_LEVELS = ['disabled', 'enabled'] as const;
export type SandboxLevel = (typeof SANDBOX_LEVELS)[number];
export type ApprovalLevel = (typeof APPROVAL_LEVELS)[number];
export type NetworkLevel = (typeof NETWORK_LEVELS)[number];
/** The longest idle budget any policy may name (7 days); the configured ceiling is lower. */
export const MAX_POLICY_TIMEOUT_MS = 604_800_000;

export const WorkspaceRef = Type.Union([
  Type.Object(
    {
      kind: Type.Literal('git'),
      repoUrl: Type.Optional(RepoUrl),
      branch: Type.Optional(Text(255)),
      worktree: Type.Optional(Text(255)),
    },
    { additionalProperties: false },
  ),
  Type.Object(
    { kind: Type.Literal('opaque'), workspaceId: Type.Optional(Text(255)) },
    { additionalProperties: false },
  ),
  Type.Object(
    { kind: Type.Literal('host-path'), path: Text(4096) },
    { additionalProperties: false },
  ),
]);
export type WorkspaceRef = Static<typeof WorkspaceRef>;

export const ProviderCredential = Type.Object(
  { profile: Slug, secretRef: Type.Optional(SecretRef) },
  { additionalProperties: false },
);

export const ToolProjection = Type.Union([
  Type.Object(
    { kind: Type.Literal('env'), envName: Type.String({ pattern: '^[A-Z_][A-Z0-9_]{0,127}$' }) },
    { additionalProperties: false },
  ),
  Type.Object(
    { kind: Type.Literal('volume'), mountPath: Text(1024) },
    { additionalProperties: false },
  ),
]);
export type ToolProjection = Static<typeof ToolProjection>;

export const ToolCredential = Type.Object(
  {
    tool: Type.String({ pattern: '^[a-z0-9][a-z0-9-]{0,62}$' }),
    purpose: Text(128),
    secretRef: SecretRef,
    projection: ToolProjection,
  },
  { additionalProperties: false },
);
export type ToolCredential = Static<typeof ToolCredential>;

export const ExecutionPolicyInput = Type.Object(
  {
    sandbox: Type.Optional(StringEnum(SANDBOX_LEVELS)),
    approval: Type.Optional(StringEnum(APPROVAL_LEVELS)),
    network: Type.Optional(StringEnum(NETWORK_LEVELS)),
    timeoutMs: Type.Optional(Type.Integer({ minimum: 1000, maximum: MAX_POLICY_TIMEOUT_MS })),
    secretScope: Type.Optional(
      Type.Object(
        {
          providerCredentials: Type.Optional(Type.Array(ProviderCredential, { maxItems: 16 })),
          toolCredentials: Type.Optional(Type.Array(ToolCredential, { maxItems: 32 })),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
export type ExecutionPolicyInput = Static<typeof ExecutionPolicyInput>;

export const ToolCredentialRecord = Type.Object({
  tool: Type.String(),
  purpose: Type.String(),
  secretRef: SecretRefRecord,
  projection: ToolProjection,
  valuesPrinted: Type.Literal(false),
});
export type ToolCredentialRecord = Static<typeof ToolCredentialRecord>;

export const ExecutionPolicy = Type.Object({
  sandbox: StringEnum(SANDBOX_LEVELS),
  approval: StringEnum(APPROVAL_LEVELS),
  network: StringEnum(NETWORK_LEVELS),
  timeoutMs: Type.Integer(),
  timeoutKind: Type.Literal('idle'),
  secretScope: Type.Object({
    providerCredentials: Type.Array(
      Type.Object({ profile: Type.String(), secretRef: SecretRefRecord }),
    ),
    toolCredentials: Type.Array(ToolCredentialRecord),
  }),
  defaultsApplied: Type.Array(Type.String()),
});
export type ExecutionPolicy = Static<typeof ExecutionPolicy>;

export const BundleItem = Type.Object(
  {
    name: Type.Optional(Text(128)),
    repoUrl: Type.Optional(RepoUrl),
    ref: Type.Optional(Text(255)),
    commitId: Type.Optional(Type.String({ pattern: '^([0-9a-f]{40}|[0-9a-f]{64})$' })),
    subpath: Text(1024),
    target_path: Text(1024),
  },
  { additionalProperties: false },
);
export type BundleItem = Static<typeof BundleItem>;

export const PromptRef = Type.Object(
  {
    name: Text(128),
    path: Text(1024),
    inject: Type.Literal('thread-start'),
    required: Type.Boolean(),
  },
  { additionalProperties: false },
);
export type PromptRef = Static<typeof PromptRef>;

export const ResourceBundleRef = Type.Object(
  {
    kind: Type.Literal('gitbundle'),
    repoUrl: RepoUrl,
    ref: Type.Optional(Text(255)),
    commitId: Type.Optional(Type.String({ pattern: '^([0-9a-f]{40}|[0-9a-f]{64})$' })),
    bundles: Type.Optional(Type.Array(BundleItem, { maxItems: 64 })),
    promptRefs: Type.Optional(Type.Array(PromptRef, { maxItems: 32 })),
    requiredSkills: Type.Optional(
      Type.Array(
        Type.Object(
          { name: Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' }) },
          { additionalProperties: false },
        ),
        { maxItems: 64 },
      ),
    ),
    credentialRef: Type.Optional(SecretRef),
  },
  { additionalProperties: false },
);
export type ResourceBundleRef = Static<typeof ResourceBundleRef>;

export const SessionRef = Type.Object(
  {
    sessionId: Id,
    conversationId: Type.Optional(Nullable(Text(255))),
    threadId: Type.Optional(Nullable(Text(255))),
  },
  { additionalProperties: false },
);
export type SessionRef = Static<typeof SessionRef>;

export const TraceSink = Type.Object(
  { kind: Type.Literal('run-events') },
  { additionalProperties: false },
);

export const RunCreateBody = Type.Object(
  {
    tenantId: Text(128),
    projectId: Text(128),
    workspaceRef: WorkspaceRef,
    providerId: Type.String({ pattern: '^[a-z0-9][a-z0-9._-]{0,63}$' }),
    backendProfile: Type.Optional(Type.String({ maxLength: 200 })),
    /** Business alias of backendProfile; both given must agree. */
    providerProfile: Type.Optional(Type.String({ maxLength: 200 })),
    executionPolicy: Type.Optional(ExecutionPolicyInput),
    traceSink: Nullable(TraceSink),
    resourceBundleRef: Type.Optional(Nullable(ResourceBundleRef)),
    sessionRef: Type.Optional(Nullable(SessionRef)),
    metadata: Type.Optional(Type.Record(Type.String({ maxLength: 128 }), Type.Unknown())),
  },
  { additionalProperties: false },
);
export type RunCreateBody = Static<typeof RunCreateBody>;

export const RUN_STATES = [
  'pending',
  'claimed',
  'running',
  'completed',
  'failed',
  'blocked',
  'cancelled',
] as const;
export type RunState = (typeof RUN_STATES)[number];
export const TERMINAL_RUN_STATES: readonly RunState[] = [
  'completed',
  'failed',
  'blocked',
  'cancelled',
];

export const LeaseSummary = Type.Object({
  owner: Nullable(Type.String()),
  expiresAt: Nullable(Timestamp),
  heartbeatAt: Nullable(Timestamp),
  expired: Type.Boolean(),
  epoch: Type.Integer(),
});
export type LeaseSummary = Static<typeof LeaseSummary>;

/**
 * What a run is doing now: `waiting-runner` (open, a turn waits for a runner to take and
 * acknowledge it), `turn-active` (a turn is acknowledged and not terminal), `idle` (open, no
 * turn open), `closed` (the run is terminal).
 */
export const RUN_ACTIVITIES = ['waiting-runner', 'turn-active', 'idle', 'closed'] as const;
export type RunActivity = (typeof RUN_ACTIVITIES)[number];

/** How the run's latest turn (or resume) command stands: its outcome once it ended. */
export const LastCommand = Type.Object({
  commandId: Type.String(),
  type: StringEnum(COMMAND_TYPES),
  state: StringEnum(COMMAND_STATES),
  failureKind: Nullable(Type.String()),
  message: Nullable(Type.String()),
  /** When it reached its terminal state; null while it is open. */
  endedAt: Nullable(Timestamp),
});
export type LastCommand = Static<typeof LastCommand>;

export const Run = Type.Object(
  {
    runId: Type.String(),
    tenantId: Type.String(),
    projectId: Type.String(),
    providerId: Type.String(),
    backendProfile: Type.String(),
    workspaceRef: WorkspaceRef,
    executionPolicy: ExecutionPolicy,
    traceSink: Nullable(TraceSink),
    resourceBundleRef: Nullable(JsonObject),
    sessionRef: Nullable(SessionRef),
    metadata: JsonObject,
    state: StringEnum(RUN_STATES),
    failureKind: Nullable(Type.String()),
    message: Nullable(Type.String()),
    lease: LeaseSummary,
    lastSeq: Type.Integer(),
    latestCommandId: Nullable(Type.String()),
    activity: StringEnum(RUN_ACTIVITIES, {
      description:
        'waiting-runner: a turn waits for a runner; turn-active: a turn is acknowledged and not terminal; idle: open, no turn open; closed: the run is terminal',
    }),
    /** The run's latest turn or resume command (steers and interrupts act on a turn). */
    lastCommand: Nullable(LastCommand),
    createdAt: Timestamp,
    updatedAt: Timestamp,
    claimedAt: Nullable(Timestamp),
    terminalAt: Nullable(Timestamp),
    cancelRequested: Type.Boolean(),
    /** Listings only: the prompt of the run's first turn, its first 200 characters. */
    firstPrompt: Type.Optional(Nullable(Type.String())),
  },
  { $id: 'Run' },
);
export type Run = Static<typeof Run>;

export const CancelBody = Type.Object(
  { reason: Type.Optional(Text(1000, 0)) },
  { additionalProperties: false },
);
export type CancelBody = Static<typeof CancelBody>;
