#!/usr/bin/env node
import { answerInfoFlags, ConfigError } from '@svc/contracts';
import { loadConfig } from './config.js';
import { startManager } from './manager.js';
import { PortInUseError } from './port-check.js';
import { USAGE } from './usage.js';
import { DataDirLockedError } from './store/data-dir-lock.js';
import { MigrationError } from './store/migrate.js';

/** Entry point of `npm start` / `run-manager`: parse config once, start, stop on signals. */
async function main(): Promise<void> {
  const config = loadConfig();
  // A person at a terminal sees each slow step and where to go; a log collector (no terminal)
  // gets the JSON log lines alone.
  const progress = process.stderr.isTTY
    ? (step: string) => process.stderr.write(`run-manager: ${step}\n`)
    : undefined;
  const manager = await startManager(config, progress ? { progress } : {});
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
    if (error instanceof PortInUseError) {
      console.error(`run-manager: ${error.message}`);
      process.exit(5);
    }
    console.error('run-manager: failed to start:', error instanceof Error ? error.message : error);
    process.exit(1);
  });
