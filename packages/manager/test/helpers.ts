import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { sha256Hex } from '@svc/contracts';
import { createTestStore, type TestStore } from '@svc/testkit';
import { loadConfig, startManager, type RunningManager, type StartOptions } from '../src/index.js';
import { migrateToLatest } from '../src/store/migrate.js';

const MIGRATIONS_DIR = join(import.meta.dirname, '../src/store/migrations');
import { openStore, type Db } from '../src/store/db.js';
import { sql } from 'kysely';
import { createLogger } from '../src/logging.js';
import { Redactor } from '@svc/contracts';

/** Prepare the per-file database template: an empty database brought to the latest schema. */
export const managerTemplate = {
  // The migration sources themselves: editing one rebuilds the template.
  key: sha256Hex(
    readdirSync(MIGRATIONS_DIR)
      .sort()
      .map((f) => readFileSync(join(MIGRATIONS_DIR, f), 'utf8'))
      .join('\n'),
  ),
  async prepare(url: string) {
    const logger = createLogger({ level: 'silent', redactor: new Redactor() });
    const store = await openStore({ kind: 'postgres', url, poolSize: 2 }, logger);
    try {
      await migrateToLatest(store.db);
    } finally {
      await store.close();
    }
  },
};

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  raw: string;
  headers: Record<string, unknown>;
}

export interface TestManager {
  manager: RunningManager;
  store: TestStore;
  dataDir: string;
  logs: string[];
  api<T = any>(
    method: string,
    url: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<ApiResponse<T>>;
  configureProfile(profile: string, extra?: Record<string, string>): Promise<void>;
  close(): Promise<void>;
}

export interface TestManagerOptions {
  env?: Record<string, string>;
  listen?: boolean;
  /** Reuse a store (e.g. a restart over the same database). */
  store?: TestStore;
  dataDir?: string;
  edges?: StartOptions['edges'];
}

/** A manager on a fresh database, its logs captured, driven through real HTTP handling. */
export async function startTestManager(options: TestManagerOptions = {}): Promise<TestManager> {
  const store = options.store ?? (await createTestStore(managerTemplate));
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), 'svc-manager-')));
  const env: Record<string, string> = {
    SVC_DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
    HOST: '127.0.0.1',
    PORT: '0',
    SVC_MAINTENANCE_INTERVAL_MS: '60000',
    // Tests drive the queue by hand unless they turn the scheduler on.
    SVC_SCHEDULER: 'off',
    ...(store.kind === 'postgres' ? { DATABASE_URL: store.url } : { SVC_DATA_DIR: store.dataDir }),
    ...options.env,
  };
  if (store.kind === 'pglite') env['SVC_DATA_DIR'] = store.dataDir;
  const logs: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs.push(chunk.toString());
      done();
    },
  });
  const manager = await startManager(loadConfig(env), {
    logDestination: destination,
    listen: options.listen ?? false,
    ...(options.edges ? { edges: options.edges } : {}),
  });
  const key = env['SVC_API_KEY'];
  return {
    manager,
    store,
    dataDir,
    logs,
    async api(method, url, body, headers = {}) {
      const response = await manager.app.inject({
        method: method as 'GET',
        url,
        headers: {
          ...(key ? { authorization: `Bearer ${key}` } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...headers,
        },
        ...(body !== undefined
          ? { payload: typeof body === 'string' ? body : JSON.stringify(body) }
          : {}),
      });
      const raw = response.body;
      if (response.statusCode >= 500) {
        // Surface the server-side cause next to the failing assertion.
        const errors = logs.filter((l) => l.includes('"level":50')).slice(-2);
        console.error(`server error on ${method} ${url}:\n${errors.join('\n').slice(0, 4000)}`);
      }
      let parsed: unknown = undefined;
      try {
        parsed = raw ? JSON.parse(raw) : undefined;
      } catch {
        parsed = raw;
      }
      return { status: response.statusCode, body: parsed as never, raw, headers: response.headers };
    },
    async configureProfile(profile, extra = {}) {
      await manager.secrets.put(`svc-v01-provider-${profile}`, {
        'auth.json': Buffer.from(
          JSON.stringify({ OPENAI_API_KEY: 'sk-test-profile-key', auth_mode: 'apikey' }),
        ),
        'config.toml': Buffer.from('model = "test-model"\n'),
        ...Object.fromEntries(Object.entries(extra).map(([k, v]) => [k, Buffer.from(v)])),
      });
    },
    async close() {
      await manager.close();
      if (!options.store) await store.drop();
      // Processes of the run may still be unwinding files: retry the removal briefly.
      if (!options.dataDir)
        await rm(dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
    },
  };
}

/** A minimal valid run body; override fields per test. */
export function runBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    tenantId: 'tenant-a',
    projectId: 'proj-1',
    workspaceRef: { kind: 'opaque' },
    providerId: 'openai',
    backendProfile: 'builtin-a',
    traceSink: null,
    ...overrides,
  };
}

