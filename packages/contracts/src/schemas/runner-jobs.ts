import { Type, type Static } from '@sinclair/typebox';
import {
  Id,
  JsonObject,
  Nullable,
  RepoUrl,
  SecretRefRecord,
  StringEnum,
  Text,
  Timestamp,
} from './common.js';
import { ToolCredentialRecord } from './runs.js';

export const RUNNER_JOB_PHASES = [
  'pending',
  'starting',
  'running',
  'succeeded',
  'failed',
  'cancelled',
] as const;
export type RunnerJobPhase = (typeof RUNNER_JOB_PHASES)[number];
export const TERMINAL_JOB_PHASES: readonly RunnerJobPhase[] = ['succeeded', 'failed', 'cancelled'];

/**
 * The file a runner leaves in its job directory (`SVC_JOB_DIR`) as it exits: `{ exitCode, at }`.
 * A launcher that is not the runner's parent (a restarted manager that adopted the job) learns
 * how it ended from it.
 */
export const EXIT_STATUS_FILE = 'exit-status.json';

/** `transientEnv` names and the per-value cap (DESIGN gap answers). */
export const TRANSIENT_ENV_NAME = '^[A-Z_][A-Z0-9_]{0,127}$';
export const TRANSIENT_ENV_MAX_VALUE_BYTES = 4096;

export const EnvImageSource = Type.Object(
  {
    kind: Type.Literal('env-image-dockerfile'),
    repoUrl: RepoUrl,
    commitId: Type.String({ pattern: '^([0-9a-f]{40}|[0-9a-f]{64})$' }),
    dockerfilePath: Text(1024),
  },
  { additionalProperties: false },
);
export type EnvImageSource = Static<typeof EnvImageSource>;

export const BackendImageRef = Type.Object(
  { source: EnvImageSource, image: Type.Optional(Text(512)) },
  { additionalProperties: false },
);
export type BackendImageRef = Static<typeof BackendImageRef>;

export const RunnerJobCreateBody = Type.Object(
  {
    commandId: Id,
    attemptId: Type.Optional(Id),
    idempotencyKey: Type.Optional(
      Type.String({ minLength: 1, maxLength: 200, pattern: '^[\\x21-\\x7e]+$' }),
    ),
    image: Type.Optional(Text(512)),
    backendImageRef: Type.Optional(BackendImageRef),
    retention: Type.Optional(StringEnum(['ttl', 'keep'] as const)),
    ttlSecondsAfterFinished: Type.Optional(Type.Integer({ minimum: 0, maximum: 7 * 24 * 3600 })),
    transientEnv: Type.Optional(
      Type.Array(
        Type.Object(
          {
            name: Type.String({ pattern: TRANSIENT_ENV_NAME }),
            value: Type.String({ minLength: 1 }),
          },
          { additionalProperties: false },
        ),
      ),
    ),
    /** Render and validate only: nothing is stored or launched. */
    dryRun: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type RunnerJobCreateBody = Static<typeof RunnerJobCreateBody>;

export const TransientEnvSummary = Type.Object({
  names: Type.Array(Type.String()),
  count: Type.Integer(),
  hash: Type.String(),
  defaultsAdded: Type.Array(Type.String()),
  secretRef: Nullable(Type.Object({ name: Type.String(), namespace: Type.String() })),
  valuesPrinted: Type.Literal(false),
});
export type TransientEnvSummary = Static<typeof TransientEnvSummary>;

export const ImageSummary = Type.Object({
  ref: Type.String(),
  digest: Type.String(),
  resolvedFrom: StringEnum(['default', 'allowlist', 'catalog'] as const),
  source: Nullable(EnvImageSource),
  reuse: Type.String(),
});
export type ImageSummary = Static<typeof ImageSummary>;

export const SessionPvcSummary = Type.Object({
  sessionId: Type.String(),
  pvcName: Type.String(),
  namespace: Type.String(),
  mountPath: Type.String(),
  agentRolloutSubdir: Type.String(),
  storageKind: Type.String(),
  valuesPrinted: Type.Literal(false),
});
export type SessionPvcSummary = Static<typeof SessionPvcSummary>;

export const WorkReadySummary = Type.Object({
  tools: Type.Array(
    Type.Object({
      name: Type.String(),
      version: Nullable(Type.String()),
      required: Type.Boolean(),
      present: Type.Boolean(),
    }),
  ),
  dependencyPolicy: Type.String(),
  valuesPrinted: Type.Literal(false),
});
export type WorkReadySummary = Static<typeof WorkReadySummary>;

export const RunnerJob = Type.Object(
  {
    runnerJobId: Type.String(),
    runId: Type.String(),
    commandId: Type.String(),
    attemptId: Type.String(),
    runnerId: Type.String(),
    jobName: Type.String(),
    namespace: Type.String(),
    launcher: Type.String(),
    logPath: Nullable(Type.String()),
    podIdentity: Nullable(Type.String()),
    phase: StringEnum(RUNNER_JOB_PHASES),
    image: ImageSummary,
    transientEnv: TransientEnvSummary,
    providerSecretRef: SecretRefRecord,
    toolCredentials: Type.Array(ToolCredentialRecord),
    sessionPvc: Nullable(SessionPvcSummary),
    workReady: Nullable(WorkReadySummary),
    polling: Type.Object({
      command: Type.String(),
      events: Type.String(),
      result: Type.String(),
      runnerJob: Type.String(),
    }),
    retention: Type.String(),
    ttlSecondsAfterFinished: Type.Integer(),
    exitCode: Nullable(Type.Integer()),
    terminalSummary: Nullable(JsonObject),
    createdAt: Timestamp,
    startedAt: Nullable(Timestamp),
    finishedAt: Nullable(Timestamp),
    dryRun: Type.Boolean(),
    /** Dry-run only: the rendered Job manifest, names and hashes instead of values. */
    manifest: Type.Optional(JsonObject),
    valuesPrinted: Type.Literal(false),
  },
  { $id: 'RunnerJob' },
);
export type RunnerJob = Static<typeof RunnerJob>;

export const RunnerJobList = Type.Object({
  runId: Type.String(),
  runnerJobs: Type.Array(RunnerJob),
});
export type RunnerJobList = Static<typeof RunnerJobList>;
