/**
 * The runner: the process inside a runner Job (src/main.ts). Its agent layer (driving
 * `codex app-server`) and runtime assembly are exported for tools and benchmarks.
 */
export * from './agent/index.js';
export * from './assembly/index.js';
export { loadRunnerConfig, type RunnerConfig } from './config.js';
