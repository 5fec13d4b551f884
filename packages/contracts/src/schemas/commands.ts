import { Type, type Static } from '@sinclair/typebox';
import { JsonObject, Nullable, SAFE_INT_MAX, Text, Timestamp, StringEnum } from './common.js';
import { EventInput, MAX_EVENTS_PER_APPEND } from './events.js';

export const COMMAND_TYPES = ['turn', 'steer', 'interrupt', 'resume'] as const;
export type CommandType = (typeof COMMAND_TYPES)[number];

export const COMMAND_STATES = [
  'accepted',
  'delivered',
  'confirmed',
  'completed',
  'failed',
  'blocked',
  'cancelled',
  'expired',
] as const;
export type CommandState = (typeof COMMAND_STATES)[number];
export const TERMINAL_COMMAND_STATES: readonly CommandState[] = [
  'completed',
  'failed',
  'blocked',
  'cancelled',
  'expired',
];
export const COMMAND_OUTCOMES = ['completed', 'failed', 'blocked', 'cancelled'] as const;
export type CommandOutcome = (typeof COMMAND_OUTCOMES)[number];

export const CommandCreateBody = Type.Object(
  {
    type: StringEnum(COMMAND_TYPES),
    idempotencyKey: Type.Optional(
      Type.String({ minLength: 1, maxLength: 200, pattern: '^[\\x21-\\x7e]+$' }),
    ),
    payload: Type.Optional(JsonObject),
  },
  { additionalProperties: false },
);
export type CommandCreateBody = Static<typeof CommandCreateBody>;

export const SteerDelivery = Type.Object({
  targetCommandId: Nullable(Type.String()),
  acknowledged: Type.Boolean(),
  forwarded: Type.Boolean(),
  accepted: Type.Boolean(),
  targetTurnId: Nullable(Type.String()),
  laterTargetEventsSeen: Type.Boolean(),
  message: Nullable(Type.String()),
});
export type SteerDelivery = Static<typeof SteerDelivery>;

export const Command = Type.Object(
  {
    commandId: Type.String(),
    runId: Type.String(),
    seq: Type.Integer(),
    type: StringEnum(COMMAND_TYPES),
    state: StringEnum(COMMAND_STATES),
    idempotencyKey: Nullable(Type.String()),
    payloadHash: Type.String(),
    payload: JsonObject,
    targetCommandId: Nullable(Type.String()),
    threadId: Nullable(Type.String()),
    turnId: Nullable(Type.String()),
    runnerId: Nullable(Type.String()),
    failureKind: Nullable(Type.String()),
    message: Nullable(Type.String()),
    cancelRequested: Type.Boolean(),
    createdAt: Timestamp,
    deliveredAt: Nullable(Timestamp),
    confirmedAt: Nullable(Timestamp),
    terminalAt: Nullable(Timestamp),
    expiresAt: Timestamp,
    steerDelivery: Type.Optional(SteerDelivery),
  },
  { $id: 'Command' },
);
export type Command = Static<typeof Command>;

/** Runner's terminal report (PATCH /commands/:id/status). */
export const CommandStatusBody = Type.Object(
  {
    runnerId: Text(100),
    /** `running`: a progress report (thread and turn ids) on an acknowledged command. */
    state: StringEnum(['running', ...COMMAND_OUTCOMES] as const),
    failureKind: Type.Optional(Type.String({ maxLength: 64 })),
    message: Type.Optional(Text(4000, 0)),
    threadId: Type.Optional(Text(255)),
    turnId: Type.Optional(Text(255)),
    /**
     * Facts naming what blocked or failed the command (for example the required, missing and
     * available skills). Names and counts only: bounded, and never values of secrets.
     */
    details: Type.Optional(
      Type.Record(
        Type.String({ maxLength: 64 }),
        Type.Union([
          Type.String({ maxLength: 512 }),
          Type.Integer({ minimum: -SAFE_INT_MAX, maximum: SAFE_INT_MAX }),
          Type.Boolean(),
          Type.Array(Type.String({ maxLength: 256 }), { maxItems: 200 }),
        ]),
        { maxProperties: 16 },
      ),
    ),
    steerDelivery: Type.Optional(
      Type.Object(
        {
          forwarded: Type.Boolean(),
          accepted: Type.Boolean(),
          targetTurnId: Type.Optional(Nullable(Text(255))),
          message: Type.Optional(Nullable(Text(4000, 0))),
        },
        { additionalProperties: false },
      ),
    ),
    /**
     * The runner's last events, stored in the transaction that records this status, before its
     * terminal_status event: a reader never sees the command terminal without them. The rules
     * of `POST /runs/:runId/events` apply (keys make a retried request a no-op).
     */
    events: Type.Optional(Type.Array(EventInput, { minItems: 1, maxItems: MAX_EVENTS_PER_APPEND })),
  },
  { additionalProperties: false },
);
export type CommandStatusBody = Static<typeof CommandStatusBody>;
