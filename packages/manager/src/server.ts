#!/usr/bin/env node
import { answerInfoFlags, ConfigError } from '@svc/contracts';
import { loadConfig } from './config.js';
import { startManager } from './manager.js';
import { DataDirLockedError } from './store/data-dir-lock.js';
import { MigrationError } from './store/migrate.js';

/** Entry point of `npm start` / `run-manager`: parse config once, start, stop on signals. */
async function main(): Promise<void> {
  const config = loadConfig();
  const manager = await startManager(config);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    manager.logger.info({ signal }, 'shutting down');
    // SIGTERM (a rolling restart, a node drain) drains first; SIGINT (a terminal) closes now.
    (signal === 'SIGTERM' ? manager.drain() : manager.close()).then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
}

const USAGE = `
usage: run-manager [--help | --version]

The run manager: REST API, web console, scheduler and runner launcher of the agent run service.
It takes no arguments; it is configured by its environment, among others:
  DATABASE_URL        PostgreSQL (without it: an embedded store under SVC_DATA_DIR)
  HOST, PORT          where to listen (default 127.0.0.1:8080)
  SVC_API_KEY_FILE    the API key clients present
  SVC_DEPLOYMENT_MODE local (default) or runtime
Overload (docs/operations.md, "Overload"):
  SVC_ADMISSION       on (default) or off
  SVC_ADMISSION_QUEUE_MS
                      queue-time budget of runner and client calls (default 100); a call
                      that would wait longer is answered 503 overloaded with Retry-After
  SVC_ADMISSION_RUNNER_PLACES, SVC_ADMISSION_CLIENT_PLACES
                      calls in progress at once (default 128, 64)
  SVC_DB_LEASE_POOL_SIZE
                      connections of lease renewals and claims (default 2)
  SVC_WRITE_GROUPS    coalesced appends and renewals in flight (default 2; 0: off)
See README.md and docs/operations.md for every variable.

Exit codes: 0 stopped cleanly · 1 a failure · 2 bad configuration · 3 a migration failed ·
4 the data directory is in use by another manager.`;

// Answered before anything is read or started: `run-manager --help` never opens a port.
if (
  !answerInfoFlags(process.argv.slice(2), {
    name: 'run-manager',
    usage: USAGE,
    packageJson: new URL('../package.json', import.meta.url),
  })
)
  main().catch((error: unknown) => {
    if (error instanceof ConfigError) {
      console.error(`run-manager: ${error.message}`);
      process.exit(2);
    }
    if (error instanceof MigrationError) {
      console.error(`run-manager: ${error.message}; the service did not start`);
      process.exit(3);
    }
    if (error instanceof DataDirLockedError) {
      console.error(`run-manager: ${error.message}`);
      process.exit(4);
    }
    console.error('run-manager: failed to start:', error instanceof Error ? error.message : error);
    process.exit(1);
  });
