import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FakeKube } from '@svc/testkit';
import {
  createTestStore,
  realPostgresAvailable,
  type KubeObject,
  type TestStore,
} from '@svc/testkit';
import pg from 'pg';
import { containerEnv, startFakeKube } from './kube-helpers.js';
import { startReplica as startManagerReplica, type Replica } from './manager-process.js';
import { managerTemplate } from './helpers.js';
import { call } from './http-call.js';

/**
 * Two manager processes, scheduler on in both, sharing one database and one (fake) Kubernetes
 * API, schedule 1,000 tasks: none is dispatched twice. The test plays the runner fleet: every
 * Job that reaches the Kubernetes API gets a runner that claims its run, takes its turn and
 * reports it over HTTP (to either replica), then the Job ends. Without that, attempts would
 * stay open until their command expires (15 min): capacity full of Jobs nobody claims.
 */
const skip = (await realPostgresAvailable())
  ? false
  : 'needs a PostgreSQL server for two processes';
const NAMESPACE = 'svc-v01';
const TASKS = 1000;
const TENANTS = ['tenant-a', 'tenant-b', 'tenant-c', 'tenant-d'];
const QUEUES = ['main', 'batch'];
/** Every tenth task's first attempt fails as the provider being away: it is retried once. */
const isFlaky = (i: number) => i % 10 === 3;
const JOBS_PATH = /^\/apis\/batch\/v1\/namespaces\/[^/]+\/jobs$/;

/**
 * One runner's whole life against a replica, as the runner program speaks it: claim, poll,
 * acknowledge, report the turn's end, close the run (a queue task's runner serves one turn).
 * Flaky tasks fail their first attempt retryably.
 */
async function serveJob(base: string, env: Record<string, string>, failedOnce: Set<string>) {
  const runId = env['SVC_RUN_ID']!;
  const runnerId = env['SVC_RUNNER_ID']!;
  const commandId = env['SVC_COMMAND_ID']!;
  const claimed = await call(base, 'POST', `/api/v1/runs/${runId}/claim`, {
    runnerId,
    mode: 'ordinary',
  });
  assert.equal(claimed.status, 200, claimed.raw);
  const lease = { 'x-lease-token': claimed.body.leaseToken as string };
  const page = await call(
    base,
    'GET',
    `/api/v1/runs/${runId}/commands?afterSeq=0&runnerId=${runnerId}&waitMs=0`,
    undefined,
    lease,
  );
  assert.equal(page.status, 200, page.raw);
  const command = page.body.commands.find((c: any) => c.commandId === commandId);
  assert.ok(command, `command ${commandId} delivered`);
  const acked = await call(base, 'POST', `/api/v1/commands/${commandId}/ack`, { runnerId }, lease);
  assert.equal(acked.status, 200, acked.raw);
  const prompt = String(command.payload.prompt);
  const fail = prompt.includes('flaky') && !failedOnce.has(prompt);
  if (fail) failedOnce.add(prompt);
  const done = await call(
    base,
    'PATCH',
    `/api/v1/commands/${commandId}/status`,
    fail
      ? { runnerId, state: 'failed', failureKind: 'provider-unavailable', message: 'provider 503' }
      : { runnerId, state: 'completed' },
    lease,
  );
  assert.equal(done.status, 200, done.raw);
  const closed = await call(
    base,
    'PATCH',
    `/api/v1/runs/${runId}/status`,
    fail
      ? { runnerId, state: 'failed', failureKind: 'provider-unavailable', message: 'provider 503' }
      : { runnerId, state: 'completed' },
    lease,
  );
  assert.equal(closed.status, 200, closed.raw);
}