/** The run base of a test session: opaque workspace, default provider. */
export const SESSION_RUN_BASE = {
  tenantId: 'tenant-a',
  projectId: 'proj-1',
  workspaceRef: { kind: 'opaque' },
  providerId: 'openai',
};

/** A session on builtin-a; `extra` replaces top-level fields (profile, runBase, …). */
export async function createSession(
  t: TestManager,
  extra: Record<string, unknown> = {},
): Promise<any> {
  const created = await t.api('POST', '/api/v1/sessions', {
    backendProfile: 'builtin-a',
    runBase: SESSION_RUN_BASE,
    ...extra,
  });
  assert.equal(created.status, 201, created.raw);
  return created.body;
}

/** A runner speaking the runner-facing API, as a runner process would. */
export class TestRunner {
  /** The lease token of this runner's last granted claim (sent as `x-lease-token`). */
  leaseToken: string | null = null;

  constructor(
    private readonly t: TestManager,
    readonly runnerId: string,
    readonly runId: string,
  ) {}

  private fenced(): Record<string, string> {
    return this.leaseToken ? { 'x-lease-token': this.leaseToken } : {};
  }

  async claim(mode: 'ordinary' | 'replacement' = 'ordinary') {
    const response = await this.t.api('POST', `/api/v1/runs/${this.runId}/claim`, {
      runnerId: this.runnerId,
      mode,
    });
    if (response.status === 200)
      this.leaseToken = (response.body as { leaseToken: string }).leaseToken;
    return response;
  }
  heartbeat(extra: Record<string, unknown> = {}) {
    return this.t.api(
      'PATCH',
      `/api/v1/runs/${this.runId}/lease`,
      { runnerId: this.runnerId, ...extra },
      this.fenced(),
    );
  }
  poll(afterSeq = 0, waitMs = 0) {
    return this.t.api(
      'GET',
      `/api/v1/runs/${this.runId}/commands?afterSeq=${afterSeq}&runnerId=${this.runnerId}&waitMs=${waitMs}`,
      undefined,
      this.fenced(),
    );
  }
  ack(commandId: string) {
    return this.t.api(
      'POST',
      `/api/v1/commands/${commandId}/ack`,
      { runnerId: this.runnerId },
      this.fenced(),
    );
  }
  append(events: unknown[]) {
    return this.t.api(
      'POST',
      `/api/v1/runs/${this.runId}/events`,
      { runnerId: this.runnerId, events },
      this.fenced(),
    );
  }
  finish(commandId: string, state: string, extra: Record<string, unknown> = {}) {
    return this.t.api(
      'PATCH',
      `/api/v1/commands/${commandId}/status`,
      { runnerId: this.runnerId, state, ...extra },
      this.fenced(),
    );
  }
  refreshStorage(sessionId: string, summary: Record<string, unknown>) {
    return this.t.api(
      'POST',
      `/api/v1/sessions/${sessionId}/storage/refresh`,
      { runnerId: this.runnerId, ...summary },
      this.fenced(),
    );
  }
  runStatus(state: string, extra: Record<string, unknown> = {}) {
    return this.t.api(
      'PATCH',
      `/api/v1/runs/${this.runId}/status`,
      { runnerId: this.runnerId, state, ...extra },
      this.fenced(),
    );
  }
}

/**
 * A row trigger planted at the database's edge (a fault or a delay that an operator's
 * constraint or a slow disk could cause): `body` is the PL/pgSQL between BEGIN and END, and
 * must RETURN NEW. Returns its removal.
 */
export async function plantTrigger(
  db: Db,
  trigger: { name: string; before: 'INSERT' | 'UPDATE'; table: string; body: string },
): Promise<() => Promise<void>> {
  const name = sql.raw(trigger.name);
  const table = sql.raw(trigger.table);
  await sql`
    CREATE OR REPLACE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN ${sql.raw(trigger.body)} END $$`.execute(db);
  await sql`
    CREATE TRIGGER ${name} BEFORE ${sql.raw(trigger.before)} ON ${table}
    FOR EACH ROW EXECUTE FUNCTION ${name}()`.execute(db);
  return async () => {
    await sql`DROP TRIGGER ${name} ON ${table}`.execute(db);
  };
}
