import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestStore, freePort, testServerUrl, waitForHttp } from '@svc/testkit';
import { LocalSecretStore } from '../src/index.js';
import { managerTemplate } from '../test/helpers.js';
import { cpuQuota, type CpuQuota } from './cpu-quota.js';

/** Shared pieces of the manager benchmarks: percentiles, aligned output, a manager process. */
export const pct = (values: number[], p: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
};

export const out = (label: string, value: string, target = '') =>
  console.log(`${label.padEnd(58)} ${value.padStart(16)}  ${target}`);

/** Exit quietly when no PostgreSQL server is reachable (benchmarks measure the real one). */
export async function requirePostgres(): Promise<void> {
  if (!(await testServerUrl())) {
    console.log('no PostgreSQL server reachable: set TEST_DATABASE_URL; benchmark skipped');
    process.exit(0);
  }
}

export interface ManagerProcess {
  base: string;
  url: string;
  dataDir: string;
  process: ChildProcess;
  rssMb(): number;
  stop(): Promise<void>;
}

/** The built manager as its own process on a fresh database, driven over real HTTP. */
export async function startManagerProcess(
  env: Record<string, string> = {},
  prepare?: (dataDir: string) => Promise<void>,
): Promise<ManagerProcess> {
  const [manager] = await startManagerReplicas(1, env, prepare);
  return manager!;
}

/**
 * `count` manager processes on one fresh database (replicas, as a deployment runs them), each
 * with its own data dir and port; stopping the last one drops the database. `cpuCores`: each
 * held to that many cores once ready (cpu-quota.ts); throws where no quota can be set.
 */
export async function startManagerReplicas(
  count: number,
  env: Record<string, string> = {},
  prepare?: (dataDir: string) => Promise<void>,
  cpuCores?: number,
): Promise<ManagerProcess[]> {
  const store = await createTestStore(managerTemplate);
  if (store.kind !== 'postgres') throw new Error('benchmarks need PostgreSQL');
  let running = count;
  const replicas: ManagerProcess[] = [];
  // One after the other: each applies (or finds applied) the migrations before it is ready.
  for (let i = 0; i < count; i++) {
    const dataDir = await mkdtemp(join(tmpdir(), 'svc-bench-'));
    await prepare?.(dataDir);
    const port = await freePort();
    // The same node flags as `npm start` and the deployment. BENCH_MANAGER_FLAGS adds some
    // (`--cpu-prof --cpu-prof-dir=…`, `--trace-gc`) or overrides them (the later flag wins);
    // BENCH_MANAGER_STDOUT=1 shows the manager's standard output (its logs, `--trace-gc`).
    const child = spawn(
      process.execPath,
      [
        '--max-semi-space-size=8',
        ...(process.env.BENCH_MANAGER_FLAGS?.split(' ') ?? []),
        join(import.meta.dirname, '../dist/server.js'),
      ],
      {
        env: {
          ...process.env,
          DATABASE_URL: store.url,
          PORT: String(port),
          SVC_DATA_DIR: dataDir,
          LOG_LEVEL: 'warn',
          ...env,
        },
        stdio: ['ignore', process.env.BENCH_MANAGER_STDOUT ? 'inherit' : 'ignore', 'inherit'],
      },
    );
    const base = `http://127.0.0.1:${port}`;
    await waitForHttp(`${base}/health/readiness`, 60_000);
    let quota: CpuQuota | null = null;
    if (cpuCores !== undefined) {
      quota = await cpuQuota(`svc-bench-${child.pid}`, cpuCores);
      if (!quota) throw new Error('no writable cgroup here: cannot hold a replica to a CPU quota');
      await quota.add(child.pid!);
    }
    replicas.push({
      base,
      url: store.url,
      dataDir,
      process: child,
      rssMb: () =>
        Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1] ?? 0) /
        1024,
      async stop() {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
        await quota?.remove();
        await rm(dataDir, { recursive: true, force: true });
        if (--running === 0) await store.drop();
      },
    });
  }
  return replicas;
}

