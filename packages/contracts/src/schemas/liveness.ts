import { Type, type Static } from '@sinclair/typebox';
import { Nullable, Timestamp, StringEnum } from './common.js';

export const LIVENESS_PHASES = [
  'waiting-runner',
  'waiting-model',
  'waiting-model-output',
  'waiting-tool',
  'waiting-tool-output',
  'idle-after-tool',
  'runner-stdio-inactive',
  'transport-disconnected',
  'runner-heartbeat-stale',
  'terminal',
] as const;
export type LivenessPhase = (typeof LIVENESS_PHASES)[number];

export const BUDGET_STATES = [
  'within-budget',
  'approaching-idle-timeout',
  'idle-timed-out',
  'terminal',
] as const;
export type BudgetState = (typeof BUDGET_STATES)[number];

export const Activity = Type.Object({
  sourceSeq: Nullable(Type.Integer()),
  eventId: Nullable(Type.String()),
  activityKind: Type.String(),
  observedAt: Timestamp,
  ageMs: Type.Integer(),
});
export type Activity = Static<typeof Activity>;

export const RecoveryAction = Type.Object({
  action: Type.String(),
  description: Type.String(),
  path: Nullable(Type.String()),
});
export type RecoveryAction = Static<typeof RecoveryAction>;

export const TimeoutBudget = Type.Object({
  timeoutKind: Type.Literal('idle'),
  hardTimeout: Type.Literal(false),
  timeoutMs: Type.Integer(),
  idleStartedAt: Nullable(Timestamp),
  idleElapsedMs: Type.Integer(),
  lastActivityAt: Nullable(Timestamp),
  lastActivitySeq: Nullable(Type.Integer()),
  elapsedMs: Type.Integer(),
  remainingMs: Type.Integer(),
  state: StringEnum(BUDGET_STATES),
});
export type TimeoutBudget = Static<typeof TimeoutBudget>;

export const Liveness = Type.Object({
  phase: StringEnum(LIVENESS_PHASES),
  active: Type.Boolean(),
  lastSeq: Type.Integer(),
  lastEventAgeMs: Nullable(Type.Integer()),
  lastActivity: Nullable(Activity),
  lastCommandActivity: Nullable(Activity),
  lease: Type.Object({
    owner: Nullable(Type.String()),
    expiresAt: Nullable(Timestamp),
    expired: Type.Boolean(),
    heartbeatAt: Nullable(Timestamp),
    heartbeatAgeMs: Nullable(Type.Integer()),
  }),
  recoveryActions: Type.Array(RecoveryAction, { minItems: 1 }),
  timeoutBudget: TimeoutBudget,
});
export type Liveness = Static<typeof Liveness>;
