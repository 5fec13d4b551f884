/**
 * Read-side hot paths on one PostgreSQL (TEST_DATABASE_URL or 127.0.0.1:5432), the manager
 * running as its own process (dist/server.js) and driven over real HTTP on loopback, while
 * runners keep appending small event batches through the API (the append load):
 * - the result envelope of a 100,000-event turn (target p99 <= 100 ms);
 * - an events page at seq 900,000 of 1,000,000 (target p99 <= 10 ms);
 * - queue stats and the commander view (with a reader) over 100,000 tasks (target p50 <= 5 ms).
 * Each figure is printed with its target and the figure measured before this change (issue 15,
 * same machine class).
 */
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import pg from 'pg';
import { runBody } from '../test/helpers.js';
import {
  out,
  pct,
  requirePostgres,
  startManagerProcess,
  seedBigTurn,
  withBuiltinProfile,
} from './support.js';

const TASKS = Number(process.env.BENCH_QUEUE_TASKS ?? 100_000);
const APPENDERS = Number(process.env.BENCH_APPENDERS ?? 8);
const BATCH_EVERY_MS = 50;

await requirePostgres();
// The seeded tasks and attempts stand for a queue's history, not work to do: the scheduler (on
// by default) would act on them meanwhile.
const manager = await startManagerProcess(
  { SVC_DB_POOL_SIZE: '16', SVC_SCHEDULER: 'off', LOG_LEVEL: process.env.HR_LOG ?? 'warn' },
  withBuiltinProfile,
);
const pool = new pg.Pool({ connectionString: manager.url, max: 4 });
manager.process.once('exit', (code, signal) =>
  console.error(`manager exited: ${code ?? signal} at ${new Date().toISOString()}`),
);
/** Lease tokens by run: a runner sends its claim's token on every runner-facing call. */
const tokens = new Map<string, string>();

