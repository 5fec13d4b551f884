import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import {
  startTestManager,
  TestRunner,
  type TestManager,
  type TestManagerOptions,
} from './helpers.js';

/**
 * Queue API tests: a real manager on a fresh PostgreSQL database whose local launcher starts a
 * stand-in runner program (it stays up until told to stop: SIGTERM, or a file named `stop` in
 * its job directory), while the test speaks the runner-facing API itself to move runs and
 * commands along. The real runner and agent run in the CLI follow test.
 */
const STAND_IN = `
import { existsSync } from 'node:fs';
process.on('SIGTERM', () => process.exit(0));
setInterval(() => existsSync('stop') && process.exit(0), 20);
`;

/**
 * End a stand-in runner as a real one ends once its turn is done (it exits 0), and wait until
 * its manager has recorded that: only then is its capacity free.
 */
export async function stopStandIn(t: TestManager, jobName: string): Promise<void> {
  await writeFile(join(t.dataDir, 'jobs', jobName, 'stop'), '');
  const deadline = Date.now() + 10_000;
  for (;;) {
    const job = await t.manager.store.db
      .selectFrom('runner_jobs')
      .select('phase')
      .where('job_name', '=', jobName)
      .executeTakeFirst();
    if (!job || ['succeeded', 'failed', 'cancelled'].includes(job.phase)) return;
    if (Date.now() > deadline) throw new Error(`stand-in runner ${jobName} did not end`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export interface QueueRig {
  t: TestManager;
  close(): Promise<void>;
}

export async function startQueueRig(options: TestManagerOptions = {}): Promise<QueueRig> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-queue-standin-'));
  await writeFile(join(dir, 'runner.mjs'), STAND_IN);
  const t = await startTestManager({
    ...options,
    env: { SVC_RUNNER_ENTRY: join(dir, 'runner.mjs'), ...options.env },
  });
  await t.configureProfile('builtin-a');
  return {
    t,
    async close() {
      await t.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

let seq = 0;
/** A valid task body; override fields per test. */
export function taskBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  seq++;
  return {
    tenantId: 'tenant-a',
    projectId: 'proj-1',
    queue: 'main',
    title: `task ${seq}`,
    payload: { prompt: `do thing ${seq}` },
    ...overrides,
  };
}

export async function submit(t: TestManager, overrides: Record<string, unknown> = {}) {
  const res = await t.api('POST', '/api/v1/queue/tasks', taskBody(overrides));
  assert.equal(res.status, 201, res.raw);
  return res.body;
}

export async function dispatch(t: TestManager, taskId: string, body: Record<string, unknown> = {}) {
  const res = await t.api('POST', `/api/v1/queue/tasks/${taskId}/dispatch`, body);
  assert.equal(res.status, 201, res.raw);
  return res.body;
}

export const refresh = (t: TestManager, taskId: string, body: Record<string, unknown> = {}) =>
  t.api('POST', `/api/v1/queue/tasks/${taskId}/refresh`, body);

export const show = async (t: TestManager, taskId: string) =>
  (await t.api('GET', `/api/v1/queue/tasks/${taskId}`)).body;

/** Take the runner's part for a dispatched attempt: claim, poll, acknowledge. */
export async function acknowledge(t: TestManager, dispatched: any): Promise<TestRunner> {
  const runner = new TestRunner(t, dispatched.attempt.runner.runnerId, dispatched.run.runId);
  assert.equal((await runner.claim()).status, 200);
  await runner.poll();
  assert.equal((await runner.ack(dispatched.command.commandId)).status, 200);
  return runner;
}

/** Drive an attempt to a terminal command state through the runner-facing API. */
export async function finish(
  t: TestManager,
  dispatched: any,
  state: 'completed' | 'failed' | 'blocked',
  extra: Record<string, unknown> = {},
): Promise<void> {
  const runner = await acknowledge(t, dispatched);
  await runner.append([
    {
      key: `say-${dispatched.command.commandId}`,
      commandId: dispatched.command.commandId,
      category: 'assistant_message',
      data: { text: 'working on it', final: true, replyAuthority: true },
    },
  ]);
  const done = await runner.finish(dispatched.command.commandId, state, extra);
  assert.equal(done.status, 200, done.raw);
  if (dispatched.runnerJob?.jobName) await stopStandIn(t, dispatched.runnerJob.jobName);
}

/**
 * A fingerprint of every row of every table (and of the session volumes on disk): equal
 * fingerprints mean nothing at all was written in between.
 */
export async function fingerprint(t: TestManager): Promise<Record<string, string>> {
  const db = t.manager.store.db;
  const tables = await sql<{ name: string }>`
    SELECT table_name AS name FROM information_schema.tables
    WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name`.execute(db);
  const out: Record<string, string> = {};
  for (const { name } of tables.rows) {
    const row = await sql<{ n: number; digest: string | null }>`
      SELECT count(*)::int AS n, md5(string_agg(x::text, '|' ORDER BY x::text)) AS digest
      FROM ${sql.table(name)} x`.execute(db);
    out[name] = `${row.rows[0]!.n}:${row.rows[0]!.digest ?? '-'}`;
  }
  const volumes = await readdir(join(t.dataDir, 'sessions')).catch(() => []);
  out['(session volumes)'] = volumes.sort().join(',');
  return out;
}

export async function rowCount(t: TestManager, table: string, where = sql`TRUE`): Promise<number> {
  const result = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM ${sql.table(table)} WHERE ${where}`.execute(t.manager.store.db);
  return result.rows[0]!.n;
}
