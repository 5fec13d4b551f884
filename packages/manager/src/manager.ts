import { join } from 'node:path';
import type { DestinationStream } from 'pino';
import { connectionStringPassword, Redactor } from '@svc/contracts';
import { buildApp, type BuiltApp } from './app.js';
import type { ManagerConfig } from './config.js';
import { createLogger, type Logger } from './logging.js';
import { Maintenance } from './maintenance.js';
import { LocalSecretStore } from './secrets/local-store.js';
import type { SecretStore } from './secrets/store.js';
import { expireDue } from './store/commands.js';
import { openStore, type Store } from './store/db.js';
import { migrateToLatest } from './store/migrate.js';

export interface RunningManager extends BuiltApp {
  url: string;
  store: Store;
  logger: Logger;
  redactor: Redactor;
  secrets: SecretStore;
  maintenance: Maintenance;
  close(): Promise<void>;
}

export interface StartOptions {
  logDestination?: DestinationStream;
  /** Listen on HOST:PORT (default true); tests using inject may skip it. */
  listen?: boolean;
}

/**
 * Open the store, apply migrations (before anything is served: a failed migration throws and
 * nothing listens), assemble the app and listen.
 */
export async function startManager(
  config: ManagerConfig,
  options: StartOptions = {},
): Promise<RunningManager> {
  const redactor = new Redactor()
    .add(config.apiKey)
    .add(config.store.kind === 'postgres' ? connectionStringPassword(config.store.url) : undefined);
  const logger = createLogger({
    level: config.logLevel,
    redactor,
    ...(options.logDestination ? { destination: options.logDestination } : {}),
  });
  const store = await openStore(config.store, logger);
  try {
    const migrations = await migrateToLatest(store.db);
    logger.info(
      { store: store.kind, applied: migrations.applied.length, latest: migrations.latest },
      'store ready',
    );
  } catch (error) {
    await store.close();
    throw error;
  }
  const secrets = new LocalSecretStore(join(config.dataDir, 'secrets'));
  const built = await buildApp({ config, store, logger, redactor, secrets });

  const maintenance = new Maintenance(config.maintenanceIntervalMs, logger);
  maintenance.add({ name: 'command-expiry', run: () => expireDue(store.db) });
  maintenance.start();

  let url = '';
  if (options.listen !== false) {
    url = await built.app.listen({ host: config.host, port: config.port });
    logger.info({ url }, 'run manager listening');
  }
  let closing: Promise<void> | undefined;
  return {
    ...built,
    url,
    store,
    logger,
    redactor,
    secrets,
    maintenance,
    close: () =>
      (closing ??= (async () => {
        await maintenance.stop();
        await built.app.close();
        await store.close();
      })()),
  };
}