async function call(method: string, path: string, body?: unknown, runId?: string): Promise<any> {
  const token = runId ? tokens.get(runId) : undefined;
  const response = await fetch(`${manager.base}${path}`, {
    method,
    headers: {
      ...(body ? { 'content-type': 'application/json' } : {}),
      ...(token ? { 'x-lease-token': token } : {}),
    },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const json: unknown = await response.json();
  if (!response.ok)
    throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(json)}`);
  return json;
}

async function timed(path: string): Promise<{ ms: number; body: any }> {
  const started = performance.now();
  const body = await call('GET', path);
  return { ms: performance.now() - started, body };
}

async function claimedRun(runnerId: string): Promise<string> {
  const run = await call('POST', '/api/v1/runs', runBody());
  const claim = await call('POST', `/api/v1/runs/${run.runId}/claim`, { runnerId });
  tokens.set(run.runId, claim.leaseToken);
  return run.runId as string;
}

const bigTurn = () => seedBigTurn(pool, { call, claimedRun }, 'rnr-readsbig');

async function hugeRun(): Promise<string> {
  const huge = await claimedRun('rnr-readshuge');
  await pool.query(
    `INSERT INTO events (run_id, seq, category, name, event_key, observed_at, data)
     SELECT $1, g, 'command_output', 'seeded', 'h-' || g, now(), jsonb_build_object('text', 'line ' || g, 'originalBytes', 10)
     FROM generate_series(1000, 1000999) g`,
    [huge],
  );
  await pool.query('UPDATE runs SET last_seq = 1000999 WHERE run_id = $1', [huge]);
  return huge;
}

/** 100,000 tasks over four queues and four states, as queue.bench.ts seeds them. */
async function seedTasks(): Promise<void> {
  await pool.query(
    `INSERT INTO queue_tasks (task_id, tenant_id, project_id, queue, lane, title, priority, state,
       backend_profile, provider_id, workspace_ref, payload, payload_hash, metadata, max_attempts,
       attempt_count, latest_attempt_id, session_id, change_seq, enqueue_seq)
     SELECT 'tsk-bench' || lpad(i::text, 8, '0'), 'tenant-a', 'proj-1', 'q' || (i % 4), 'default',
       'bench task ' || i, (i % 3) - 1, (ARRAY['queued','running','completed','failed'])[1 + i % 4],
       'builtin-a', 'builtin-a', '{"kind":"opaque"}',
       jsonb_build_object('prompt', 'do bench task ' || i), md5(i::text), '{}', 3,
       CASE WHEN i % 4 = 0 THEN 0 ELSE 1 END,
       CASE WHEN i % 4 = 0 THEN NULL ELSE 'att-bench' || lpad(i::text, 8, '0') END,
       CASE WHEN i % 4 = 0 THEN NULL ELSE 'ses-bench' || lpad(i::text, 8, '0') END,
       i, i
     FROM generate_series(1, $1::int) i`,
    [TASKS],
  );
  await pool.query(
    `INSERT INTO queue_attempts (attempt_id, task_id, retry_index, state, session_id,
       session_origin, thread, run_id, command_id, terminal_status, failure_kind)
     SELECT latest_attempt_id, task_id, 0, state, session_id, 'bootstrapped', 'start',
       'run-bench' || substr(task_id, 10), 'cmd-bench' || substr(task_id, 10),
       CASE WHEN state = 'running' THEN NULL ELSE state END,
       CASE WHEN state = 'failed' THEN 'provider-unavailable' END
     FROM queue_tasks WHERE latest_attempt_id IS NOT NULL`,
  );
  // A reader that has read half of queue q1.
  await pool.query(
    `INSERT INTO queue_read_cursors (reader_id, task_id, reader_kind, queue, read_version, read_change_seq)
     SELECT 'bench', task_id, 'user', queue, version, change_seq FROM queue_tasks
     WHERE queue = 'q1' AND change_seq % 8 = 1`,
  );
  await pool.query('UPDATE queue_watermark SET change_seq = $1', [TASKS]);
}

/** Runners appending a 10-event batch every BATCH_EVERY_MS each, until stopped. */
function appendLoad(runs: { runId: string; runnerId: string }[]) {
  let stopped = false;
  let events = 0;
  const started = performance.now();
  let failure: Error | undefined;
  const loops = runs
    .map(async ({ runId, runnerId }) => {
      for (let b = 0; !stopped; b++) {
        const next = performance.now() + BATCH_EVERY_MS;
        await call(
          'POST',
          `/api/v1/runs/${runId}/events`,
          {
            runnerId,
            events: Array.from({ length: 10 }, (_, k) => ({
              key: `load-${b}-${k}`,
              category: 'command_output',
              name: 'exec',
              data: {
                itemId: `item-${k}`,
                stream: 'stdout',
                text: `line ${b}.${k}`,
                originalBytes: 8,
              },
            })),
          },
          runId,
        );
        events += 10;
        const wait = next - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
    })
    .map((loop) =>
      loop.catch(
        (error: unknown) =>
          void (failure ??= error instanceof Error ? error : new Error('append failed')),
      ),
    );
  return {
    async stop(): Promise<number> {
      stopped = true;
      await Promise.all(loops);
      if (failure) throw failure;
      return events / ((performance.now() - started) / 1000);
    },
  };
}

let load: ReturnType<typeof appendLoad> | undefined;
try {
  const seedStarted = performance.now();
  const [big, huge] = [await bigTurn(), await hugeRun()];
  await seedTasks();
  for (const table of ['events', 'queue_tasks', 'queue_attempts'])
    await pool.query(`VACUUM ANALYZE ${table}`);
  console.log(
    `PostgreSQL ${(await pool.query('SHOW server_version')).rows[0].server_version}, node ${process.version}; ` +
      `seeded 1,100,000 events and ${TASKS} tasks in ${((performance.now() - seedStarted) / 1000).toFixed(1)} s`,
  );
  const appenders = await Promise.all(
    Array.from({ length: APPENDERS }, async (_, i) => {
      const runnerId = `rnr-load${String(i).padStart(4, '0')}`;
      return { runnerId, runId: await claimedRun(runnerId) };
    }),
  );
  load = appendLoad(appenders);
  // Warm-up: plans cached, the first counter fold done.
  for (let i = 0; i < 5; i++) {
    await timed(`/api/v1/runs/${big}/result`);
    await timed(`/api/v1/runs/${huge}/events?afterSeq=900000&limit=100`);
    await timed('/api/v1/queue/stats');
    await timed('/api/v1/queue/commander?queue=q1&readerId=bench&limit=50');
  }

  const envelope: number[] = [];
  const page: number[] = [];
  const stats: number[] = [];
  const commander: number[] = [];
  const groupBy: number[] = [];
  const unreadScan: number[] = [];
  for (let i = 0; i < 200; i++) {
    if (i % 4 === 0) {
      const r = await timed(`/api/v1/runs/${big}/result`);
      if (!r.body.completed || r.body.reply !== 'all done')
        throw new Error('result envelope is wrong');
      envelope.push(r.ms);
    }
    const p = await timed(`/api/v1/runs/${huge}/events?afterSeq=${900_000 + i}&limit=100`);
    if (p.body.events.length !== 100) throw new Error('short page');
    page.push(p.ms);
    if (i % 2 === 0) {
      const s = await timed('/api/v1/queue/stats');
      if (s.body.tasks.total !== TASKS) throw new Error(`stats count ${s.body.tasks.total}`);
      stats.push(s.ms);
      const c = await timed('/api/v1/queue/commander?queue=q1&readerId=bench&limit=50');
      if (c.body.stats.total !== TASKS / 4 || c.body.unread !== TASKS / 8)
        throw new Error(`commander counts ${c.body.stats.total} / ${c.body.unread}`);
      commander.push(c.ms);
      // The reference in the same run: what the views ran per request before the counters.
      let started = performance.now();
      await pool.query(
        `SELECT queue, lane, state, backend_profile, count(*)::int AS n FROM queue_tasks
         GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4 LIMIT 501`,
      );
      await pool.query(
        `SELECT a.state, a.failure_kind, count(*)::int, count(*) FILTER (WHERE a.retry_index > 0)::int
         FROM queue_attempts a JOIN queue_tasks t ON t.task_id = a.task_id GROUP BY 1, 2`,
      );
      groupBy.push(performance.now() - started);
      started = performance.now();
      await pool.query(
        `SELECT count(*)::int FROM queue_tasks t LEFT JOIN queue_read_cursors rc
           ON rc.task_id = t.task_id AND rc.reader_id = 'bench'
         WHERE t.queue = 'q1' AND (rc.read_version IS NULL OR rc.read_version < t.version)`,
      );
      unreadScan.push(performance.now() - started);
    }
  }
  const rate = await load.stop();
  load = undefined;
  const ms = (values: number[], p: number) => `${pct(values, p).toFixed(1)} ms`;
  console.log(`append load: ${APPENDERS} runners, ${rate.toFixed(0)} events/s through the API`);
  out('figure', 'now', 'target; before (issue 15)');
  out('result envelope, 100,000-event turn, p50', ms(envelope, 50), 'before 64 ms');
  out('result envelope p99', ms(envelope, 99), 'target <= 100 ms; before 191 ms');
  out('events page (100) at seq 900,000, p50', ms(page, 50), 'before 3.8 ms');
  out('events page p99', ms(page, 99), 'target <= 10 ms; before 16 ms');
  out(`queue stats, ${TASKS} tasks, p50`, ms(stats, 50), 'target <= 5 ms; before 95 ms');
  out('queue stats p99', ms(stats, 99));
  out('  same run: the former GROUP BY queries alone, SQL only, p50', ms(groupBy, 50), 'reference');
  out(
    `commander (queue of ${TASKS / 4}, with a reader) p50`,
    ms(commander, 50),
    'target <= 5 ms; before 55 ms',
  );
  out('commander p99', ms(commander, 99));
  out(
    '  same run: the former unread count(*) alone, SQL only, p50',
    ms(unreadScan, 50),
    'reference',
  );
  console.log(
    `load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')} on ${availableParallelism()} cores`,
  );
} catch (error) {
  console.error(error);
  process.exitCode = 1;
} finally {
  await load?.stop().catch(() => undefined);
  await pool.end();
  await manager.stop();
}
