import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import {
  createTestStore,
  ensureTestTag,
  freePort,
  waitForHttp,
  waitForNoTaggedProcesses,
  type TestStore,
} from '@svc/testkit';
import { LocalSecretStore } from '../src/index.js';
import { managerTemplate, runBody } from './helpers.js';
import { waitFor } from './e2e-helpers.js';

/**
 * A manager in its own process (`dist/server.js`), as `npm start` runs it: its environment,
 * command line and pid are its own, so a test can plant secrets there and probe for them from
 * inside a run. Driven over real HTTP with its API key.
 */
export interface ManagerProcess {
  base: string;
  pid: number;
  dataDir: string;
  store: TestStore;
  /** The password in its DATABASE_URL, if any. */
  databasePassword: string | null;
  /** stdout and stderr so far (JSON log lines). */
  output(): string;
  api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  close(): Promise<void>;
}

const SERVER = join(import.meta.dirname, '../dist/server.js');

export async function startManagerProcess(
  env: Record<string, string>,
  options: { store?: TestStore; dbPassword?: string } = {},
): Promise<ManagerProcess> {
  const store = options.store ?? (await createTestStore(managerTemplate));
  let databaseUrl = store.kind === 'postgres' ? store.url : null;
  // A password planted in DATABASE_URL (the test server trusts loopback: it is not checked).
  if (databaseUrl && options.dbPassword) {
    const url = new URL(databaseUrl);
    if (!url.password) url.password = options.dbPassword;
    databaseUrl = url.toString();
  }
  const dataDir = await mkdtemp(join(tmpdir(), 'svc-mgrproc-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, [SERVER], {
    env: {
      ...process.env,
      ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
      SVC_DATA_DIR: store.kind === 'pglite' ? store.dataDir : dataDir,
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'info',
      LOG_FORMAT: 'json',
      SVC_SCHEDULER: 'off',
      SVC_RUNNER_IDLE_EXIT_MS: '3000',
      SVC_RUNNER_KILL_GRACE_MS: '1000',
      SVC_LEASE_TTL_MS: '6000',
      SVC_HEARTBEAT_INTERVAL_MS: '1000',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const key = env['SVC_API_KEY'];
  const close = async () => {
    child.kill('SIGINT');
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
    await rm(dataDir, { recursive: true, force: true });
    if (!options.store) await store.drop();
  };
  try {
    await waitForHttp(`${base}/health/readiness`, 30_000);
  } catch (error) {
    await close();
    throw new Error(`the manager did not start: ${output.slice(-2000)}`, { cause: error });
  }
  return {
    base,
    pid: child.pid!,
    dataDir: store.kind === 'pglite' ? store.dataDir : dataDir,
    store,
    databasePassword: databaseUrl
      ? decodeURIComponent(new URL(databaseUrl).password) || null
      : null,
    output: () => output,
    async api(method, path, body) {
      const response = await fetch(`${base}${path}`, {
        method,
        headers: {
          ...(key ? { authorization: `Bearer ${key}` } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      });
      const raw = await response.text();
      let parsed: unknown = raw;
      try {
        parsed = raw ? JSON.parse(raw) : undefined;
      } catch {
        // not JSON
      }
      return { status: response.status, body: parsed };
    },
    close,
  };
}

/** A profile written through the profile API, as a business backend does. */
export async function putProfile(
  m: ManagerProcess,
  profile: string,
  apiKey: string,
  baseUrl: string,
): Promise<void> {
  const res = await m.api('PUT', `/api/v1/provider-profiles/${profile}/credential`, {
    apiKey,
    config: { model: 'test-model', baseUrl },
    delegatedBy: { system: 'e2e-backend', requestId: `req-${profile}` },
  });
  assert.ok(res.status === 200 || res.status === 201, JSON.stringify(res.body));
}

/** A run with one turn and its runner job; returns the ids and the job. */
export async function dispatchTo(
  m: ManagerProcess,
  prompt: string,
  run: Record<string, unknown> = {},
): Promise<{ runId: string; commandId: string; job: any }> {
  const created = await m.api('POST', '/api/v1/runs', runBody(run));
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const runId = created.body.runId as string;
  const command = await m.api('POST', `/api/v1/runs/${runId}/commands`, {
    type: 'turn',
    payload: { prompt },
  });
  assert.equal(command.status, 201, JSON.stringify(command.body));
  const job = await m.api('POST', `/api/v1/runs/${runId}/runner-jobs`, {
    commandId: command.body.commandId,
  });
  assert.equal(job.status, 201, JSON.stringify(job.body));
  return { runId, commandId: command.body.commandId as string, job: job.body };
}

export async function commandDone(
  m: ManagerProcess,
  runId: string,
  commandId: string,
  timeoutMs = 90_000,
): Promise<any> {
  return waitFor(
    `command ${commandId} to end`,
    async () => {
      const c = (await m.api('GET', `/api/v1/runs/${runId}/commands/${commandId}`)).body;
      return ['completed', 'failed', 'blocked', 'cancelled', 'expired'].includes(c.state) && c;
    },
    timeoutMs,
  );
}

export async function eventsOf(m: ManagerProcess, runId: string): Promise<any[]> {
  return (await m.api('GET', `/api/v1/runs/${runId}/events?limit=1000`)).body.events;
}

/** A replica of a multi-manager test: one `dist/server.js` process on the shared database. */
export interface Replica {
  child: ChildProcess;
  port: number;
  url: string;
  exited: Promise<number | null>;
}

/**
 * Starts a replica without an API key (the tests call it as an open local service) and waits
 * until it is ready; `env` adds to or overrides the defaults (database, port, data dir).
 */
export async function startReplica(
  store: TestStore,
  dataDir: string,
  env: Record<string, string>,
): Promise<Replica> {
  assert.equal(store.kind, 'postgres');
  const port = await freePort();
  const full: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: store.kind === 'postgres' ? store.url : '',
    PORT: String(port),
    SVC_DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    ...env,
  };
  delete full['SVC_API_KEY'];
  const child = spawn(process.execPath, [SERVER], {
    env: full,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${url}/health/readiness`, 120_000);
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  return { child, port, url, exited };
}

/**
 * The replicas of one test file: one fresh database, one data directory whose local Secret
 * store both read (shared, as a cluster's is) with builtin-a configured. After the file every
 * replica is killed, the database dropped, and no process of the file may be left.
 */
export function useReplicas(prefix: string, env: Record<string, string>) {
  const tag = ensureTestTag();
  const replicas: Replica[] = [];
  let store: TestStore;
  let dir: string;
  before(async () => {
    store = await createTestStore(managerTemplate);
    dir = await mkdtemp(join(tmpdir(), `svc-${prefix}-`));
    await new LocalSecretStore(join(dir, 'secrets')).put('svc-v01-provider-builtin-a', {
      'auth.json': Buffer.from('{}'),
      'config.toml': Buffer.from(''),
    });
  });
  after(async () => {
    for (const r of replicas) if (r.child.exitCode === null) r.child.kill('SIGKILL');
    await store.drop();
    await rm(dir, { recursive: true, force: true });
    assert.deepEqual(await waitForNoTaggedProcesses(tag), []);
  });
  return {
    replicas,
    start: async (): Promise<Replica> => {
      const replica = await startReplica(store, dir, env);
      replicas.push(replica);
      return replica;
    },
  };
}