describe('two schedulers on one database', { skip }, () => {
  let store: TestStore;
  let fake: FakeKube;
  let dir: string;
  let db: pg.Pool;
  const replicas: Replica[] = [];

  async function startReplica(): Promise<Replica> {
    const replica = await startManagerReplica(store, dir, {
      SVC_LAUNCHER: 'kubernetes',
      SVC_SECRET_STORE: 'kubernetes',
      SVC_KUBE_API_URL: fake.url,
      SVC_MANAGER_PUBLIC_URL: 'http://svc-run-manager.svc-v01.svc:8080',
      SVC_TENANT_ALLOWLIST: TENANTS.join(','),
      SVC_SCHEDULER: 'on',
      SVC_SCHEDULER_MAX_RUNNING: '40',
      SVC_SCHEDULER_SCAN_MS: '1000',
      SVC_RETRY_BACKOFF_MS: '200',
      SVC_DRAIN_DELAY_MS: '0',
    });
    replicas.push(replica);
    return replica;
  }

  before(async () => {
    store = await createTestStore(managerTemplate);
    assert.equal(store.kind, 'postgres');
    db = new pg.Pool({ connectionString: store.kind === 'postgres' ? store.url : '', max: 2 });
    fake = await startFakeKube();
    dir = await mkdtemp(join(tmpdir(), 'svc-ha-sched-'));
  });
  after(async () => {
    for (const r of replicas) if (r.child.exitCode === null) r.child.kill('SIGKILL');
    await Promise.all(replicas.map((r) => r.exited));
    await db?.end();
    await fake?.close();
    await store?.drop();
    await rm(dir, { recursive: true, force: true });
  });

  it('schedules 1,000 tasks across tenants and queues: one attempt per retry, one run, command and Job per attempt, every task ends', async () => {
    const [a, b] = [await startReplica(), await startReplica()];
    const profile = await call(a.url, 'PUT', '/api/v1/provider-profiles/builtin-a/credential', {
      apiKey: 'sk-test-ha-scheduler-key-0000000000',
      config: { model: 'test-model', baseUrl: 'http://127.0.0.1:9/v1' },
      delegatedBy: { system: 'ha-test', requestId: 'req-ha-1' },
    });
    assert.ok(profile.status === 200 || profile.status === 201, profile.raw);

    // The runner fleet: every Job created (by either replica) gets a runner, served by the
    // replica its index picks, so both replicas take runner traffic too.
    const failedOnce = new Set<string>();
    const errors: unknown[] = [];
    const inFlight = new Set<Promise<void>>();
    let seen = 0;
    let served = 0;
    let fleetOn = true;
    const fleet = (async () => {
      while (fleetOn) {
        const requests = fake.requests;
        for (; seen < requests.length; seen++) {
          const request = requests[seen]!;
          if (request.method !== 'POST' || !JOBS_PATH.test(request.path)) continue;
          const job = request.body as KubeObject;
          const base = (served++ % 2 === 0 ? a : b).url;
          const work = serveJob(base, containerEnv(job), failedOnce)
            .then(() => fake.setJobState(NAMESPACE, job.metadata.name, 'succeeded'))
            .catch((error: unknown) => void errors.push(error))
            .finally(() => inFlight.delete(work));
          inFlight.add(work);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      await Promise.all(inFlight);
    })();

    let elapsed = 0;
    try {
      // 1,000 tasks, submitted 50 at a time, alternately to each replica, across 4 tenants and
      // 2 queues with mixed priorities.
      const started = Date.now();
      for (let i = 0; i < TASKS; i += 50) {
        await Promise.all(
          Array.from({ length: Math.min(50, TASKS - i) }, async (_, k) => {
            const n = i + k;
            const res = await call((n % 2 === 0 ? a : b).url, 'POST', '/api/v1/queue/tasks', {
              tenantId: TENANTS[n % TENANTS.length],
              projectId: 'proj-1',
              queue: QUEUES[Math.floor(n / TENANTS.length) % QUEUES.length],
              title: `ha task ${n}`,
              priority: n % 3,
              maxAttempts: 3,
              payload: { prompt: `ha task ${n}${isFlaky(n) ? ' flaky' : ''}` },
            });
            assert.equal(res.status, 201, res.raw);
          }),
        );
      }

      // Every task reaches a terminal state by itself: no dispatch, no refresh.
      const deadline = Date.now() + 240_000;
      for (;;) {
        const { rows } = await db.query<{ open: number }>(
          `SELECT count(*)::int AS open FROM queue_tasks
           WHERE state NOT IN ('completed', 'failed', 'cancelled')
              OR (state = 'failed' AND attempt_count < max_attempts)`,
        );
        if (rows[0]!.open === 0) break;
        assert.deepEqual(errors, [], 'every runner call answered as expected');
        if (Date.now() > deadline)
          assert.fail(`${rows[0]!.open} tasks still open after ${Date.now() - started} ms`);
        await new Promise((r) => setTimeout(r, 250));
      }
      elapsed = Date.now() - started;
    } finally {
      // Stopped whatever happened: a fleet still polling would keep this file alive until
      // the test runner's ten-minute timeout instead of failing at once.
      fleetOn = false;
      await fleet;
    }
    assert.deepEqual(errors, [], 'every runner call answered as expected');
    console.log(`# ${TASKS} tasks scheduled by two managers to completion in ${elapsed} ms`);

    // Every task completed: flaky ones on their second attempt, the others on their first.
    const tasks = await db.query<{ title: string; state: string; attempt_count: number }>(
      `SELECT title, state, attempt_count FROM queue_tasks`,
    );
    assert.equal(tasks.rows.length, TASKS);
    for (const task of tasks.rows) {
      const n = Number(task.title.split(' ').at(-1));
      assert.equal(task.state, 'completed', task.title);
      assert.equal(task.attempt_count, isFlaky(n) ? 2 : 1, task.title);
    }
    // Exactly one attempt per retry index, numbered from 0 without gaps; the latest completed.
    const attempts = await db.query<{ task_id: string; indexes: number[]; states: string[] }>(
      `SELECT task_id, array_agg(retry_index ORDER BY retry_index) AS indexes,
              array_agg(state ORDER BY retry_index) AS states
       FROM queue_attempts GROUP BY task_id`,
    );
    assert.equal(attempts.rows.length, TASKS);
    for (const row of attempts.rows) {
      assert.deepEqual(
        row.indexes,
        row.indexes.map((_, i) => i),
        row.task_id,
      );
      assert.equal(row.states.at(-1), 'completed', row.task_id);
    }
    const attemptCount = TASKS + Math.ceil((TASKS - 3) / 10);
    assert.equal(attempts.rows.flatMap((r) => r.indexes).length, attemptCount);
    // No run, command, runner Job or Kubernetes Job was made twice for one attempt.
    const perAttempt = await db.query<{ attempts: number; runs: number; commands: number }>(
      `SELECT count(*)::int AS attempts,
              count(DISTINCT a.run_id)::int AS runs,
              count(DISTINCT a.command_id)::int AS commands
       FROM queue_attempts a`,
    );
    assert.deepEqual(perAttempt.rows[0], {
      attempts: attemptCount,
      runs: attemptCount,
      commands: attemptCount,
    });
    const runs = await db.query<{ attempt: string; n: number }>(
      `SELECT metadata->>'queueAttemptId' AS attempt, count(*)::int AS n FROM runs
       GROUP BY 1 HAVING count(*) > 1 OR metadata->>'queueAttemptId' IS NULL`,
    );
    assert.deepEqual(runs.rows, [], 'one run per attempt, and no run outside an attempt');
    const commands = await db.query<{ run_id: string; n: number }>(
      `SELECT run_id, count(*)::int AS n FROM commands GROUP BY run_id HAVING count(*) <> 1`,
    );
    assert.deepEqual(commands.rows, [], 'one turn per run');
    const jobs = await db.query<{ attempt_id: string; n: number }>(
      `SELECT attempt_id, count(*)::int AS n FROM runner_jobs GROUP BY attempt_id
       HAVING count(*) <> 1`,
    );
    assert.deepEqual(jobs.rows, [], 'one runner Job per attempt');
    assert.equal(served, attemptCount, 'one Kubernetes Job created per attempt');
    // Both schedulers took part: each replica launched a share of the Jobs.
    const launchers = await db.query<{ manager_instance: string; n: number }>(
      `SELECT manager_instance, count(*)::int AS n FROM runner_jobs GROUP BY 1`,
    );
    assert.equal(launchers.rows.length, 2, JSON.stringify(launchers.rows));
    for (const row of launchers.rows) assert.ok(row.n >= 50, JSON.stringify(launchers.rows));
    console.log(`# Jobs launched per replica: ${launchers.rows.map((r) => r.n).join(', ')}`);
  });
});
