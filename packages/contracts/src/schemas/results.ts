import { Type, type Static } from '@sinclair/typebox';
import { SteerDelivery } from './commands.js';
import { Nullable, SeqPosition, StringEnum } from './common.js';
import { Liveness } from './liveness.js';

export const TERMINAL_STATUSES = ['completed', 'failed', 'blocked', 'cancelled'] as const;
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

export const FinalResponse = Type.Object({
  text: Type.String(),
  seq: Type.Integer(),
  eventId: Type.String(),
  source: Type.String(),
  authority: StringEnum(['authoritative', 'fallback'] as const),
  replyAuthority: Type.Boolean(),
  final: Type.Boolean(),
  textTruncated: Type.Boolean(),
  outputTruncated: Type.Boolean(),
});
export type FinalResponse = Static<typeof FinalResponse>;

export const ToolCallSummary = Type.Object({
  count: Type.Integer(),
  statusCounts: Type.Record(Type.String(), Type.Integer()),
  exitCodeCounts: Type.Record(Type.String(), Type.Integer()),
  recent: Type.Array(
    Type.Object({
      seq: Type.Integer(),
      method: Nullable(Type.String()),
      toolName: Nullable(Type.String()),
      type: Nullable(Type.String()),
      status: Nullable(Type.String()),
      exitCode: Nullable(Type.Integer()),
      command: Nullable(Type.String()),
    }),
  ),
});
export type ToolCallSummary = Static<typeof ToolCallSummary>;

export const ArtifactSummary = Type.Object({
  outputEvents: Type.Integer(),
  outputBytes: Type.Integer(),
  keptBytes: Type.Integer(),
  truncatedOutputs: Type.Integer(),
  diffEvents: Type.Integer(),
  diffBytes: Type.Integer(),
  references: Type.Array(Type.String()),
});
export type ArtifactSummary = Static<typeof ArtifactSummary>;

export const CompletionEvidence = Type.Object({
  reason: Type.String(),
  terminalSeq: Nullable(Type.Integer()),
  continueWith: Nullable(
    Type.Object({ method: Type.String(), path: Type.String(), description: Type.String() }),
  ),
});
export type CompletionEvidence = Static<typeof CompletionEvidence>;

export const ResultEnvelope = Type.Object(
  {
    runId: Type.String(),
    commandId: Nullable(Type.String()),
    attemptId: Nullable(Type.String()),
    status: Type.String(),
    terminalStatus: Nullable(StringEnum(TERMINAL_STATUSES)),
    completed: Type.Boolean(),
    terminalSource: Type.Object({
      kind: StringEnum(['terminal-status-event', 'run-record', 'command-record', 'none'] as const),
      seq: Nullable(Type.Integer()),
      eventId: Nullable(Type.String()),
    }),
    reply: Nullable(Type.String()),
    finalResponse: Nullable(FinalResponse),
    finalResponseAuthority: StringEnum(['authoritative', 'fallback', 'missing'] as const),
    finalResponseFallback: Type.Boolean(),
    needsContinuation: Type.Boolean(),
    completionEvidence: CompletionEvidence,
    finalAssistantSeq: Nullable(Type.Integer()),
    finalAssistantSource: Nullable(Type.String()),
    finalAssistantTextTruncated: Type.Boolean(),
    finalAssistantOutputTruncated: Type.Boolean(),
    failureKind: Nullable(Type.String()),
    blocker: Nullable(
      Type.Object({
        failureKind: Type.String(),
        message: Type.String(),
        details: Type.Record(Type.String(), Type.Unknown()),
      }),
    ),
    lastSeq: Type.Integer(),
    eventCount: Type.Integer(),
    eventsCapped: Type.Boolean(),
    nextAfterSeq: Nullable(Type.Integer()),
    aggregationWindow: Type.Object({
      afterSeq: Type.Integer(),
      throughSeq: Type.Integer(),
      cap: Type.Integer(),
    }),
    scopedLastSeq: Type.Optional(Nullable(Type.Integer())),
    scopedEventCount: Type.Optional(Type.Integer()),
    artifactSummary: ArtifactSummary,
    toolCallSummary: ToolCallSummary,
    liveness: Liveness,
    steerDelivery: Type.Optional(SteerDelivery),
    threadId: Nullable(Type.String()),
  },
  { $id: 'ResultEnvelope' },
);
export type ResultEnvelope = Static<typeof ResultEnvelope>;

export const RESULT_AGGREGATION_CAP = 50_000;

/** How long a client may ask to wait for a change; the server may end a wait sooner. */
export const WaitMs = Type.Integer({
  minimum: 0,
  maximum: 300_000,
  description:
    'wait up to this many milliseconds for a change (capped by the server, default SVC_CLIENT_WAIT_MAX_MS 30,000)',
});

export const ResultQuery = Type.Object(
  {
    commandId: Type.Optional(Type.String({ maxLength: 100 })),
    afterSeq: Type.Optional(SeqPosition),
    /** Wait until the result is terminal, or this many milliseconds. */
    waitMs: Type.Optional(WaitMs),
  },
  { additionalProperties: false },
);
export type ResultQuery = Static<typeof ResultQuery>;

export const CommandResultQuery = Type.Object(
  { waitMs: Type.Optional(WaitMs) },
  { additionalProperties: false },
);
