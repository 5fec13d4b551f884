/**
 * A fleet on one manager: RUNNERS simulated runners (default 2,000) on one PostgreSQL
 * (TEST_DATABASE_URL or 127.0.0.1:5432), the manager running as its own process (dist/server.js)
 * and driven over real HTTP on loopback. Each runner holds a claimed lease renewed every 10 s,
 * keeps a command long-poll open at all times and appends a 10-event batch every 2 s, for
 * BENCH_FLEET_SECONDS (default 60). Prints leases lost (target 0), heartbeat and append latency
 * p50/p99 (target p99 <= 100 ms), and the manager's RSS and CPU.
 * The simulated runners share this one client process, which takes CPU of the same machine.
 */
import { setMaxListeners } from 'node:events';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { runBody } from '../test/helpers.js';
import { out, pct, requirePostgres, startManagerProcess, withBuiltinProfile } from './support.js';

const RUNNERS = Number(process.env.BENCH_FLEET_RUNNERS ?? 2_000);
const SECONDS = Number(process.env.BENCH_FLEET_SECONDS ?? 60);
const RENEW_MS = 10_000;
const BATCH_MS = 2_000;
const POLL_WAIT_MS = 25_000;
const WARMUP_MS = 5_000;

await requirePostgres();
const manager = await startManagerProcess(
  { SVC_DB_POOL_SIZE: process.env.BENCH_FLEET_POOL ?? '20' },
  withBuiltinProfile,
);

interface Sim {
  runId: string;
  runnerId: string;
  token: string;
}

// Plain node:http with its own sockets: every open long-poll holds one connection, and the
// runner's other calls never queue behind it on a shared socket.
const agent = new Agent({ keepAlive: true, maxSockets: Infinity });

