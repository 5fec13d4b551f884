import { Type, type Static } from '@sinclair/typebox';
import { Id, Nullable, SecretRefRecord, StringEnum, Text, Timestamp } from './common.js';

/**
 * Provider profiles (spec/2, "Provider profiles"): the server-delegated surface a business
 * backend uses to query, write and validate the Secret a profile's runs read. No response but
 * `ProfileConfig` carries config text; none carries a credential.
 */

export const VALIDATION_STATUSES = ['running', 'completed', 'failed', 'cancelled'] as const;
export type ValidationStatus = (typeof VALIDATION_STATUSES)[number];

export const ProfileParams = Type.Object(
  { profile: Type.String({ minLength: 1, maxLength: 64 }) },
  { additionalProperties: false },
);
export type ProfileParams = Static<typeof ProfileParams>;

export const ValidationParams = Type.Object(
  { profile: Type.String({ minLength: 1, maxLength: 64 }), validationId: Id },
  { additionalProperties: false },
);
export type ValidationParams = Static<typeof ValidationParams>;

/** A SecretRef the caller expects to write: anything but the controlled one is refused. */
export const ExpectedSecretRef = Type.Object(
  { namespace: Type.Optional(Text(63)), name: Type.Optional(Text(253)) },
  { additionalProperties: false },
);

/** Who asked the business backend for this change: audit data only, never authorization. */
export const DelegatedBy = Type.Object(
  {
    system: Text(128),
    userId: Type.Optional(Text(256)),
    username: Type.Optional(Text(256)),
    requestId: Text(256),
  },
  { additionalProperties: false },
);
export type DelegatedBy = Static<typeof DelegatedBy>;

export const LastValidation = Type.Object({
  validationId: Type.String(),
  status: StringEnum(VALIDATION_STATUSES),
  failureKind: Nullable(Type.String()),
  message: Nullable(Type.String()),
  runId: Nullable(Type.String()),
  commandId: Nullable(Type.String()),
  jobName: Nullable(Type.String()),
  /** The Secret version current when the validation was requested. */
  secretResourceVersion: Nullable(Type.String()),
  createdAt: Timestamp,
  finishedAt: Nullable(Timestamp),
});
export type LastValidation = Static<typeof LastValidation>;

export const ProfileStatus = Type.Object({
  profile: Type.String(),
  builtin: Type.Boolean(),
  backendKind: Type.Literal('codex-app-server'),
  configured: Type.Boolean(),
  /** `secret-unavailable` while the Secret or one of its required keys is missing. */
  failureKind: Nullable(Type.String()),
  message: Nullable(Type.String()),
  missingKeys: Type.Array(Type.String()),
  secretRef: SecretRefRecord,
  resourceVersion: Nullable(Type.String()),
  /** Short suffix of a salted SHA-256 of the API key: changes when the key does. */
  credentialHashSuffix: Nullable(Type.String()),
  configHashSuffix: Nullable(Type.String()),
  catalogHashSuffix: Nullable(Type.String()),
  updatedAt: Nullable(Timestamp),
  lastValidation: Nullable(LastValidation),
  valuesPrinted: Type.Literal(false),
});
export type ProfileStatus = Static<typeof ProfileStatus>;

export const ProfileList = Type.Object({ profiles: Type.Array(ProfileStatus) });
export type ProfileList = Static<typeof ProfileList>;

export const ProfileDeleteResponse = Type.Object({
  profile: Type.String(),
  removed: Type.Boolean(),
  alreadyAbsent: Type.Boolean(),
  /** Built-ins stay listed (configured=false); a dynamic profile leaves the collection. */
  stillListed: Type.Boolean(),
  secretRef: SecretRefRecord,
  valuesPrinted: Type.Literal(false),
});
export type ProfileDeleteResponse = Static<typeof ProfileDeleteResponse>;

/** The only response that carries config text. */
export const ProfileConfig = Type.Object({
  profile: Type.String(),
  configToml: Type.String(),
  secretRef: SecretRefRecord,
  resourceVersion: Type.String(),
  credentialHashSuffix: Nullable(Type.String()),
  configHashSuffix: Type.String(),
  catalogHashSuffix: Nullable(Type.String()),
  updatedAt: Nullable(Timestamp),
  /** Credential-like fields found in the stored config and shown as `[redacted]`. */
  redactedFields: Type.Array(Type.String()),
});
export type ProfileConfig = Static<typeof ProfileConfig>;

