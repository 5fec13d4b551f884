import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import pg from 'pg';

/**
 * Where tests keep their data: a fresh PostgreSQL database per test file (copied from a migrated
 * template, so files do not pay for migrations), or an embedded PGlite directory when no server
 * is reachable.
 */
export type TestStore =
  | { kind: 'postgres'; url: string; name: string; drop(): Promise<void> }
  | { kind: 'pglite'; dataDir: string; drop(): Promise<void> };

const DEFAULT_SERVER = 'postgres://postgres@127.0.0.1:5432/postgres';

let serverProbe: Promise<string | null> | undefined;

/** The server named by TEST_DATABASE_URL, else the local one when it answers, else null. */
export function testServerUrl(): Promise<string | null> {
  serverProbe ??= probe();
  return serverProbe;
}

async function probe(): Promise<string | null> {
  const explicit = process.env['TEST_DATABASE_URL'];
  if (!explicit) return (await unreachable(DEFAULT_SERVER)) === undefined ? DEFAULT_SERVER : null;
  // A named server must answer; a loaded machine may take seconds to accept a connection, so
  // it gets several tries before the run gives up on it.
  let last = await unreachable(explicit);
  for (let retry = 0; retry < 5 && last !== undefined; retry += 1) {
    await sleep(1000);
    last = await unreachable(explicit);
  }
  if (last === undefined) return explicit;
  throw new Error(`TEST_DATABASE_URL is set but unreachable: ${String(last)}`);
}

/** Why the server at `url` does not answer, or undefined when it does. */
async function unreachable(url: string): Promise<Error | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.query('select 1');
    return undefined;
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  } finally {
    await client.end().catch(() => undefined);
  }
}

export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

async function admin<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export interface TemplateSpec {
  /** Changes whenever the schema changes (for example a hash of the migration names). */
  key: string;
  /** Bring an empty database at `url` to the template state; must close its connections. */
  prepare(url: string): Promise<void>;
}

/** A fresh store for one test file. Call `drop()` in `after`. */
export async function createTestStore(template: TemplateSpec): Promise<TestStore> {
  const server = await testServerUrl();
  if (!server) {
    const dataDir = await mkdtemp(join(tmpdir(), 'svc-pglite-'));
    return { kind: 'pglite', dataDir, drop: () => rm(dataDir, { recursive: true, force: true }) };
  }
  const templateName = `svc_tpl_${template.key.slice(0, 16)}`;
  await ensureTemplate(server, templateName, template);
  const name = `svc_t_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  await admin(server, async (client) => {
    for (let attempt = 0; ; attempt++) {
      try {
        await client.query(`CREATE DATABASE ${name} TEMPLATE ${templateName}`);
        return;
      } catch (error) {
        // Another file may be copying the same template this instant; PostgreSQL refuses then.
        if (attempt > 20 || !/being accessed by other users/.test(String(error))) throw error;
        await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
      }
    }
  });
  return {
    kind: 'postgres',
    url: withDatabase(server, name),
    name,
    drop: () =>
      admin(server, async (client) => {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      }),
  };
}

async function ensureTemplate(
  server: string,
  templateName: string,
  template: TemplateSpec,
): Promise<void> {
  await admin(server, async (client) => {
    await client.query(`SELECT pg_advisory_lock(hashtext('svc-test-template'))`);
    try {
      const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [
        templateName,
      ]);
      if (exists.rowCount) return;
      // Build under a temporary name and rename when complete, so a crash never leaves a
      // half-migrated template behind.
      const building = `${templateName}_building`;
      await client.query(`DROP DATABASE IF EXISTS ${building} WITH (FORCE)`);
      await client.query(`CREATE DATABASE ${building}`);
      await template.prepare(withDatabase(server, building));
      await client.query(`ALTER DATABASE ${building} RENAME TO ${templateName}`);
    } finally {
      await client.query(`SELECT pg_advisory_unlock(hashtext('svc-test-template'))`);
    }
  });
}

/** Whether tests that need several real connections (lease races, crashes) can run. */
export async function realPostgresAvailable(): Promise<boolean> {
  return (await testServerUrl()) !== null;
}
