/**
 * Command cycle benchmark: the manager as its own process (dist/server.js) on a fresh database,
 * driven over real HTTP on loopback by simulated runners, against graphile-worker 0.17 measured
 * here on a fresh database of the same PostgreSQL. Prints, each next to its reference:
 * - command cycles/s with 8 runners (create, runner poll, ack, complete) vs graphile-worker
 *   start-to-complete jobs/s at concurrency 8;
 * - command delivery (created -> a long-polling runner holds it) p50/p99 vs graphile-worker
 *   addJob -> task start p50;
 * - database commits per command cycle (pg_stat_database.xact_commit deltas).
 * The whole turn through manager and runner is measured by runner.bench.ts.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { makeWorkerUtils, run, runMigrations } from 'graphile-worker';
import { testServerUrl, withDatabase } from '@svc/testkit';
import { runBody } from '../test/helpers.js';
import {
  call as request,
  out,
  pct,
  requirePostgres,
  startManagerProcess,
  withBuiltinProfile,
} from './support.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const RUNNERS = 8;
const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 300);

await requirePostgres();
const server = (await testServerUrl())!;

// --- graphile-worker on a fresh database of the same server -------------------------------
async function graphileFigures(): Promise<{ jobsPerSecond: number; startP50: number }> {
  const name = `bench_gw_${process.pid}`;
  const admin = new pg.Client({ connectionString: server });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const connectionString = withDatabase(server, name);
  // One pool of our own, ended before the drop: a graphile-internal pool still open when the
  // database is dropped would raise an unhandled connection error and end the bench.
  const pgPool = new pg.Pool({ connectionString, max: RUNNERS + 4 });
  pgPool.on('error', () => undefined);
  // graphile-worker asks for a handler on each client too (it warns otherwise).
  pgPool.on('connect', (client) => client.on('error', () => undefined));
  try {
    await runMigrations({ pgPool, logger: quietLogger });
    // Throughput: a backlog of jobs, then 8 concurrent workers take them to completion.
    const utils = await makeWorkerUtils({ pgPool, logger: quietLogger });
    const JOBS = 20_000;
    for (let i = 0; i < JOBS; i += 1000)
      await utils.addJobs(
        Array.from({ length: 1000 }, (_, k) => ({ identifier: 'noop', payload: { i: i + k } })),
      );
    let done = 0;
    let finished!: () => void;
    const allDone = new Promise<void>((r) => (finished = r));
    const started = performance.now();
    const runner = await run({
      pgPool,
      concurrency: RUNNERS,
      noHandleSignals: true,
      pollInterval: 1000,
      logger: quietLogger,
      taskList: {
        // graphile-worker tasks return promises; these do no work of their own.
        noop: () => {
          if (++done === JOBS) finished();
          return Promise.resolve();
        },
      },
    });
    await allDone;
    const jobsPerSecond = JOBS / ((performance.now() - started) / 1000);
    // Latency: an idle worker, then one job at a time, addJob -> the task starts.
    const starts: number[] = [];
    let startedAt: ((t: number) => void) | undefined;
    await runner.stop();
    const idle = await run({
      pgPool,
      concurrency: RUNNERS,
      noHandleSignals: true,
      pollInterval: 1000,
      logger: quietLogger,
      taskList: { ping: () => Promise.resolve(startedAt?.(performance.now())) },
    });
    for (let i = 0; i < DELIVERIES; i++) {
      const began = new Promise<number>((r) => (startedAt = r));
      const t0 = performance.now();
      await utils.addJob('ping', { i });
      starts.push((await began) - t0);
      await sleep(2);
    }
    await idle.stop();
    await utils.release();
    return { jobsPerSecond, startP50: pct(starts, 50) };
  } finally {
    await pgPool.end();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}
const quietLogger = new (await import('graphile-worker')).Logger(() => () => undefined);

// --- the manager ---------------------------------------------------------------------------
const manager = await startManagerProcess({ SVC_DB_POOL_SIZE: '16' }, withBuiltinProfile);
const pool = new pg.Pool({ connectionString: manager.url, max: 2 });
const dbName = new URL(manager.url).pathname.slice(1);
const commits = async () =>
  Number(
    (await pool.query('SELECT xact_commit FROM pg_stat_database WHERE datname = $1', [dbName]))
      .rows[0].xact_commit,
  );

interface SimRunner {
  runnerId: string;
  runId: string;
  token: string;
  afterSeq: number;
}
async function claimedRunner(i: number): Promise<SimRunner> {
  const runnerId = `rnr-cycle${i}xx`;
  const created = await request(manager.base, 'POST', '/api/v1/runs', runBody());
  const claim = await request(manager.base, 'POST', `/api/v1/runs/${created.runId}/claim`, {
    runnerId,
  });
  return { runnerId, runId: created.runId, token: claim.leaseToken, afterSeq: 0 };
}
const asRunner = (r: SimRunner, method: string, path: string, body?: unknown) =>
  request(manager.base, method, path, body, { 'x-lease-token': r.token });
const createCommand = (r: SimRunner, i: number) =>
  request(manager.base, 'POST', `/api/v1/runs/${r.runId}/commands`, {
    type: 'turn',
    payload: { prompt: `cycle ${i}` },
  });
/** The runner's long-poll, polling again after any wake-up that brought nothing (as the runner does). */
async function poll(r: SimRunner, waitMs: number): Promise<any> {
  for (;;) {
    const page = await asRunner(
      r,
      'GET',
      `/api/v1/runs/${r.runId}/commands?runnerId=${r.runnerId}&afterSeq=${r.afterSeq}&waitMs=${waitMs}`,
    );
    const command = page.commands[0];
    if (command) {
      r.afterSeq = command.seq;
      return command;
    }
  }
}
async function finish(r: SimRunner, commandId: string): Promise<void> {
  await asRunner(r, 'POST', `/api/v1/commands/${commandId}/ack`, { runnerId: r.runnerId });
  const done = await asRunner(r, 'PATCH', `/api/v1/commands/${commandId}/status`, {
    runnerId: r.runnerId,
    state: 'completed',
  });
  if (done.state !== 'completed') throw new Error(`command ended ${done.state}`);
}

