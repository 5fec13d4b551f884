import { Type, type Static } from '@sinclair/typebox';
import { JsonObject, Nullable, Text, Timestamp, StringEnum } from './common.js';

export const EVENT_CATEGORIES = [
  'system',
  'assistant_message',
  'tool_call',
  'command_output',
  'diff',
  'error',
  'backend_status',
  'terminal_status',
] as const;
export type EventCategory = (typeof EVENT_CATEGORIES)[number];

/** Named events the service itself relies on (the name is free text otherwise). */
export const EVENT_NAMES = {
  claimWaiting: 'runner.claim.waiting',
  claimRecovered: 'runner.claim.recovered',
  claimed: 'runner.claimed',
  runnerStartup: 'runner.startup',
  bundleMaterialized: 'resource-bundle-materialized',
  rolloutStorageMounted: 'agent-rollout-storage-mounted',
  assembly: 'runtime-assembly',
  cancelRequested: 'cancel.requested',
  stdioInactive: 'agent.stdio-inactive',
  transportClosed: 'agent.transport-closed',
  turnStarted: 'turn.started',
  idleTimeout: 'turn.idle-timeout',
  /** The manager: a runner's Job ended while it held the lease, which is released. */
  runnerLost: 'runner.lost',
  /** The runner's calls were refused for load or went unanswered for a while (docs/operations.md). */
  throttled: 'runner.throttled',
} as const;

export const EventEnvelope = Type.Object(
  {
    eventId: Type.String(),
    runId: Type.String(),
    seq: Type.Integer(),
    commandId: Nullable(Type.String()),
    category: StringEnum(EVENT_CATEGORIES),
    name: Nullable(Type.String()),
    observedAt: Timestamp,
    data: JsonObject,
  },
  { $id: 'EventEnvelope' },
);
export type EventEnvelope = Static<typeof EventEnvelope>;

export const EventInput = Type.Object(
  {
    /** Runner-chosen key, unique per run: a retried append with the same key is a no-op. */
    key: Type.String({ minLength: 1, maxLength: 200, pattern: '^[\\x21-\\x7e]+$' }),
    commandId: Type.Optional(Nullable(Type.String({ maxLength: 100, pattern: '^[a-z0-9-]+$' }))),
    category: StringEnum(EVENT_CATEGORIES),
    name: Type.Optional(Nullable(Text(200))),
    observedAt: Type.Optional(Type.String({ format: 'date-time' })),
    data: Type.Optional(JsonObject),
  },
  { additionalProperties: false },
);
export type EventInput = Static<typeof EventInput>;

export const MAX_EVENTS_PER_APPEND = 1000;

export const EventAppendBody = Type.Object(
  {
    runnerId: Text(100),
    events: Type.Array(EventInput, { minItems: 1, maxItems: MAX_EVENTS_PER_APPEND }),
  },
  { additionalProperties: false },
);
export type EventAppendBody = Static<typeof EventAppendBody>;

export const EventAppendResponse = Type.Object({
  runId: Type.String(),
  appended: Type.Integer(),
  duplicates: Type.Integer(),
  lastSeq: Type.Integer(),
  events: Type.Array(
    Type.Object({
      key: Type.String(),
      seq: Type.Integer(),
      eventId: Type.String(),
      duplicate: Type.Boolean(),
    }),
  ),
});
export type EventAppendResponse = Static<typeof EventAppendResponse>;

export const EventPage = Type.Object({
  runId: Type.String(),
  events: Type.Array(EventEnvelope),
  lastSeq: Type.Integer(),
  nextAfterSeq: Nullable(Type.Integer()),
  hasMore: Type.Boolean(),
});
export type EventPage = Static<typeof EventPage>;

export const EVENTS_PAGE_DEFAULT = 100;
export const EVENTS_PAGE_MAX = 1000;
