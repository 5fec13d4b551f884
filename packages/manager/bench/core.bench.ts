/**
 * Run manager benchmarks on one PostgreSQL (TEST_DATABASE_URL or 127.0.0.1:5432), the manager
 * running as its own process (dist/server.js) and driven over real HTTP on loopback.
 * Prints: append throughput through the API vs raw batched INSERT of the same rows (and their
 * ratio), single append p50/p99, result envelope time on a 100,000-event run, an events page at
 * seq 900,000 of 1,000,000, runs created per second, and the manager's RSS.
 */
import pg from 'pg';
import { runBody } from '../test/helpers.js';
import {
  call as request,
  out,
  pct,
  requirePostgres,
  startManagerProcess,
  seedBigTurn,
  withBuiltinProfile,
} from './support.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);

await requirePostgres();
const manager = await startManagerProcess({ SVC_DB_POOL_SIZE: '16' }, withBuiltinProfile);
const pool = new pg.Pool({ connectionString: manager.url, max: 10 });
/** Lease tokens by run: a runner sends its claim's token on every runner-facing call. */
const tokens = new Map<string, string>();
const call = (method: string, path: string, body?: unknown, runId?: string) => {
  const token = runId ? tokens.get(runId) : undefined;
  return request(manager.base, method, path, body, token ? { 'x-lease-token': token } : {});
};
let peakRss = 0;
const rssTimer = setInterval(() => (peakRss = Math.max(peakRss, manager.rssMb())), 100);

async function claimedRun(runnerId: string): Promise<string> {
  const run = await call('POST', '/api/v1/runs', runBody());
  const claim = await call('POST', `/api/v1/runs/${run.runId}/claim`, { runnerId });
  tokens.set(run.runId, claim.leaseToken);
  return run.runId as string;
}
const eventRow = (i: number) => ({
  category: 'command_output',
  name: 'exec',
  data: {
    itemId: `item-${i % 50}`,
    stream: 'stdout',
    text: `line ${i}: ${'output '.repeat(12)}`,
    originalBytes: 96,
    keptBytes: 96,
  },
});

