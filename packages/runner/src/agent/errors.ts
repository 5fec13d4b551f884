import type { OutcomeFailureKind } from '@svc/contracts';

/**
 * Errors of the agent layer. `kind` is stable and says what went wrong at this layer;
 * `failureKind` is the outcome kind the runner reports for it (a registered kind).
 */
export const AGENT_ERROR_KINDS = {
  /** The binary is missing or could not be started. */
  'spawn-failed': 'infra-failed',
  /** CODEX_HOME, workspace or config not usable. */
  'setup-failed': 'infra-failed',
  /** The agent process is gone: pending requests fail, new sends are refused. */
  'agent-exited': 'backend-failed',
  /** A request got no reply within its timeout. */
  'request-timeout': 'backend-failed',
  /** The agent answered a request with a JSON-RPC error. */
  'rpc-error': 'backend-failed',
  /** Unparseable or oversized output from the agent. */
  'protocol-error': 'backend-failed',
  /** The rollout of the thread does not exist (evicted or never written). */
  'rollout-not-found': 'thread-resume-failed',
  /** Any other resume failure; never answered by starting a new thread. */
  'thread-resume-failed': 'thread-resume-failed',
  /** A turn is already running on the thread (turn/start would steer it instead). */
  'turn-active': 'backend-failed',
  /** An invalid option or config handed to this layer. */
  'invalid-config': 'schema-invalid',
} as const satisfies Record<string, OutcomeFailureKind>;

export type AgentErrorKind = keyof typeof AGENT_ERROR_KINDS;

export class AgentError extends Error {
  readonly kind: AgentErrorKind;
  /** JSON-RPC error code when the agent answered with an error. */
  readonly rpcCode: number | undefined;

  constructor(
    kind: AgentErrorKind,
    message: string,
    options: { cause?: unknown; rpcCode?: number } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AgentError';
    this.kind = kind;
    this.rpcCode = options.rpcCode;
  }

  /**
   * The outcome kind to report. `rollout-not-found` becomes `session-store-evicted` only when
   * the rollouts live on a session volume (spec/2, "Thread start and resume").
   */
  failureKind(options: { sessionVolume?: boolean } = {}): OutcomeFailureKind {
    if (this.kind === 'rollout-not-found' && options.sessionVolume) return 'session-store-evicted';
    return AGENT_ERROR_KINDS[this.kind];
  }
}

export function isAgentError(value: unknown): value is AgentError {
  return value instanceof AgentError;
}
