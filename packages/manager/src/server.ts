#!/usr/bin/env node
import { ConfigError } from '@svc/contracts';
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
