#!/usr/bin/env node
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { answerInfoFlags, ConfigError, EXIT_STATUS_FILE } from '@svc/contracts';
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
    exit(143);
  });
  try {
    return await runner.run();
  } catch (error) {
    log.error('runner failed', { err: error instanceof Error ? error.message : String(error) });
    return 1;
  }
}

const USAGE = `
usage: runner [--help | --version]

The runner of one run: claims it from the manager, drives the coding agent (codex app-server)
and streams its events back. It takes no arguments; it is configured by its environment
(SVC_MANAGER_URL, SVC_RUN_ID, SVC_PROFILE_DIR, SVC_WORKSPACE_DIR, …), which the manager's
launcher sets for each runner Job. It serves turns until idle for SVC_RUNNER_IDLE_EXIT_MS, or,
with SVC_RUNNER_SINGLE_TURN=true (a queue task's run), closes the run after its one turn.
As it exits it leaves its exit code in SVC_JOB_DIR/exit-status.json. See docs/operations.md.

Exit codes: 0 the run was served · 1 a failure · 2 bad configuration · 143 terminated.`;

// Answered before any configuration is read or process started.
if (
  !answerInfoFlags(process.argv.slice(2), {
    name: 'runner',
    usage: USAGE,
    packageJson: new URL('../package.json', import.meta.url),
  })
)
  main().then(exit, () => exit(1));

/**
 * Exit, leaving the code in the job directory first: a launcher that is not this process's
 * parent (a restarted manager that adopted the job) cannot wait for it, and reads it there.
 */
function exit(code: number): never {
  const jobDir = process.env['SVC_JOB_DIR'];
  if (jobDir) {
    try {
      writeFileSync(
        join(jobDir, EXIT_STATUS_FILE),
        JSON.stringify({ exitCode: code, at: new Date().toISOString() }),
      );
    } catch {
      // a read-only or vanished job directory: the launcher reports an unknown code
    }
  }
  process.exit(code);
}
