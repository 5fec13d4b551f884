/**
 * Queue listing benchmark on one PostgreSQL (TEST_DATABASE_URL or 127.0.0.1:5432), the manager
 * running as its own process (dist/server.js) and driven over real HTTP on loopback.
 * Seeds 100,000 tasks (three in four with an attempt) by SQL, then pages through all of them
 * with `updatedAfter` polling, 50 per page, as an incremental poller would; prints tasks per
 * second and the page latency p50/p99 (target p50 <= 10 ms). Also: queue-order pages with a
 * cursor, one queue's polling, stats and the commander view over the same 100,000 tasks.
 */
import pg from 'pg';
import { out, pct, requirePostgres, startManagerProcess } from './support.js';

const TASKS = Number(process.env.BENCH_QUEUE_TASKS ?? 100_000);
const PAGE = 50;
await requirePostgres();
// The listing is measured over a fixed set of tasks: a scheduler (on by default) would start
// the queued ones meanwhile, and each start is a change the poller must read again.
const manager = await startManagerProcess({ SVC_SCHEDULER: 'off' });
const base = manager.base;
const pool = new pg.Pool({ connectionString: manager.url, max: 2 });

async function get(path: string): Promise<{ ms: number; body: any }> {
  const started = performance.now();
  const response = await fetch(`${base}${path}`);
  const body = await response.json();
  const ms = performance.now() - started;
  if (!response.ok) throw new Error(`GET ${path}: ${response.status} ${JSON.stringify(body)}`);
  return { ms, body };
}

/** 100,000 tasks over four queues and four states; every non-queued task has an attempt. */
async function seed(): Promise<void> {
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
       session_origin, thread, run_id, command_id, terminal_status, failure_kind, supervisor)
     SELECT latest_attempt_id, task_id, 0, state, session_id, 'bootstrapped', 'start',
       'run-bench' || substr(task_id, 10), 'cmd-bench' || substr(task_id, 10),
       CASE WHEN state = 'running' THEN NULL ELSE state END,
       CASE WHEN state = 'failed' THEN 'provider-unavailable' END,
       jsonb_build_object('phase', CASE WHEN state = 'running' THEN 'waiting-model' ELSE 'terminal' END,
         'lastActivitySeq', 12, 'lastActivityEventId', 'run-bench:12',
         'timeoutBudget', jsonb_build_object('state', 'within-budget', 'remainingMs', 500000, 'timeoutMs', 600000),
         'recoveryAction', 'continue-same-session', 'next', 'sessions output ' || session_id || ' --after-seq 0')
     FROM queue_tasks WHERE latest_attempt_id IS NOT NULL`,
  );
  await pool.query('UPDATE queue_watermark SET change_seq = $1', [TASKS]);
  await pool.query('ANALYZE queue_tasks; ANALYZE queue_attempts');
}

try {
  const seedStarted = performance.now();
  await seed();
  console.log(
    `PostgreSQL ${(await pool.query('SHOW server_version')).rows[0].server_version}, node ${process.version}; ` +
      `seeded ${TASKS} tasks in ${((performance.now() - seedStarted) / 1000).toFixed(1)} s`,
  );
  for (let i = 0; i < 50; i++)
    await get(`/api/v1/queue/tasks?updatedAfter=${i * PAGE}&limit=${PAGE}`);

  // 1. An incremental poller reading every change once: updatedAfter paging, 50 per page.
  const latencies: number[] = [];
  let after = 0;
  let seen = 0;
  const started = performance.now();
  for (;;) {
    const { ms, body } = await get(`/api/v1/queue/tasks?updatedAfter=${after}&limit=${PAGE}`);
    latencies.push(ms);
    seen += body.tasks.length;
    if (body.tasks.length === 0) break;
    after = body.nextUpdatedAfter;
  }
  const seconds = (performance.now() - started) / 1000;
  if (seen !== TASKS) throw new Error(`polling saw ${seen} tasks, expected ${TASKS}`);
  out(
    'tasks listed by updatedAfter polling (one client)',
    `${(seen / seconds).toFixed(0)} tasks/s`,
  );
  out(
    `page of ${PAGE} latency p50 / p99 (${latencies.length} pages)`,
    `${pct(latencies, 50).toFixed(2)} / ${pct(latencies, 99).toFixed(2)} ms`,
    'target p50 <= 10 ms',
  );

  // 2. Queue order (priority, then first submitted) with a cursor: the first 200 pages.
  const ordered: number[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 200; i++) {
    const { ms, body }: { ms: number; body: any } = await get(
      `/api/v1/queue/tasks?limit=${PAGE}${cursor ? `&cursor=${cursor}` : ''}`,
    );
    ordered.push(ms);
    cursor = body.nextCursor;
    if (!cursor) break;
  }
  out(
    'queue-order page of 50 with cursor p50 / p99',
    `${pct(ordered, 50).toFixed(2)} / ${pct(ordered, 99).toFixed(2)} ms`,
  );

  // 3. One queue's poller (a quarter of the tasks), from the middle of the sequence.
  const oneQueue: number[] = [];
  after = Math.floor(TASKS / 2);
  for (let i = 0; i < 200; i++) {
    const { ms, body } = await get(
      `/api/v1/queue/tasks?queue=q1&updatedAfter=${after}&limit=${PAGE}`,
    );
    oneQueue.push(ms);
    if (body.tasks.length === 0) break;
    after = body.nextUpdatedAfter;
  }
  out(
    'one queue, updatedAfter page of 50 p50 / p99',
    `${pct(oneQueue, 50).toFixed(2)} / ${pct(oneQueue, 99).toFixed(2)} ms`,
  );

  // 4. The grouped views over all 100,000 tasks.
  const stats: number[] = [];
  const commander: number[] = [];
  for (let i = 0; i < 10; i++) {
    stats.push((await get('/api/v1/queue/stats')).ms);
    commander.push((await get('/api/v1/queue/commander?queue=q1&readerId=bench&limit=50')).ms);
  }
  out('stats over all tasks p50', `${pct(stats, 50).toFixed(1)} ms`);
  out('commander (queue of 25,000, with a reader) p50', `${pct(commander, 50).toFixed(1)} ms`);
} finally {
  await pool.end();
  await manager.stop();
}
