import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { Migrator } from 'kysely/migration';
import pg from 'pg';
import { realPostgresAvailable, testServerUrl, withDatabase } from '@svc/testkit';
import { migrationProvider, MIGRATION_NAMES } from '../src/store/migrations/index.js';

const skip = (await realPostgresAvailable()) ? false : 'needs PostgreSQL (a database of its own)';

/**
 * What a migration may change, as text that compares equal exactly when the schema is the same:
 * columns with their types, defaults and nullability; constraints; indexes; functions with
 * their whole definitions; triggers. The migration ledger is left out.
 */
async function catalog(db: Kysely<any>): Promise<string[]> {
  const { rows } = await sql<{ item: string }>`
    SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' null=' ||
      is_nullable || ' default=' || coalesce(column_default, '-') AS item
    FROM information_schema.columns
    WHERE table_schema = 'public' AND table_name NOT LIKE 'kysely_migration%'
    UNION ALL
    SELECT 'constraint ' || conrelid::regclass || '.' || conname || ' ' || pg_get_constraintdef(oid)
    FROM pg_constraint WHERE connamespace = 'public'::regnamespace
      AND conrelid::regclass::text NOT LIKE 'kysely_migration%'
    UNION ALL
    SELECT 'index ' || indexdef FROM pg_indexes
    WHERE schemaname = 'public' AND tablename NOT LIKE 'kysely_migration%'
    UNION ALL
    SELECT 'function ' || pg_get_functiondef(p.oid)
    FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
    UNION ALL
    SELECT 'trigger ' || pg_get_triggerdef(t.oid)
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal
    ORDER BY 1`.execute(db);
  return rows.map((r) => r.item);
}

describe('migrations that can be rolled back', { skip }, () => {
  const name = `svc_t_down_${randomBytes(4).toString('hex')}`;
  let server: string;
  let db: Kysely<any>;
  let migrator: Migrator;

  before(async () => {
    server = (await testServerUrl())!;
    const admin = new pg.Client({ connectionString: server });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    db = new Kysely<any>({
      dialect: new PostgresDialect({
        pool: new pg.Pool({ connectionString: withDatabase(server, name), max: 2 }),
      }),
    });
    migrator = new Migrator({ db, provider: migrationProvider, allowUnorderedMigrations: true });
  });

  after(async () => {
    await db?.destroy();
    const admin = new pg.Client({ connectionString: server });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  });

  it('restore exactly the schema they started from, and apply again to the same schema', async () => {
    const migrations = await migrationProvider.getMigrations();
    const reversible = MIGRATION_NAMES.filter((m) => migrations[m]!.down !== undefined);
    assert.ok(reversible.length > 0, 'some migration has a down');
    for (const migration of reversible) {
      const previous = MIGRATION_NAMES[MIGRATION_NAMES.indexOf(migration) - 1]!;
      const toPrevious = await migrator.migrateTo(previous);
      assert.equal(toPrevious.error, undefined, `up to ${previous}: ${String(toPrevious.error)}`);
      const before = await catalog(db);

      const up = await migrator.migrateUp();
      assert.equal(up.error, undefined, `${migration} up: ${String(up.error)}`);
      assert.deepEqual(
        up.results?.map((r) => r.migrationName),
        [migration],
      );
      const applied = await catalog(db);
      assert.notDeepEqual(applied, before, `${migration} changes the schema`);

      const down = await migrator.migrateDown();
      assert.equal(down.error, undefined, `${migration} down: ${String(down.error)}`);
      assert.deepEqual(
        await catalog(db),
        before,
        `${migration} down restores the schema before it`,
      );

      const again = await migrator.migrateUp();
      assert.equal(again.error, undefined, `${migration} up again: ${String(again.error)}`);
      assert.deepEqual(await catalog(db), applied, `${migration} applies again to the same schema`);
    }
    const latest = await migrator.migrateToLatest();
    assert.equal(latest.error, undefined, String(latest.error));
  });
});
