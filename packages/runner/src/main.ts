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
and streams its events back. It takes no arguments; the manager's launcher sets its environment
for each runner Job (docs/operations.md). It reads:

  SVC_MANAGER_URL, SVC_RUN_ID        the manager and the run to serve
  SVC_API_KEY_FILE                   file holding the runner token
  SVC_RUNNER_ID, SVC_ATTEMPT_ID, SVC_RUNNER_JOB_ID, SVC_JOB_NAME   who this runner is
  SVC_JOB_DIR                        the job directory (default: the working directory); the
                                     runner leaves its exit code there in exit-status.json
  SVC_SECRET_DIR, SVC_PROFILE, SVC_PROFILE_DIR   the provider profile's mounted Secret
  SVC_TOOL_CREDENTIALS               JSON: tool credentials and how they are projected
  SVC_BUNDLE_CREDENTIAL_DIR          credential for fetching resource bundles
  SVC_WORKSPACE_DIR, SVC_AGENT_HOME, SVC_RUNNER_HOME, HOME   where the work and homes live
  SVC_SESSION_ID, SVC_SESSION_PVC_NAME, SVC_SESSION_PVC_NAMESPACE, SVC_SESSION_PVC_MOUNT_PATH,
  SVC_AGENT_ROLLOUT_SUBDIR           the session volume and where the agent keeps its rollouts
  SVC_RUNNER_IDLE_EXIT_MS            close the run after this long without work (120000)
  SVC_RUNNER_SINGLE_TURN             true: close the run after its one turn (a queue task's run)
  SVC_CODEX_BIN                      the agent binary (default: the installed @openai/codex)
  SVC_IMAGE, SVC_IMAGE_SUMMARY       the runner image and what it declares
  SVC_REQUIRED_TOOLS, SVC_SERVICE_TOOLS_DIR, SVC_WORK_READY_CACHE   tools checked before work
  LOG_LEVEL, LOG_FORMAT              log level (info) and format (pretty on a terminal, else json)

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