try {
  console.log(
    `PostgreSQL ${(await pool.query('SHOW server_version')).rows[0].server_version}, ${SECONDS}s per throughput phase, node ${process.version}`,
  );

  // 1-2. Append throughput through the API (8 runners, batches of 100) against a raw batched
  // INSERT of the same rows into the same table (8 connections). The two alternate in three
  // rounds, so a slow moment of the machine weighs on both sides alike.
  const runners = await Promise.all(
    Array.from({ length: 8 }, async (_, i) => ({
      runnerId: `rnr-bench${i}xx`,
      runId: await claimedRun(`rnr-bench${i}xx`),
    })),
  );
  const rawRuns = await Promise.all(
    Array.from({ length: 8 }, (_, i) => claimedRun(`rnr-raw${i}xxxx`)),
  );
  const batchOf = runners.map(() => 0);
  const rawSeqOf = rawRuns.map(() => 1_000_000);
  let apiEvents = 0;
  let rawEvents = 0;
  const apiPhase = (ms: number) => {
    const deadline = Date.now() + ms;
    return Promise.all(
      runners.map(async (r, i) => {
        while (Date.now() < deadline) {
          const b = batchOf[i]!++;
          const events = Array.from({ length: 100 }, (_, k) => ({
            key: `b${b}-${k}`,
            ...eventRow(k),
          }));
          await call(
            'POST',
            `/api/v1/runs/${r.runId}/events`,
            { runnerId: r.runnerId, events },
            r.runId,
          );
          apiEvents += 100;
        }
      }),
    );
  };
  const rawPhase = (ms: number) => {
    const deadline = Date.now() + ms;
    return Promise.all(
      rawRuns.map(async (runId, i) => {
        const client = await pool.connect();
        try {
          while (Date.now() < deadline) {
            const seq = rawSeqOf[i]!;
            rawSeqOf[i] = seq + 100;
            const values: unknown[] = [];
            const rows = Array.from({ length: 100 }, (_, k) => {
              const e = eventRow(k);
              values.push(
                runId,
                seq + k,
                e.category,
                e.name,
                `raw-${seq + k}`,
                JSON.stringify(e.data),
              );
              const o = k * 6;
              return `($${o + 1}, $${o + 2}, $${o + 3}, $${o + 4}, $${o + 5}, now(), $${o + 6})`;
            });
            await client.query(
              `INSERT INTO events (run_id, seq, category, name, event_key, observed_at, data) VALUES ${rows.join(',')}`,
              values,
            );
            rawEvents += 100;
          }
        } finally {
          client.release();
        }
      }),
    );
  };
  const ROUNDS = 3;
  for (let round = 0; round < ROUNDS; round++) {
    await apiPhase((SECONDS * 1000) / ROUNDS);
    await rawPhase((SECONDS * 1000) / ROUNDS);
  }
  const apiRate = apiEvents / SECONDS;
  const rawRate = rawEvents / SECONDS;
  out('append through the API (8 runners x batches of 100)', `${apiRate.toFixed(0)} ev/s`);
  out('raw batched INSERT of the same rows (8 connections)', `${rawRate.toFixed(0)} ev/s`);
  out('ratio API / raw', (apiRate / rawRate).toFixed(3), 'target >= 0.25');

  // 3. Single-event append latency.
  const single = runners[0]!;
  const latencies: number[] = [];
  for (let i = 0; i < 1000; i++) {
    const started = performance.now();
    await call(
      'POST',
      `/api/v1/runs/${single.runId}/events`,
      { runnerId: single.runnerId, events: [{ key: `single-${i}`, ...eventRow(i) }] },
      single.runId,
    );
    latencies.push(performance.now() - started);
  }
  out('single append p50', `${pct(latencies, 50).toFixed(2)} ms`);
  out('single append p99', `${pct(latencies, 99).toFixed(2)} ms`);

  // 4. Result envelope of a 100,000-event turn (seeded in SQL: a realistic mix, terminal last).
  const big = await seedBigTurn(pool, { call, claimedRun }, 'rnr-bigresult');
  await pool.query('ANALYZE events');
  const resultTimes: number[] = [];
  let envelope: any;
  for (let i = 0; i < 30; i++) {
    const started = performance.now();
    envelope = await call('GET', `/api/v1/runs/${big}/result`);
    resultTimes.push(performance.now() - started);
  }
  if (!envelope.completed || envelope.reply !== 'all done')
    throw new Error('result envelope is wrong');
  out(
    `result envelope, ${envelope.scopedEventCount} events in the turn, p50`,
    `${pct(resultTimes, 50).toFixed(1)} ms`,
    'target <= 100 ms',
  );
  out('result envelope p99', `${pct(resultTimes, 99).toFixed(1)} ms`);

  // 5. Events page at seq 900,000 of 1,000,000.
  const huge = await claimedRun('rnr-hugepage1');
  await pool.query(
    `INSERT INTO events (run_id, seq, category, name, event_key, observed_at, data)
     SELECT $1, g, 'command_output', 'seeded', 'h-' || g, now(), jsonb_build_object('text', 'line ' || g, 'originalBytes', 10)
     FROM generate_series(1000, 1000999) g`,
    [huge],
  );
  await pool.query('UPDATE runs SET last_seq = 1000999 WHERE run_id = $1', [huge]);
  await pool.query('ANALYZE events');
  const pageTimes: number[] = [];
  for (let i = 0; i < 200; i++) {
    const started = performance.now();
    const page = await call('GET', `/api/v1/runs/${huge}/events?afterSeq=${900_000 + i}&limit=100`);
    pageTimes.push(performance.now() - started);
    if (page.events.length !== 100) throw new Error('short page');
  }
  out(
    'events page (100) at seq 900,000 of 1,000,000 p50',
    `${pct(pageTimes, 50).toFixed(2)} ms`,
    'target <= 10 ms',
  );
  out('events page p99', `${pct(pageTimes, 99).toFixed(2)} ms`);

  // 6. Runs created per second (8 concurrent clients).
  let created = 0;
  const deadline = Date.now() + Math.min(SECONDS, 5) * 1000;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (Date.now() < deadline) {
        await call('POST', '/api/v1/runs', runBody());
        created++;
      }
    }),
  );
  out(
    'runs created per second (8 clients)',
    `${(created / Math.min(SECONDS, 5)).toFixed(0)} runs/s`,
  );
  out(
    'manager RSS now / peak',
    `${manager.rssMb().toFixed(0)} / ${peakRss.toFixed(0)} MB`,
    'target <= 200 MB',
  );
} finally {
  clearInterval(rssTimer);
  await pool.end();
  await manager.stop();
}
