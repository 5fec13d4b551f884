import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { createTestStore, type TestStore } from '@svc/testkit';
import { managerTemplate, startTestManager, type TestManager } from './helpers.js';
import { call } from './http-call.js';

/**
 * A runner that does what a real one does for a queue task, over the manager's real HTTP API
 * with its runner token: claim its run, take its turn, report it completed after a short while, close the run and
 * exit (its Job ends: the slot is free).
 */
const QUICK_RUNNER = `
import { readFileSync } from 'node:fs';
const env = process.env;
const base = env.SVC_MANAGER_URL;
const runnerId = env.SVC_RUNNER_ID;
// Its own runner token, as the runner reads it: the only credential a job has.
const token = readFileSync(env.SVC_SECRET_DIR + '/manager-token', 'utf8').trim();
const call = async (method, path, body, lease) => {
  const res = await fetch(base + path, {
    method,
    headers: {
      'content-type': 'application/json',
      authorization: 'Bearer ' + token,
      ...(lease ? { 'x-lease-token': lease } : {}),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(method + ' ' + path + ' ' + res.status + ' ' + text);
  return text ? JSON.parse(text) : undefined;
};
const claimed = await call('POST', '/api/v1/runs/' + env.SVC_RUN_ID + '/claim', { runnerId, mode: 'ordinary' });
const lease = claimed.leaseToken;
const page = await call('GET', '/api/v1/runs/' + env.SVC_RUN_ID + '/commands?afterSeq=0&runnerId=' + runnerId + '&waitMs=0', undefined, lease);
await call('POST', '/api/v1/commands/' + env.SVC_COMMAND_ID + '/ack', { runnerId }, lease);
const prompt = String(page.commands.find((c) => c.commandId === env.SVC_COMMAND_ID)?.payload?.prompt ?? '');
// A task whose prompt says slow keeps its turn a while (a slot held long enough to look at).
const ms = prompt.includes('slow') ? 5000 : 100 + Math.floor(Math.random() * 200);
await new Promise((r) => setTimeout(r, ms));
await call('PATCH', '/api/v1/commands/' + env.SVC_COMMAND_ID + '/status', { runnerId, state: 'completed' }, lease);
await call('PATCH', '/api/v1/runs/' + env.SVC_RUN_ID + '/status', { runnerId, state: 'completed' }, lease);
`;

export interface Pair {
  a: TestManager;
  b: TestManager;
  store: TestStore;
  /** Real HTTP to a manager's listening address. */
  http(t: TestManager, method: string, path: string, body?: unknown): ReturnType<typeof call>;
  close(): Promise<void>;
}

/** Two managers, scheduler on in both, one database, runners that end their turns by themselves. */
export async function startPair(env: Record<string, string> = {}): Promise<Pair> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-queue-controls-'));
  await writeFile(join(dir, 'runner.mjs'), QUICK_RUNNER);
  const store = await createTestStore(managerTemplate);
  const options = () => ({
    store,
    listen: true,
    env: {
      SVC_RUNNER_ENTRY: join(dir, 'runner.mjs'),
      SVC_SCHEDULER: 'on',
      SVC_SCHEDULER_SCAN_MS: '300',
      SVC_RETRY_BACKOFF_MS: '200',
      LOG_LEVEL: 'warn',
      ...env,
    },
  });
  const a = await startTestManager(options());
  const b = await startTestManager(options());
  await a.configureProfile('builtin-a');
  await b.configureProfile('builtin-a');
  return {
    a,
    b,
    store,
    http: (t, method, path, body) => call(t.manager.url, method, path, body),
    async close() {
      await Promise.all([a.close(), b.close()]);
      await store.drop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

let seq = 0;
/** Submit a task through real HTTP. */
export async function submitTo(
  pair: Pair,
  t: TestManager,
  extra: Record<string, unknown> = {},
  prompt = 'say ok',
) {
  seq++;
  const res = await pair.http(t, 'POST', '/api/v1/queue/tasks', {
    tenantId: 'tenant-a',
    projectId: 'proj-1',
    queue: 'main',
    title: `controls task ${seq}`,
    payload: { prompt: `${prompt} ${seq}` },
    ...extra,
  });
  assert.equal(res.status, 201, res.raw);
  return res.body;
}

/** Open attempts per concurrency key, from the attempts themselves. */
export async function openByKey(t: TestManager): Promise<Record<string, number>> {
  const { rows } = await sql<{ key: string; n: number }>`
    SELECT t.concurrency_key AS key, count(*)::int AS n FROM queue_attempts a
    JOIN queue_tasks t USING (task_id)
    WHERE a.state IN ('dispatched', 'running') AND t.concurrency_key IS NOT NULL
    GROUP BY 1`.execute(t.manager.store.db);
  return Object.fromEntries(rows.map((r) => [r.key, r.n]));
}

export async function attemptCount(t: TestManager, queue?: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM queue_attempts a JOIN queue_tasks t USING (task_id)
    WHERE ${queue === undefined ? sql`TRUE` : sql`t.queue = ${queue}`}`.execute(t.manager.store.db);
  return rows[0]!.n;
}

export async function tasksLeft(t: TestManager): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM queue_tasks
    WHERE state NOT IN ('completed', 'failed', 'blocked', 'cancelled')`.execute(t.manager.store.db);
  return rows[0]!.n;
}
