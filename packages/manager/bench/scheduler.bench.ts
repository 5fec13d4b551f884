import { randomBytes } from 'node:crypto';
import { FakeKube, testServerUrl, withDatabase } from '@svc/testkit';
import pg from 'pg';
import { EdgeLauncher, EdgeVolumes } from './cluster-edge.js';
import { startTestManager, taskBodyFor, type TestManager } from './scheduler-support.js';
import { out, pct, requirePostgres } from './support.js';

/**
 * The automatic scheduler, measured on the same PostgreSQL as graphile-worker:
 *
 * 1. submit -> runner Job launched: a task submitted over the API until the Kubernetes Job
 *    creation reaches the (fake) Kubernetes API, one task at a time, next to graphile-worker's
 *    `addJob` -> task function start on a fresh database of the same server (target: our p50
 *    within 3x of theirs). Ours does more: attempt, session, run, turn, per-job Secret and Job.
 *    Then the same with the fake API answering each call 5 ms late, as across a network.
 * 2. drain: 10,000 queued tasks through the scheduler of a fresh manager, the launcher stubbed
 *    at its edge (Job and volume creates answered at once, in process), until every task's
 *    runner Job was requested (target >= 1,000/s, counted from the first Job requested to the
 *    last; the same counted from the manager's start, boot included, is printed under it); the
 *    rate at which attempts are claimed is printed next to it. The same drain through the fake Kubernetes API over HTTP follows, for
 *    what the client and an API server add (BENCH_SCHED_DRAIN_KUBE tasks, 0 to skip).
 */
const LATENCY_SAMPLES = Number(process.env['BENCH_SCHED_SAMPLES'] ?? 200);
const DRAIN_TASKS = Number(process.env['BENCH_SCHED_DRAIN'] ?? 10_000);
const DRAIN_KUBE_TASKS = Number(process.env['BENCH_SCHED_DRAIN_KUBE'] ?? 2_000);
const API_LATENCY_MS = 5;
const JOBS_PATH = /\/apis\/batch\/v1\/namespaces\/[^/]+\/jobs$/;

await requirePostgres();

const kubeEnv = (fake: FakeKube, extra: Record<string, string> = {}) => ({
  SVC_LAUNCHER: 'kubernetes',
  SVC_SECRET_STORE: 'kubernetes',
  SVC_KUBE_API_URL: fake.url,
  SVC_MANAGER_PUBLIC_URL: 'http://svc-run-manager.svc-v01.svc:8080',
  SVC_KUBE_POLL_INTERVAL_MS: '60000',
  LOG_LEVEL: 'warn',
  ...extra,
});

const jobsCreated = (fake: FakeKube) =>
  fake.requests.filter((r) => r.method === 'POST' && JOBS_PATH.test(r.path)).length;

async function withTimeout(done: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      done,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('benchmark: condition not met in time')), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

async function submit(t: TestManager, body: Record<string, unknown>): Promise<void> {
  const res = await t.api('POST', '/api/v1/queue/tasks', body);
  if (res.status !== 201) throw new Error(`submit answered ${res.status}: ${res.raw}`);
}

async function ourLatency(apiLatencyMs = 0): Promise<number[]> {
  const fake = await FakeKube.start({ latencyMs: apiLatencyMs });
  const t = await startTestManager({
    env: kubeEnv(fake, {
      SVC_SCHEDULER: 'on',
      SVC_SCHEDULER_MAX_RUNNING: '100000',
      SVC_SCHEDULER_SCAN_MS: '5000',
    }),
  });
  try {
    await t.configureProfile('builtin-a');
    const samples: number[] = [];
    // Told by the fake API as the Job's creation arrives, as graphile-worker's side is told by
    // its task: nothing polls in this process, which also runs the manager under test.
    let jobArrived: (() => void) | undefined;
    const stop = fake.onRequest((r) => {
      if (r.method === 'POST' && JOBS_PATH.test(r.path)) jobArrived?.();
    });
    try {
      for (let i = 0; i < LATENCY_SAMPLES + 10; i++) {
        const arrived = new Promise<void>((resolve) => (jobArrived = resolve));
        const started = performance.now();
        await submit(t, taskBodyFor(i));
        await withTimeout(arrived, 30_000);
        if (i >= 10) samples.push(performance.now() - started); // the first ten warm up
      }
    } finally {
      stop();
    }
    return samples;
  } finally {
    await t.close();
    await fake.close();
  }
}

