/**
 * The agent layer of the runner: everything between "a prompt to run on a thread" and "a
 * stream of normalized, bounded events plus a classified outcome", over the real
 * `codex app-server` (JSON-RPC on stdio).
 */
export { CodexAgent } from './session.js';
export type { CodexAgentOptions, StartThreadOptions, ThreadResult, TurnHandle } from './session.js';
export type { TurnHandlers, TurnOptions, TurnOutcome, SteerResult } from './turn.js';
export { CodexProcess, agentEnvironment, DEFAULT_CLIENT_INFO } from './codex-process.js';
export type { CodexProcessOptions, ExitInfo, ShutdownOptions } from './codex-process.js';
export { resolveCodexBinary } from './codex-binary.js';
export { JsonRpcClient } from './jsonrpc.js';
export type {
  JsonRpcId,
  JsonRpcNotification,
  JsonRpcOptions,
  JsonRpcServerRequest,
} from './jsonrpc.js';
export {
  renderRunnerConfig,
  mergeRunnerConfig,
  renderAuthJson,
  RUNNER_DEFAULTS,
} from './config.js';
export type {
  MergeResult,
  ProviderAuth,
  ProviderSettings,
  RunnerConfigOptions,
  RunnerSettings,
} from './config.js';
export { TurnEventMapper } from './events.js';
export type { AgentEvent, EventMapperOptions } from './events.js';
export { ASSISTANT_LIMITS } from './assistant-messages.js';
export { TOOL_LIMITS } from './tool-events.js';
export { classifyAgentError, httpStatusOf, isRolloutNotFound } from './classify.js';
export type { AgentFailure, AgentErrorReport, FailureClassification } from './classify.js';
export { AgentError, AGENT_ERROR_KINDS, isAgentError } from './errors.js';
export type { AgentErrorKind } from './errors.js';
export { killProcessTree, descendantsOf } from './process-tree.js';
export { ByteRing, headBytes, headTailBytes, splitBytes } from './bounded.js';
export type { ApprovalPolicy, SandboxMode, ThreadInfo, TurnStatus } from './protocol.js';