let heartbeats: NodeJS.Timeout | undefined;
try {
  console.log(
    `PostgreSQL ${(await pool.query('SHOW server_version')).rows[0].server_version}, ${SECONDS}s cycle phase, ${RUNNERS} runners, node ${process.version}`,
  );
  const runners = await Promise.all(Array.from({ length: RUNNERS }, (_, i) => claimedRunner(i)));
  // Each runner renews its lease every 10 s, as the real one does by default.
  heartbeats = setInterval(() => {
    for (const r of runners)
      void asRunner(r, 'PATCH', `/api/v1/runs/${r.runId}/lease`, { runnerId: r.runnerId });
  }, 10_000);

  // 1. Command cycles: each runner's command is created, taken by its long-poll, acknowledged
  // and completed, then the next one; 8 such runners at once.
  let cycles = 0;
  const cyclePhase = async (ms: number) => {
    const deadline = Date.now() + ms;
    await Promise.all(
      runners.map(async (r) => {
        while (Date.now() < deadline) {
          const created = await createCommand(r, cycles);
          const held = await poll(r, 5000);
          if (held?.commandId !== created.commandId) throw new Error('poll missed the command');
          await finish(r, held.commandId);
          cycles++;
        }
      }),
    );
  };
  await cyclePhase(1000); // warm-up
  cycles = 0;
  await sleep(1100); // pg_stat counters are flushed at most once a second
  const commitsBefore = await commits();
  await cyclePhase(SECONDS * 1000);
  const measured = cycles;
  await sleep(1100);
  const commitsPerCycle = ((await commits()) - commitsBefore) / measured;
  const cyclesPerSecond = measured / SECONDS;

  // 2. Delivery: the runner is already long-polling when the command is created.
  const one = runners[0]!;
  const delivery: number[] = [];
  for (let i = 0; i < DELIVERIES; i++) {
    const polling = poll(one, 10_000).then((c) => ({ c, at: performance.now() }));
    await sleep(3); // the poll is open and waiting
    const t0 = performance.now();
    const created = await createCommand(one, i);
    const { c, at } = await polling;
    if (c?.commandId !== created.commandId) throw new Error('long-poll missed the command');
    delivery.push(at - t0);
    await finish(one, c.commandId);
  }

  const gw = await graphileFigures();
  out(
    'command cycles/s, 8 runners (create, poll, ack, complete)',
    `${cyclesPerSecond.toFixed(0)} /s`,
  );
  out('graphile-worker start-to-complete, concurrency 8', `${gw.jobsPerSecond.toFixed(0)} jobs/s`);
  out(
    'ratio cycles / graphile-worker jobs',
    (cyclesPerSecond / gw.jobsPerSecond).toFixed(3),
    'target >= 0.25',
  );
  out('command delivery p50 (created -> long-poll holds it)', `${pct(delivery, 50).toFixed(2)} ms`);
  out('graphile-worker addJob -> task start p50', `${gw.startP50.toFixed(2)} ms`);
  out(
    'ratio delivery p50 / graphile-worker p50',
    (pct(delivery, 50) / gw.startP50).toFixed(2),
    'target <= 2',
  );
  out('command delivery p99', `${pct(delivery, 99).toFixed(2)} ms`, 'target <= 15 ms');
  out('database commits per command cycle', commitsPerCycle.toFixed(1));
} finally {
  clearInterval(heartbeats);
  await pool.end();
  await manager.stop();
}