async function graphileLatency(): Promise<number[]> {
  const { run, makeWorkerUtils, Logger } = await import('graphile-worker');
  const quiet = new Logger(() => () => undefined);
  const server = (await testServerUrl())!;
  const name = `svc_bench_gw_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = withDatabase(server, name);
  let started: (() => void) | undefined;
  // One pool we own, ended before the database is dropped.
  const pgPool = new pg.Pool({ connectionString: url, max: 4 });
  pgPool.on('error', () => undefined);
  // graphile-worker asks for a handler on each client too (it warns otherwise).
  pgPool.on('connect', (client) => client.on('error', () => undefined));
  const runner = await run({
    pgPool,
    concurrency: 1,
    noHandleSignals: true,
    pollInterval: 2000,
    taskList: {
      bench: () => {
        started?.();
        return Promise.resolve();
      },
    },
    logger: quiet,
  });
  const utils = await makeWorkerUtils({ pgPool, logger: quiet });
  try {
    const samples: number[] = [];
    for (let i = 0; i < LATENCY_SAMPLES + 10; i++) {
      const ran = new Promise<void>((resolve) => (started = resolve));
      const t0 = performance.now();
      await utils.addJob('bench', { i });
      await ran;
      if (i >= 10) samples.push(performance.now() - t0);
    }
    return samples;
  } finally {
    await utils.release();
    await runner.stop();
    await pgPool.end();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

interface Drain {
  /** Until no task is queued (every one has its attempt). */
  claimedSeconds: number;
  /** Until every task's runner Job reached the Kubernetes API. */
  launchedSeconds: number;
  launched: number;
  /** From the first Job requested to the last (the manager's start left out); edge only. */
  steadySeconds: number | undefined;
}

/**
 * Seed `tasks` queued tasks with the scheduler off, then start a scheduling manager on the same
 * database and count runner Jobs until all were requested. `edge` stubs the launcher and the
 * session volumes at the cluster's edge; otherwise they go to the fake Kubernetes API.
 */
async function drainRate(tasks: number, edge: boolean): Promise<Drain> {
  const fake = await FakeKube.start();
  const seeder = await startTestManager({ env: kubeEnv(fake) });
  const store = seeder.store;
  await seeder.configureProfile('builtin-a');
  const tenants = ['tenant-a', 'tenant-b'];
  for (let i = 0; i < tasks; i += 50) {
    await Promise.all(
      Array.from({ length: Math.min(50, tasks - i) }, (_, k) =>
        submit(seeder, { ...taskBodyFor(i + k), tenantId: tenants[(i + k) % 2] }),
      ),
    );
  }
  await seeder.manager.close();
  const launcher = new EdgeLauncher();
  const before = jobsCreated(fake);
  const created = () => (edge ? launcher.launched : jobsCreated(fake) - before);
  const started = performance.now();
  const t = await startTestManager({
    store,
    ...(edge ? { edges: { launcher, sessionVolumes: new EdgeVolumes() } } : {}),
    env: kubeEnv(fake, {
      SVC_SCHEDULER: 'on',
      SVC_SCHEDULER_MAX_RUNNING: '100000',
      SVC_SCHEDULER_BATCH: '500',
      SVC_SCHEDULER_LAUNCH_CONCURRENCY: '32',
      SVC_SCHEDULER_SCAN_MS: '1000',
    }),
  });
  try {
    const pool = new pg.Pool({ connectionString: (store as { url: string }).url, max: 1 });
    let claimedSeconds: number | undefined;
    let launched = 0;
    let progressAt = performance.now();
    // Done when every task's Job was requested; a drain that stops making progress for a
    // minute is reported as it stands.
    let counted = 0;
    while (launched < tasks && performance.now() - progressAt < 60_000) {
      await new Promise((r) => setTimeout(r, 20));
      // The count of queued tasks is a read of the whole queue: a few times a second only,
      // not to load the database under test.
      if (claimedSeconds === undefined && performance.now() - counted >= 250) {
        counted = performance.now();
        const { rows } = await pool.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM queue_tasks WHERE state = 'queued'`,
        );
        if (rows[0]!.n === 0) claimedSeconds = (performance.now() - started) / 1000;
      }
      const now = created();
      if (now > launched) progressAt = performance.now();
      launched = now;
    }
    const launchedSeconds = (performance.now() - started) / 1000;
    await pool.end();
    const steadySeconds =
      edge && launcher.firstAt !== undefined && launcher.lastAt !== undefined
        ? (launcher.lastAt - launcher.firstAt) / 1000
        : undefined;
    return {
      claimedSeconds: claimedSeconds ?? launchedSeconds,
      launchedSeconds,
      launched,
      steadySeconds,
    };
  } finally {
    await t.close();
    await store.drop();
    await fake.close();
  }
}

