/**
 * Watching runs live: how long after a runner's append a waiting client sees the event, for a
 * client long-polling `GET /runs/:id/events?afterSeq&waitMs` and for one reading the SSE stream
 * (target p50 < 50 ms), and what one `/metrics` scrape costs with 100,000 runs in the store.
 */
import { join } from 'node:path';
import pg from 'pg';
import { LocalSecretStore } from '../src/index.js';
import { openStream } from '../test/sse-client.js';
import { runBody } from '../test/helpers.js';
import { call, out, pct, requirePostgres, startManagerProcess } from './support.js';

await requirePostgres();
const ROUNDS = Number(process.env['LIVE_BENCH_ROUNDS'] ?? 200);
const SEEDED_RUNS = 100_000;
const SCRAPES = 50;

const manager = await startManagerProcess({ SVC_SCHEDULER: 'off' }, async (dataDir) => {
  await new LocalSecretStore(join(dataDir, 'secrets')).put('svc-v01-provider-builtin-a', {
    'auth.json': Buffer.from('{}'),
    'config.toml': Buffer.from(''),
  });
});
const base = manager.base;
const pool = new pg.Pool({ connectionString: manager.url, max: 2 });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const fmt = (values: number[]) =>
  `${pct(values, 50).toFixed(1)} / ${pct(values, 99).toFixed(1)} ms`;

try {
  const run = await call(base, 'POST', '/api/v1/runs', runBody());
  const runnerId = 'rnr-live-bench';
  const claim = await call(base, 'POST', `/api/v1/runs/${run.runId}/claim`, {
    runnerId,
    mode: 'ordinary',
  });
  const fenced = { 'x-lease-token': claim.leaseToken as string };
  let lastSeq = Number((await call(base, 'GET', `/api/v1/runs/${run.runId}`)).lastSeq);
  let n = 0;
  const append = () =>
    call(
      base,
      'POST',
      `/api/v1/runs/${run.runId}/events`,
      {
        runnerId,
        events: [{ key: `e-${++n}`, category: 'backend_status', name: 'bench', data: { n } }],
      },
      fenced,
    );

  // Long-poll: the client is already waiting when the runner appends.
  const polled: number[] = [];
  for (let i = 0; i < ROUNDS; i += 1) {
    const waiting = call(
      base,
      'GET',
      `/api/v1/runs/${run.runId}/events?afterSeq=${lastSeq}&waitMs=10000`,
    );
    await sleep(15);
    const started = performance.now();
    await append();
    const page = await waiting;
    polled.push(performance.now() - started);
    if (page.events.length === 0) throw new Error('the long-poll ended without the event');
    lastSeq = Number(page.events.at(-1).seq);
  }

  // SSE: one open stream; each append is timed until its message is parsed.
  const stream = await openStream(`${base}/api/v1/runs/${run.runId}/events/stream`, {
    'last-event-id': String(lastSeq),
  });
  const streamed: number[] = [];
  try {
    for (let i = 0; i < ROUNDS; i += 1) {
      await sleep(15);
      const started = performance.now();
      const appended = await append();
      const seq = String(appended.lastSeq ?? lastSeq + 1);
      await stream.next((m) => m.id === seq, 10_000);
      streamed.push(performance.now() - started);
      lastSeq = Number(seq);
    }
  } finally {
    stream.close();
  }

  // /metrics with 100,000 runs: copies of the bench run under new ids.
  await pool.query(
    `INSERT INTO runs
     SELECT (jsonb_populate_record(NULL::runs, to_jsonb(r) || jsonb_build_object(
       'run_id', 'run-seed' || lpad(g::text, 8, '0')))).*
     FROM runs r, generate_series(1, $2::int) g WHERE r.run_id = $1`,
    [run.runId, SEEDED_RUNS],
  );
  const scrapes: number[] = [];
  for (let i = 0; i < SCRAPES; i += 1) {
    const started = performance.now();
    const response = await fetch(`${base}/metrics`);
    await response.text();
    if (!response.ok) throw new Error(`/metrics answered ${response.status}`);
    scrapes.push(performance.now() - started);
  }

  console.log(`live watching: ${ROUNDS} appends each; /metrics ${SCRAPES} scrapes`);
  out('append-to-visible, long-poll client (p50 / p99)', fmt(polled), 'target p50 < 50 ms');
  out('append-to-visible, SSE client (p50 / p99)', fmt(streamed), 'target p50 < 50 ms');
  out(
    `/metrics scrape, ${SEEDED_RUNS.toLocaleString('en')} runs (p50 / p99)`,
    fmt(scrapes),
    `first ${scrapes[0]!.toFixed(1)} ms`,
  );
} finally {
  await pool.end();
  await manager.stop();
}