/** JSON over HTTP, failing loudly on any error answer. */
export async function call(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<any> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const json: unknown = await response.json();
  if (!response.ok)
    throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(json)}`);
  return json;
}

/** A start hook for startManagerProcess: builtin-a configured (empty values) in the data dir. */
export async function withBuiltinProfile(dataDir: string): Promise<void> {
  await new LocalSecretStore(join(dataDir, 'secrets')).put('svc-v01-provider-builtin-a', {
    'auth.json': Buffer.from('{}'),
    'config.toml': Buffer.from(''),
  });
}

/** How a bench speaks to the manager as a runner: calls carrying the run's lease token. */
export interface RunnerApi {
  call: (method: string, path: string, body?: unknown, runId?: string) => Promise<any>;
  claimedRun: (runnerId: string) => Promise<string>;
}

/**
 * A 100,000-event turn: claimed and acknowledged through the API, 99,998 events of a realistic
 * mix seeded in SQL (with the counters the event log keeps), then its final reply and terminal
 * status through the API. Returns the run id.
 */
export async function seedBigTurn(
  pool: { query(text: string, values?: unknown[]): Promise<{ rows: any[] }> },
  api: RunnerApi,
  runnerId: string,
): Promise<string> {
  const { call } = api;
  const big = await api.claimedRun(runnerId);
  const turn = await call('POST', `/api/v1/runs/${big}/commands`, {
    type: 'turn',
    payload: { prompt: 'long task' },
  });
  await call('GET', `/api/v1/runs/${big}/commands?runnerId=${runnerId}`, undefined, big);
  await call('POST', `/api/v1/commands/${turn.commandId}/ack`, { runnerId }, big);
  const { rows } = await pool.query('SELECT last_seq FROM runs WHERE run_id = $1', [big]);
  const start = Number(rows[0].last_seq);
  await pool.query(
    `INSERT INTO events (run_id, seq, command_id, category, name, event_key, observed_at, data)
     SELECT $1, $2 + g, $3,
       (ARRAY['assistant_message','tool_call','tool_call','command_output','backend_status'])[1 + g % 5],
       'seeded', 'seed-' || g, now(),
       CASE g % 5
         WHEN 0 THEN jsonb_build_object('itemId', 'msg-' || g, 'text', 'progress note ' || g, 'final', false)
         WHEN 1 THEN jsonb_build_object('itemId', 'tool-' || (g / 5), 'status', 'started', 'toolName', 'shell', 'type', 'commandExecution', 'command', 'make test')
         WHEN 2 THEN jsonb_build_object('itemId', 'tool-' || (g / 5), 'status', 'completed', 'exitCode', g % 3, 'toolName', 'shell', 'type', 'commandExecution', 'command', 'make test')
         WHEN 3 THEN jsonb_build_object('itemId', 'tool-' || (g / 5), 'text', repeat('x', 200), 'originalBytes', 4096, 'keptBytes', 200, 'outputTruncated', true)
         ELSE jsonb_build_object('tokens', g)
       END
     FROM generate_series(1, 99998) g`,
    [big, start, turn.commandId],
  );
  await pool.query('UPDATE runs SET last_seq = $2 WHERE run_id = $1', [big, start + 99_998]);
  await pool.query(
    'UPDATE commands SET event_count = event_count + 99998, last_event_seq = $2 WHERE command_id = $1',
    [turn.commandId, start + 99_998],
  );
  await call(
    'POST',
    `/api/v1/runs/${big}/events`,
    {
      runnerId,
      events: [
        {
          key: 'final',
          commandId: turn.commandId,
          category: 'assistant_message',
          data: { itemId: 'final', text: 'all done', final: true, replyAuthority: true },
        },
      ],
    },
    big,
  );
  await call(
    'PATCH',
    `/api/v1/commands/${turn.commandId}/status`,
    { runnerId, state: 'completed' },
    big,
  );
  return big;
}