const ours = await ourLatency();
const theirs = await graphileLatency();
const ratio = pct(ours, 50) / Math.max(pct(theirs, 50), 0.001);
out(
  `submit -> runner Job launched, ${ours.length} tasks, p50 / p99`,
  `${pct(ours, 50).toFixed(1)} / ${pct(ours, 99).toFixed(1)} ms`,
);
out(
  `graphile-worker addJob -> task start, ${theirs.length} jobs, p50 / p99`,
  `${pct(theirs, 50).toFixed(1)} / ${pct(theirs, 99).toFixed(1)} ms`,
);
out('ratio of p50s (ours / graphile-worker)', `${ratio.toFixed(2)}x`, '(target <= 3x)');
// In a cluster each Kubernetes API call is a network round trip: the same path with the fake
// API answering every call 5 ms late shows what the launch's sequence of calls costs there.
const remote = await ourLatency(API_LATENCY_MS);
out(
  `  the same with a ${API_LATENCY_MS} ms Kubernetes API round trip, p50 / p99`,
  `${pct(remote, 50).toFixed(1)} / ${pct(remote, 99).toFixed(1)} ms`,
  '(volume and Secret created together, then the Job: two round trips)',
);
const drain = await drainRate(DRAIN_TASKS, true);
out(
  `drain ${DRAIN_TASKS} queued tasks: runner Jobs requested (launcher stubbed at its edge)`,
  `${((drain.launched - 1) / (drain.steadySeconds ?? drain.launchedSeconds)).toFixed(0)} tasks/s`,
  `(target >= 1000/s; first to last of ${drain.launched} Jobs in ${(drain.steadySeconds ?? drain.launchedSeconds).toFixed(1)} s)`,
);
out(
  `  the same, counted from the scheduling manager's start`,
  `${(drain.launched / drain.launchedSeconds).toFixed(0)} tasks/s`,
  `(${drain.launched} Jobs in ${drain.launchedSeconds.toFixed(1)} s)`,
);
out(
  `drain ${DRAIN_TASKS} queued tasks: attempts claimed`,
  `${(DRAIN_TASKS / drain.claimedSeconds).toFixed(0)} tasks/s`,
  `(none queued after ${drain.claimedSeconds.toFixed(1)} s)`,
);
if (DRAIN_KUBE_TASKS > 0) {
  const kube = await drainRate(DRAIN_KUBE_TASKS, false);
  out(
    `drain ${DRAIN_KUBE_TASKS} queued tasks through the fake Kubernetes API (4 calls per task)`,
    `${(kube.launched / kube.launchedSeconds).toFixed(0)} tasks/s`,
    `(${kube.launched} Jobs in ${kube.launchedSeconds.toFixed(1)} s)`,
  );
}
