/**
 * A runner fleet against the manager, on one PostgreSQL (TEST_DATABASE_URL or 127.0.0.1:5432),
 * each manager its own process (dist/server.js) driven over real HTTP on loopback. In one run:
 *
 * - the server's raw single-row commit rate (8 connections, autocommit INSERTs of 300-byte JSON
 *   rows into a scratch table), the ceiling the manager's commits are measured against, and
 *   PostgreSQL's own time per event of a coalesced append (group-cost.ts);
 * - `1x`: BENCH_FLEET_RUNNERS simulated runners (default 2,000: 1,000 appends/s) on one replica:
 *   append and heartbeat p50/p99 after the warm-up (target p99 <= 100 ms);
 * - `2.5x`: 2.5 times as many on the same one replica: it must still complete >= 90 % of its
 *   peak throughput, heartbeat p99 <= 1 s, no lease may expire, every refusal within 100 ms;
 * - `2r`: twice the 1x fleet spread over BENCH_FLEET_REPLICAS (default 2) replicas on one
 *   database, each replica free to use the whole machine;
 * - `1q` and `2q`: scale-out with each replica held to BENCH_FLEET_QUOTA cores (default 0.5,
 *   a cgroup CPU quota, as a pod's CPU limit holds it): one replica with
 *   BENCH_FLEET_QUOTA_RUNNERS runners (default half the 1x fleet), then BENCH_FLEET_REPLICAS
 *   replicas with as many runners each. Unlimited replicas on a two-core machine share the
 *   cores PostgreSQL and the fleet use too, so only held to the same share does the second
 *   replica's addition show: the replicas must carry >= 1.6 times what one carries, at the
 *   same p99. Needs root and a writable cgroup; skipped with a note elsewhere.
 *
 * Each runner renews its lease every 10 s, keeps a command long-poll open and produces a
 * 10-event batch every 2 s for BENCH_FLEET_SECONDS (default 60) per phase; the simulated
 * runners back off and resend as the real runner does (fleet-sim.ts). BENCH_FLEET_PHASES picks
 * phases (default `raw,1x,2.5x,2r,1q,2q`), BENCH_FLEET_POOL the manager's pool size (default 20).
 * The load average is printed before and after each phase: on a shared machine the figures
 * include the other work.
 */
import { loadavg } from 'node:os';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { createTestStore } from '@svc/testkit';
import { managerTemplate } from '../test/helpers.js';
import { cpuQuota } from './cpu-quota.js';
import { groupAppendCost } from './group-cost.js';
import { createSims, driveFleet, FleetClient, ms, type FleetStats } from './fleet-sim.js';
import {
  out,
  pct,
  requirePostgres,
  startManagerReplicas,
  withBuiltinProfile,
  type ManagerProcess,
} from './support.js';

const RUNNERS = Number(process.env.BENCH_FLEET_RUNNERS ?? 2_000);
const SECONDS = Number(process.env.BENCH_FLEET_SECONDS ?? 60);
const REPLICAS = Number(process.env.BENCH_FLEET_REPLICAS ?? 2);
const PHASES = (process.env.BENCH_FLEET_PHASES ?? 'raw,1x,2.5x,2r,1q,2q').split(',');
const QUOTA = Number(process.env.BENCH_FLEET_QUOTA ?? 0.5);
const QUOTA_RUNNERS = Number(process.env.BENCH_FLEET_QUOTA_RUNNERS ?? RUNNERS / 2);
const WARMUP_MS = Math.min(10_000, (SECONDS * 1000) / 4);

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

await requirePostgres();
console.log(`node ${process.version}; load average ${load()} (1, 5, 15 min)`);

/** Commits per second of 8 connections inserting one 300-byte JSON row each, autocommit. */
async function rawCommitRate(seconds: number): Promise<number> {
  const store = await createTestStore(managerTemplate);
  if (store.kind !== 'postgres') throw new Error('benchmarks need PostgreSQL');
  const pool = new pg.Pool({ connectionString: store.url, max: 8 });
  // Dropping the scratch database ends connections the pool may still be closing.
  pool.on('error', () => {});
  try {
    await pool.query('CREATE TABLE scratch (id bigserial PRIMARY KEY, data jsonb NOT NULL)');
    const row = JSON.stringify({ text: 'x'.repeat(280), n: 1 });
    let commits = 0;
    const until = performance.now() + seconds * 1000;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (performance.now() < until) {
          await pool.query('INSERT INTO scratch (data) VALUES ($1)', [row]);
          commits++;
        }
      }),
    );
    return commits / seconds;
  } finally {
    await pool.end();
    await store.drop();
  }
}