function call(
  method: string,
  path: string,
  body?: unknown,
  token?: string,
  signal?: AbortSignal,
): Promise<{ status: number; body: any }> {
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      `${manager.base}${path}`,
      {
        method,
        agent,
        headers: {
          ...(payload ? { 'content-type': 'application/json' } : {}),
          ...(token ? { 'x-lease-token': token } : {}),
        },
        ...(signal ? { signal } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          try {
            resolve({
              status: res.statusCode ?? 0,
              body: JSON.parse(Buffer.concat(chunks).toString()),
            });
          } catch (error) {
            reject(error instanceof Error ? error : new Error(String(error)));
          }
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

async function ok(method: string, path: string, body?: unknown, token?: string): Promise<any> {
  const r = await call(method, path, body, token);
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** CPU seconds (user + system) the manager process has used so far. */
function managerCpuSeconds(): number {
  const stat = readFileSync(`/proc/${manager.process.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function pooled<T>(n: number, width: number, job: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array<T>(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) {
        const i = next++;
        results[i] = await job(i);
      }
    }),
  );
  return results;
}

const stop = new AbortController();
// Every simulated runner's open long-poll listens on this one signal.
setMaxListeners(0, stop.signal);
try {
  const setupStarted = performance.now();
  const sims = await pooled(RUNNERS, 16, async (i): Promise<Sim> => {
    const runnerId = `rnr-fleet${String(i).padStart(5, '0')}`;
    const run = await ok('POST', '/api/v1/runs', runBody());
    const claim = await ok('POST', `/api/v1/runs/${run.runId}/claim`, { runnerId });
    return { runId: run.runId, runnerId, token: claim.leaseToken };
  });
  console.log(
    `node ${process.version}; ${RUNNERS} runs created and claimed in ${((performance.now() - setupStarted) / 1000).toFixed(1)} s; ` +
      `running ${SECONDS} s`,
  );

  const heartbeats: number[] = [];
  const appends: number[] = [];
  // The first seconds hold the fleet's start: 2,000 first polls, renewals and batches at once.
  const steadyHeartbeats: number[] = [];
  const steadyAppends: number[] = [];
  let leasesLost = 0;
  let errors = 0;
  let polls = 0;
  let peakRss = 0;
  const rssTimer = setInterval(() => (peakRss = Math.max(peakRss, manager.rssMb())), 250);
  const deadline = Date.now() + SECONDS * 1000;
  const sleep = (ms: number) =>
    new Promise<void>((resolve) =>
      setTimeout(resolve, Math.max(0, Math.min(ms, deadline - Date.now()))),
    );
  const cpuStart = managerCpuSeconds();
  const clientCpuStart = process.cpuUsage();
  const wallStart = performance.now();

  const runner = async (sim: Sim, i: number) => {
    // Spread the fleet's timers so the load is steady, as real runners started over time are.
    const renew = async () => {
      await sleep((i / RUNNERS) * RENEW_MS);
      while (Date.now() < deadline) {
        const next = Date.now() + RENEW_MS;
        const started = performance.now();
        try {
          const r = await call(
            'PATCH',
            `/api/v1/runs/${sim.runId}/lease`,
            { runnerId: sim.runnerId },
            sim.token,
          );
          heartbeats.push(performance.now() - started);
          if (started - wallStart >= WARMUP_MS) steadyHeartbeats.push(performance.now() - started);
          if (r.status !== 200) leasesLost++;
        } catch {
          errors++;
        }
        await sleep(next - Date.now());
      }
    };
    const append = async () => {
      await sleep((i / RUNNERS) * BATCH_MS);
      for (let b = 0; Date.now() < deadline; b++) {
        const next = Date.now() + BATCH_MS;
        const events = Array.from({ length: 10 }, (_, k) => ({
          key: `f-${b}-${k}`,
          category: 'command_output',
          name: 'exec',
          data: { itemId: `item-${b}`, stream: 'stdout', text: `line ${b}.${k}`, originalBytes: 8 },
        }));
        const started = performance.now();
        try {
          const r = await call(
            'POST',
            `/api/v1/runs/${sim.runId}/events`,
            { runnerId: sim.runnerId, events },
            sim.token,
          );
          appends.push(performance.now() - started);
          if (started - wallStart >= WARMUP_MS) steadyAppends.push(performance.now() - started);
          if (r.status >= 300) errors++;
        } catch {
          errors++;
        }
        await sleep(next - Date.now());
      }
    };
    const poll = async () => {
      await sleep((i / RUNNERS) * BATCH_MS);
      while (Date.now() < deadline) {
        try {
          const r = await call(
            'GET',
            `/api/v1/runs/${sim.runId}/commands?runnerId=${sim.runnerId}&waitMs=${POLL_WAIT_MS}`,
            undefined,
            sim.token,
            stop.signal,
          );
          polls++;
          if (r.status !== 200) errors++;
        } catch {
          if (!stop.signal.aborted) errors++;
        }
      }
    };
    await Promise.all([renew(), append(), poll()]);
  };
  const fleet = Promise.all(sims.map(runner));
  await sleep(SECONDS * 1000);
  stop.abort();
  await fleet;
  clearInterval(rssTimer);
  const wall = (performance.now() - wallStart) / 1000;
  const cpu = managerCpuSeconds() - cpuStart;
  const clientCpu = process.cpuUsage(clientCpuStart);

  // Every lease must still be held by its runner at the end.
  const held = await pooled(sims.length, 16, async (i) => {
    const sim = sims[i]!;
    const r = await call(
      'PATCH',
      `/api/v1/runs/${sim.runId}/lease`,
      { runnerId: sim.runnerId },
      sim.token,
    );
    return r.status === 200;
  });
  leasesLost += held.filter((h) => !h).length;

  const ms = (values: number[], p: number) => `${pct(values, p).toFixed(1)} ms`;
  out(`leases lost (${RUNNERS} runners, ${SECONDS} s)`, String(leasesLost), 'target 0');
  out(
    `heartbeat p50 / p99 (${heartbeats.length})`,
    `${ms(heartbeats, 50)} / ${ms(heartbeats, 99)}`,
    'target p99 <= 100 ms',
  );
  out(
    `append of 10 events p50 / p99 (${appends.length})`,
    `${ms(appends, 50)} / ${ms(appends, 99)}`,
    'target p99 <= 100 ms',
  );
  out(
    `  after the first ${WARMUP_MS / 1000} s: heartbeat p50 / p99`,
    `${ms(steadyHeartbeats, 50)} / ${ms(steadyHeartbeats, 99)}`,
    'target p99 <= 100 ms',
  );
  out(
    `  after the first ${WARMUP_MS / 1000} s: append p50 / p99`,
    `${ms(steadyAppends, 50)} / ${ms(steadyAppends, 99)}`,
    'target p99 <= 100 ms',
  );
  out('events appended per second', `${((appends.length * 10) / wall).toFixed(0)} ev/s`);
  out('long-polls answered (timeouts and aborts aside), errors', `${polls}, ${errors}`);
  out('manager RSS now / peak', `${manager.rssMb().toFixed(0)} / ${peakRss.toFixed(0)} MB`);
  out('manager CPU (user + system) over the run', `${((cpu / wall) * 100).toFixed(0)} % of a core`);
  // The simulated fleet shares the machine: when this client is near a full core, the latencies
  // above include its own queueing, not only the manager's.
  out(
    'simulated fleet (this client) CPU over the run',
    `${(((clientCpu.user + clientCpu.system) / 1e6 / wall) * 100).toFixed(0)} % of a core`,
  );
} catch (error) {
  console.error(error);
  process.exitCode = 1;
} finally {
  stop.abort();
  agent.destroy();
  await manager.stop();
}
