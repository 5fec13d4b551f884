export { loadConfig, type ManagerConfig, type PolicyLimits } from './config.js';
export { startManager, type RunningManager, type StartOptions } from './manager.js';
export { buildApp, type AppDeps } from './app.js';
export { openStore, type Store, type StoreConfig } from './store/db.js';
export { migrateToLatest, migrationState, MigrationError } from './store/migrate.js';
export { LocalSecretStore } from './secrets/local-store.js';
export type { SecretStore, StoredSecret, SecretMeta } from './secrets/store.js';
export { createLogger } from './logging.js';
