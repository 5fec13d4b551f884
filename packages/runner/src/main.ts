#!/usr/bin/env node
import { ConfigError } from '@svc/contracts';
import { loadRunnerConfig } from './config.js';
import { Runner } from './runner.js';

/**
 * Entry point of a runner Job. Exit codes: 0 the run was served (idle exit, or the run had
 * already ended), 1 a failure (reported to the manager when it could be), 2 bad configuration.
 */
async function main(): Promise<number> {
  let config;
  try {
    config = loadRunnerConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`runner: ${error.message}`);
      return 2;
    }
    throw error;
  }
  const runner = new Runner(config);
  const log = runner.log;
  process.once('SIGTERM', () => {
    // The agent runs in its own process group: take it (and its shells) down with us.
    log.info('SIGTERM received');
    runner.terminate();
    process.exit(143);
  });
  try {
    return await runner.run();
  } catch (error) {
    log.error('runner failed', { err: error instanceof Error ? error.message : String(error) });
    return 1;
  }
}

main().then(
  (code) => process.exit(code),
  () => process.exit(1),
);
