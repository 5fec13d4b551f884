/**
 * The runner: the process inside a runner Job (src/main.ts). Its agent layer (driving
 * `codex app-server`) and runtime assembly are exported for tools and benchmarks.
 */
export * from './agent/index.js';
export * from './assembly/index.js';
export { loadRunnerConfig, type RunnerConfig } from './config.js';
export { EventSink, SINK_MAX_BYTES, SINK_MAX_EVENTS, type NewRunnerEvent } from './event-sink.js';
export { ManagerClient } from './manager-client.js';
export { BACKOFF, backoffMs, retryable, withRetry, type CallKind } from './retry.js';
export { ThrottleLog, type ThrottledPeriod } from './throttling.js';
