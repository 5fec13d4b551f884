import { Type, type Static } from '@sinclair/typebox';
import { Command } from './commands.js';
import { Id, JsonObject, Nullable, SeqPosition, StringEnum, Text, Timestamp } from './common.js';
import { Run } from './runs.js';

export const RunnerRegisterBody = Type.Object(
  {
    runnerId: Type.Optional(Id),
    runId: Id,
    attemptId: Type.Optional(Nullable(Id)),
    runnerJobId: Type.Optional(Nullable(Id)),
    hostname: Type.Optional(Text(255)),
    /** Linux pid_max is at most 2^22. */
    pid: Type.Optional(Type.Integer({ minimum: 0, maximum: 4_194_304 })),
    version: Type.Optional(Text(64)),
    workReady: Type.Optional(JsonObject),
  },
  { additionalProperties: false },
);
export type RunnerRegisterBody = Static<typeof RunnerRegisterBody>;

export const RunnerRegistration = Type.Object({
  runnerId: Type.String(),
  runId: Type.String(),
  attemptId: Nullable(Type.String()),
  registeredAt: Timestamp,
  leaseTtlMs: Type.Integer(),
  heartbeatIntervalMs: Type.Integer(),
  pollWaitMs: Type.Integer(),
});
export type RunnerRegistration = Static<typeof RunnerRegistration>;

export const ClaimBody = Type.Object(
  {
    runnerId: Id,
    attemptId: Type.Optional(Nullable(Id)),
    /** `replacement`: the runner was started for this run and will wait for an old lease. */
    mode: Type.Optional(Type.Union([Type.Literal('ordinary'), Type.Literal('replacement')])),
  },
  { additionalProperties: false },
);
export type ClaimBody = Static<typeof ClaimBody>;

export const LeaseGrant = Type.Object({
  owner: Type.String(),
  expiresAt: Timestamp,
  epoch: Type.Integer(),
  ttlMs: Type.Integer(),
});
export type LeaseGrant = Static<typeof LeaseGrant>;

export const ClaimResponse = Type.Object({
  run: Run,
  lease: LeaseGrant,
  /** Sent back as header `x-lease-token` on every lease-fenced call; only its hash is stored. */
  leaseToken: Type.String(),
  recovered: Type.Boolean(),
  previousOwner: Nullable(Type.String()),
  lastSeq: Type.Integer(),
  lastCommandSeq: Type.Integer(),
});
export type ClaimResponse = Static<typeof ClaimResponse>;

export const LeaseBody = Type.Object(
  {
    runnerId: Id,
    /** When the agent last did anything (any notification): feeds the idle budget. */
    lastActivityAt: Type.Optional(Type.String({ format: 'date-time' })),
    lastActivityKind: Type.Optional(Text(100)),
  },
  { additionalProperties: false },
);
export type LeaseBody = Static<typeof LeaseBody>;

export const RunControlSignals = Type.Object({
  runState: Type.String(),
  cancelRequested: Type.Boolean(),
  cancelledCommandIds: Type.Array(Type.String()),
});
export type RunControlSignals = Static<typeof RunControlSignals>;

export const LeaseResponse = Type.Object({
  lease: LeaseGrant,
  control: RunControlSignals,
});
export type LeaseResponse = Static<typeof LeaseResponse>;

export const PollQuery = Type.Object(
  {
    afterSeq: Type.Optional(SeqPosition),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
    runnerId: Type.Optional(Id),
    /** Bounded long-poll: hold the request until a command arrives or this many ms pass. */
    waitMs: Type.Optional(Type.Integer({ minimum: 0, maximum: 30_000 })),
  },
  { additionalProperties: false },
);
export type PollQuery = Static<typeof PollQuery>;

export const PollResponse = Type.Object({
  runId: Type.String(),
  commands: Type.Array(Command),
  lastCommandSeq: Type.Integer(),
  control: RunControlSignals,
});
export type PollResponse = Static<typeof PollResponse>;

export const AckBody = Type.Object({ runnerId: Id }, { additionalProperties: false });
export type AckBody = Static<typeof AckBody>;

export const RunStatusBody = Type.Object(
  {
    runnerId: Id,
    state: StringEnum(['running', 'completed', 'failed', 'blocked', 'cancelled'] as const),
    failureKind: Type.Optional(Type.String({ maxLength: 64 })),
    message: Type.Optional(Text(4000, 0)),
    details: Type.Optional(JsonObject),
  },
  { additionalProperties: false },
);
export type RunStatusBody = Static<typeof RunStatusBody>;
