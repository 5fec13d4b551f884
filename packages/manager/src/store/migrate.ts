import { Migrator } from 'kysely/migration';
import type { Db } from './db.js';
import { migrationProvider } from './migrations/index.js';

export interface MigrationState {
  applied: string[];
  pending: string[];
  latest: string | null;
  upToDate: boolean;
}

export class MigrationError extends Error {
  constructor(
    readonly migration: string | null,
    cause: unknown,
  ) {
    super(
      `schema migration ${migration ?? '(setup)'} failed: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
    this.name = 'MigrationError';
  }
}

function migrator(db: Db): Migrator {
  // Migration numbers are reserved per change and may land out of order: a store that already
  // ran a later number still takes an earlier one that arrives afterwards.
  return new Migrator({ db, provider: migrationProvider, allowUnorderedMigrations: true });
}

/**
 * Apply every pending migration. Kysely records each in its ledger table and holds an
 * advisory lock meanwhile, so replicas starting together migrate once.
 */
export async function migrateToLatest(db: Db): Promise<MigrationState> {
  const { error, results } = await migrator(db).migrateToLatest();
  if (error) {
    const failed = results?.find((r) => r.status === 'Error');
    throw new MigrationError(failed?.migrationName ?? null, error);
  }
  return migrationState(db);
}

export async function migrationState(db: Db): Promise<MigrationState> {
  const all = await migrator(db).getMigrations();
  const applied = all.filter((m) => m.executedAt !== undefined).map((m) => m.name);
  const pending = all.filter((m) => m.executedAt === undefined).map((m) => m.name);
  return { applied, pending, latest: applied.at(-1) ?? null, upToDate: pending.length === 0 };
}