/** Whether this process may hold a replica to a CPU quota (tried on a scratch cgroup). */
async function cpuQuotaAvailable(): Promise<boolean> {
  const quota = await cpuQuota(`svc-bench-check-${process.pid}`, 1);
  await quota?.remove();
  return quota !== null;
}

/** The kernel's count of connections dropped by a full listen queue, and of SYNs sent again. */
function tcpDrops(): { overflows: number; synRetrans: number } {
  const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n');
  const value = (name: string) => {
    for (let i = 0; i + 1 < lines.length; i += 2) {
      const names = lines[i]!.split(' ');
      const at = names.indexOf(name);
      if (at > 0) return Number(lines[i + 1]!.split(' ')[at]);
    }
    return 0;
  };
  return { overflows: value('ListenOverflows'), synRetrans: value('TCPSynRetrans') };
}

/** CPU seconds (user + system) a process has used so far. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * Mean coalesced group sizes, refusals by lane and reason, and the event-loop delay (p99 /
 * max since the previous scrape, which resets it) from one replica's metrics.
 */
async function replicaFigures(base: string): Promise<[string, string, string, string, string]> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const gauge = (name: string) =>
    Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN) * 1000;
  const loop = `${gauge('nodejs_eventloop_lag_p99_seconds').toFixed(0)} / ${gauge('nodejs_eventloop_lag_max_seconds').toFixed(0)} ms`;
  const refused = [
    ...text.matchAll(/^svc_admission_refused_total\{lane="(\w+)",reason="([\w-]+)"\} (\S+)$/gm),
  ]
    .filter((m) => Number(m[3]) > 0)
    .map((m) => `${m[1]}/${m[2]} ${m[3]}`)
    .join(', ');
  const value = (name: string, kind: string) =>
    Number(new RegExp(`^${name}\\{kind="${kind}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  const groups = ['append', 'renewal']
    .map((kind) => {
      const count = value('svc_write_group_size_count', kind);
      return `${kind} ${count ? (value('svc_write_group_size_sum', kind) / count).toFixed(1) : '-'}`;
    })
    .join(', ');
  const served = [
    ['PATCH', '/api/v1/runs/:runId/lease'],
    ['POST', '/api/v1/runs/:runId/events'],
  ]
    .map(([method, route]) =>
      serverP99(text, (l) => l.method === method && l.route === route && l.status_code === '200'),
    )
    .join(' / ');
  const refusals = serverP99(text, (l) => l.status_code === '503');
  return [groups, refused || 'none', loop, served, refusals];
}

/**
 * p99 of the answers `pick` selects as the replica timed them (from arrival at the router to
 * the last byte written), their histograms summed, interpolated within the bucket: the part
 * of a client's latency spent inside the manager, as against in the kernel's queues and the
 * client.
 */
function serverP99(text: string, pick: (labels: Record<string, string>) => boolean): string {
  const counts = new Map<number, number>();
  for (const m of text.matchAll(/^svc_http_request_duration_seconds_bucket\{([^}]*)\} (\S+)$/gm)) {
    const labels = Object.fromEntries(
      [...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]),
    );
    if (!pick(labels)) continue;
    const le = labels.le === '+Inf' ? Infinity : Number(labels.le);
    counts.set(le, (counts.get(le) ?? 0) + Number(m[2]));
  }
  const buckets = [...counts].sort((a, b) => a[0] - b[0]).map(([le, count]) => ({ le, count }));
  const total = buckets.at(-1)?.count ?? 0;
  if (total === 0) return '-';
  const rank = total * 0.99;
  let below = { le: 0, count: 0 };
  for (const bucket of buckets) {
    if (bucket.count >= rank) {
      if (bucket.le === Infinity) return `> ${below.le * 1000} ms`;
      const share = (rank - below.count) / Math.max(1, bucket.count - below.count);
      return `${((below.le + (bucket.le - below.le) * share) * 1000).toFixed(0)} ms`;
    }
    below = bucket;
  }
  return '-';
}

interface PhaseResult {
  name: string;
  runners: number;
  stats: FleetStats;
  eventsPerS: number;
  appendsPerS: number;
  /** Time to refusal p99 as replica 1 timed it (its part of the client's figure). */
  refusalInside: string;
}

async function phase(
  name: string,
  runners: number,
  replicas: number,
  cpuCores?: number,
): Promise<PhaseResult> {
  const held = cpuCores === undefined ? '' : `, each held to ${cpuCores} cores`;
  console.log(`\n--- ${name}: ${runners} runners on ${replicas} replica(s)${held}; load ${load()}`);
  const managers: ManagerProcess[] = await startManagerReplicas(
    replicas,
    { SVC_DB_POOL_SIZE: process.env.BENCH_FLEET_POOL ?? '20', SVC_DRAIN_DELAY_MS: '0' },
    withBuiltinProfile,
    cpuCores,
  );
  const client = new FleetClient();
  try {
    const setup = performance.now();
    const sims = await createSims(
      client,
      managers.map((m) => m.base),
      runners,
    );
    await client.warm(sims, 2);
    console.log(
      `${runners} runs created and claimed, 2 connections per runner opened, in ${((performance.now() - setup) / 1000).toFixed(1)} s; running ${SECONDS} s`,
    );
    const tcp0 = tcpDrops();
    for (const m of managers) await replicaFigures(m.base); // resets the loop-delay histogram
    const cpu0 = managers.map((m) => cpuSeconds(m.process.pid!));
    const clientCpu0 = process.cpuUsage();
    const wall0 = performance.now();
    const stats = await driveFleet(client, sims, SECONDS, WARMUP_MS);
    const wall = (performance.now() - wall0) / 1000;
    const cpu = managers.map((m, i) => ((cpuSeconds(m.process.pid!) - cpu0[i]!) / wall) * 100);
    const clientCpu = process.cpuUsage(clientCpu0);
    const tcp = tcpDrops();
    const eventsPerS = stats.storedEvents / stats.steadySeconds;
    const appendsPerS = stats.storedAppends / stats.steadySeconds;
    const after = `after the first ${WARMUP_MS / 1000} s`;
    out(
      'events offered / stored per s',
      `${(stats.offeredEvents / stats.steadySeconds).toFixed(0)} / ${eventsPerS.toFixed(0)}`,
    );
    out('appends answered per s', appendsPerS.toFixed(0));
    out(
      `heartbeat p50 / p99 (${after})`,
      `${ms(stats.steadyHeartbeats, 50)} / ${ms(stats.steadyHeartbeats, 99)}`,
    );
    out(
      `append p50 / p99 (${after})`,
      `${ms(stats.steadyAppends, 50)} / ${ms(stats.steadyAppends, 99)}`,
    );
    out(
      'heartbeat / append p99 (whole run)',
      `${ms(stats.heartbeats, 99)} / ${ms(stats.appends, 99)}`,
    );
    out(
      'refused appends, polls; time to refusal p99 / max',
      `${stats.refusedAppends}, ${stats.refusedPolls}; ${ms(stats.refusals, 99)} / ${ms(stats.refusals, 100)}`,
    );
    out('refused calls after the first 10 s', String(stats.steadyRefused));
    out('leases expired, lost', `${stats.leasesExpired}, ${stats.leasesLost}`);
    out('long-polls answered, errors', `${stats.polls}, ${stats.errors}`);
    // Machine-wide counters: other processes' connections count too.
    out(
      'listen-queue overflows, SYN retransmissions (machine)',
      `${tcp.overflows - tcp0.overflows}, ${tcp.synRetrans - tcp0.synRetrans}`,
    );
    const [groups, refusedBy, loop, served, refusalInside] = await replicaFigures(
      managers[0]!.base,
    );
    out('mean group size (replica 1)', groups);
    out('refused by lane/reason (replica 1)', refusedBy);
    out('manager event-loop delay p99 / max (replica 1)', loop);
    out('heartbeat / append p99 inside the manager (replica 1, whole run)', served);
    out('time to refusal p99 inside the manager (replica 1, whole run)', refusalInside);
    out('manager CPU per replica (% of a core)', cpu.map((c) => c.toFixed(0)).join(', '));
    out('manager RSS per replica (MB)', managers.map((m) => m.rssMb().toFixed(0)).join(', '));
    out(
      'simulated fleet (this client) CPU (% of a core)',
      (((clientCpu.user + clientCpu.system) / 1e6 / wall) * 100).toFixed(0),
    );
    out(
      'simulated fleet (this client) event-loop delay p99',
      `${stats.clientLagP99.toFixed(0)} ms`,
    );
    console.log(`load average after: ${load()}`);
    return { name, runners, stats, eventsPerS, appendsPerS, refusalInside };
  } finally {
    client.destroy();
    for (const manager of managers) await manager.stop();
  }
}

/** What REPLICAS replicas carry against one (`one`, `two`: phases of the same load per replica). */
function scaleOut(label: string, one: PhaseResult, two: PhaseResult, targets: boolean): void {
  const target = (text: string) => (targets ? text : '');
  const p99s = (r: PhaseResult) =>
    `${ms(r.stats.steadyAppends, 99)} / ${ms(r.stats.steadyHeartbeats, 99)}`;
  out(
    `${REPLICAS} replicas, ${two.runners} runners ${label}: events stored per s (one, ${one.runners} runners: ${one.eventsPerS.toFixed(0)})`,
    two.eventsPerS.toFixed(0),
  );
  out(
    `${REPLICAS} replicas / one ${label}`,
    `${(two.eventsPerS / one.eventsPerS).toFixed(2)} x`,
    target('target >= 1.6 x'),
  );
  out(
    `${REPLICAS} replicas ${label}: append / heartbeat p99 (one: ${p99s(one)})`,
    p99s(two),
    target('target: the same'),
  );
  out(
    `${REPLICAS} replicas ${label}: refused, leases expired`,
    `${two.stats.refusedAppends + two.stats.refusedPolls}, ${two.stats.leasesExpired + two.stats.leasesLost}`,
  );
}

const results = new Map<string, PhaseResult>();
let raw: number | null = null;
let perEvent: number | null = null;
try {
  if (PHASES.includes('raw')) {
    raw = await rawCommitRate(5);
    out('\nraw single-row commits per s (8 connections, 300-byte JSON)', raw.toFixed(0));
    perEvent = await groupAppendCost();
    out('PostgreSQL time per appended event (groups of 28 x 40, µs)', perEvent.toFixed(1));
  }
  if (PHASES.includes('1x')) results.set('1x', await phase('1x', RUNNERS, 1));
  if (PHASES.includes('2.5x'))
    results.set('2.5x', await phase('2.5x', Math.round(RUNNERS * 2.5), 1));
  if (PHASES.includes('2r')) results.set('2r', await phase('2r', RUNNERS * REPLICAS, REPLICAS));
  const quotaPhases = PHASES.filter((p) => p === '1q' || p === '2q');
  if (quotaPhases.length > 0 && !(await cpuQuotaAvailable()))
    console.log('\nno writable cgroup here (root only): the 1q and 2q phases are skipped');
  else {
    if (PHASES.includes('1q')) results.set('1q', await phase('1q', QUOTA_RUNNERS, 1, QUOTA));
    if (PHASES.includes('2q'))
      results.set('2q', await phase('2q', QUOTA_RUNNERS * REPLICAS, REPLICAS, QUOTA));
  }

  console.log(`\n=== summary (${RUNNERS} runners = 1x; load average now ${load()}) ===`);
  if (raw !== null) out('raw single-row commits per s', raw.toFixed(0));
  if (perEvent !== null) out('PostgreSQL time per appended event (µs)', perEvent.toFixed(1));
  const one = results.get('1x');
  const over = results.get('2.5x');
  const two = results.get('2r');
  if (one) {
    out('1x: events stored per s', one.eventsPerS.toFixed(0));
    out('1x: append p99', ms(one.stats.steadyAppends, 99), 'target <= 100 ms');
    out('1x: heartbeat p99', ms(one.stats.steadyHeartbeats, 99), 'target <= 100 ms');
    out(
      '1x: refused after warm-up (whole run), leases expired',
      `${one.stats.steadyRefused} (${one.stats.refusedAppends + one.stats.refusedPolls}), ${one.stats.leasesExpired + one.stats.leasesLost}`,
      'target 0, 0',
    );
  }
  if (over) {
    const peak = Math.max(over.eventsPerS, one?.eventsPerS ?? 0);
    out('2.5x: events stored per s', over.eventsPerS.toFixed(0));
    out(
      '2.5x: share of peak throughput',
      `${((over.eventsPerS / peak) * 100).toFixed(0)} %`,
      'target >= 90 %',
    );
    out('2.5x: heartbeat p99', ms(over.stats.steadyHeartbeats, 99), 'target <= 1 s');
    out(
      '2.5x: leases expired',
      String(over.stats.leasesExpired + over.stats.leasesLost),
      'target 0',
    );
    out(
      '2.5x: refused; time to refusal max',
      `${over.stats.refusedAppends + over.stats.refusedPolls}; ${ms(over.stats.refusals, 100)}`,
      'target <= 100 ms',
    );
    out('2.5x: time to refusal p99 inside the manager', over.refusalInside);
    out('2.5x: admitted append p99', ms(over.stats.steadyAppends, 99));
  }
  // With the held pair measured, the unlimited pair is context: it shares the machine's cores.
  const held = [results.get('1q'), results.get('2q')] as const;
  if (one && two) scaleOut('(no limit)', one, two, !held[1]);
  if (held[0] && held[1]) scaleOut(`(each held to ${QUOTA} cores)`, held[0], held[1], true);
  if (one && pct(one.stats.steadyAppends, 99) > 100)
    console.log('note: 1x is past what this replica sustains at p99 <= 100 ms on this machine now');
} catch (error) {
  console.error(error);
  process.exitCode = 1;
}