const BridgeSyncDone = Type.Optional(
  Type.Boolean({
    description:
      'builtin-b only: the delegating backend has already updated the bridge upstream; otherwise the response asks for it with requiresExternalBridgeUpdate=true',
  }),
);

export const ProfileConfigPutBody = Type.Object(
  {
    configToml: Type.String({ minLength: 1, maxLength: 65_536 }),
    /** Optimistic concurrency: the resourceVersion read with GET …/config. */
    resourceVersion: Type.Optional(Text(64)),
    secretRef: Type.Optional(ExpectedSecretRef),
    delegatedBy: Type.Optional(DelegatedBy),
    reason: Type.Optional(Text(1000)),
    bridgeSyncDone: BridgeSyncDone,
  },
  { additionalProperties: false },
);
export type ProfileConfigPutBody = Static<typeof ProfileConfigPutBody>;

export const CredentialPutBody = Type.Object(
  {
    /** Write-only: used to build auth.json inside the request, never stored or returned. */
    apiKey: Type.String({ minLength: 8, maxLength: 4096, pattern: '^[\\x21-\\x7e]+$' }),
    config: Type.Optional(
      Type.Object(
        { model: Type.Optional(Text(256)), baseUrl: Type.Optional(Text(2048)) },
        { additionalProperties: false },
      ),
    ),
    delegatedBy: DelegatedBy,
    reason: Type.Optional(Text(1000)),
    secretRef: Type.Optional(ExpectedSecretRef),
    bridgeSyncDone: BridgeSyncDone,
  },
  { additionalProperties: false },
);
export type CredentialPutBody = Static<typeof CredentialPutBody>;

/** The answer to a Secret write: names, versions and hash suffixes only. */
export const ProfileWriteResponse = Type.Object({
  profile: Type.String(),
  configured: Type.Boolean(),
  created: Type.Boolean(),
  secretRef: SecretRefRecord,
  resourceVersion: Type.String(),
  credentialHashSuffix: Nullable(Type.String()),
  configHashSuffix: Nullable(Type.String()),
  catalogHashSuffix: Nullable(Type.String()),
  updatedAt: Nullable(Timestamp),
  /** builtin-b only (spec/2 rule 7). */
  requiresExternalBridgeUpdate: Type.Optional(Type.Boolean()),
  valuesPrinted: Type.Literal(false),
});
export type ProfileWriteResponse = Static<typeof ProfileWriteResponse>;

export const ValidationStarted = Type.Object({
  validationId: Type.String(),
  profile: Type.String(),
  runId: Type.String(),
  commandId: Type.String(),
  jobName: Type.String(),
  status: Type.Literal('running'),
  pollUrl: Type.String(),
});
export type ValidationStarted = Static<typeof ValidationStarted>;

export const Validation = Type.Object({
  validationId: Type.String(),
  profile: Type.String(),
  status: StringEnum(VALIDATION_STATUSES),
  failureKind: Nullable(Type.String()),
  message: Nullable(Type.String()),
  runId: Nullable(Type.String()),
  commandId: Nullable(Type.String()),
  runnerJobId: Nullable(Type.String()),
  jobName: Nullable(Type.String()),
  secretResourceVersion: Nullable(Type.String()),
  /** The canary's assistant reply (bounded), present once the turn completed. */
  reply: Nullable(Type.String()),
  /** What the status was derived from. */
  evidence: Type.Object({
    commandState: Nullable(Type.String()),
    terminalStatus: Nullable(Type.String()),
    runnerJobPhase: Nullable(Type.String()),
    runnerJobSummary: Nullable(Type.Record(Type.String(), Type.Unknown())),
  }),
  pollUrl: Type.String(),
  createdAt: Timestamp,
  finishedAt: Nullable(Timestamp),
  valuesPrinted: Type.Literal(false),
});
export type Validation = Static<typeof Validation>;
