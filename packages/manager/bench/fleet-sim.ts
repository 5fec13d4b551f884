/**
 * A simulated runner fleet for the fleet bench: each runner holds a claimed lease renewed every
 * 10 s, keeps a command long-poll open and produces a 10-event batch every 2 s, behaving as the
 * real runner does under overload, with its retry policy (@svc/runner `backoffMs`): a refused
 * (503) or failed append keeps its events and sends them later, merged with the new ones; a
 * refused poll waits the same way. The runners share this one client process, which takes CPU of the same machine.
 */
import { setMaxListeners } from 'node:events';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Agent, request } from 'node:http';
import { BACKOFF, backoffMs } from '@svc/runner';
import { runBody } from '../test/helpers.js';
import { pct } from './support.js';

const RENEW_MS = 10_000;
const BATCH_MS = 2_000;
const BATCH_EVENTS = 10;
const POLL_WAIT_MS = 25_000;
const MAX_APPEND = 1000;

interface Answer {
  status: number;
  body: any;
  retryAfterMs: number | null;
}

/**
 * Plain node:http with its own sockets: a long-poll never holds up another call. Idle sockets
 * are all kept (the default keeps 256), as each real runner keeps its own connections: a fleet
 * that reconnected after every burst would measure SYN retransmissions, not the manager.
 */
export class FleetClient {
  readonly agent = new Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 1_000_000 });

  call(
    base: string,
    method: string,
    path: string,
    body?: unknown,
    token?: string,
    signal?: AbortSignal,
  ): Promise<Answer> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = request(
        `${base}${path}`,
        {
          method,
          agent: this.agent,
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
              const after = Number(res.headers['retry-after']);
              resolve({
                status: res.statusCode ?? 0,
                body: JSON.parse(Buffer.concat(chunks).toString()),
                retryAfterMs: Number.isFinite(after) ? after * 1000 : null,
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

  async ok(base: string, method: string, path: string, body?: unknown): Promise<any> {
    for (;;) {
      const r = await this.call(base, method, path, body);
      if (r.status === 503) {
        await new Promise((res) => setTimeout(res, (r.retryAfterMs ?? 500) * Math.random()));
        continue;
      }
      if (r.status >= 300)
        throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body;
    }
  }

  destroy(): void {
    this.agent.destroy();
  }

  /**
   * Open `perRunner` sockets per simulated runner before the timed run, as a fleet that has
   * been running for a while holds them: each runner long-polls its commands, in waves, the
   * waves overlapping so that every poll holds its own socket. Without this the fleet's first
   * second opens thousands of connections at once, the listen queue overflows, and the dropped
   * connections wait out SYN retransmissions (1, 3, 7, 15, 31, 63 s): the measurement would be
   * of the kernel's backoff, not of the manager.
   */
  async warm(sims: Sim[], perRunner: number): Promise<void> {
    const polls: Promise<unknown>[] = [];
    const WAVE = 400;
    for (let round = 0; round < perRunner; round++)
      for (let i = 0; i < sims.length; i += WAVE) {
        for (const sim of sims.slice(i, i + WAVE))
          polls.push(
            this.call(
              sim.base,
              'GET',
              `/api/v1/runs/${sim.runId}/commands?runnerId=${sim.runnerId}&waitMs=8000`,
              undefined,
              sim.token,
            ).catch(() => undefined),
          );
        await new Promise((r) => setTimeout(r, 100));
      }
    await Promise.all(polls);
  }
}

export interface Sim {
  base: string;
  runId: string;
  runnerId: string;
  token: string;
}

/** Runs created and claimed through the API, spread over the replicas in turn. */
export async function createSims(
  client: FleetClient,
  bases: string[],
  count: number,
): Promise<Sim[]> {
  const sims: Sim[] = new Array<Sim>(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < count) {
        const i = next++;
        const base = bases[i % bases.length]!;
        const runnerId = `rnr-fleet${String(i).padStart(5, '0')}`;
        const run = await client.ok(base, 'POST', '/api/v1/runs', runBody());
        const claim = await client.ok(base, 'POST', `/api/v1/runs/${run.runId}/claim`, {
          runnerId,
        });
        sims[i] = { base, runId: run.runId, runnerId, token: claim.leaseToken };
      }
    }),
  );
  return sims;
}

/** What one phase measured (latencies in ms; "steady": after the warm-up). */
export interface FleetStats {
  heartbeats: number[];
  steadyHeartbeats: number[];
  appends: number[];
  steadyAppends: number[];
  /** Time to the 503 of every refused call. */
  refusals: number[];
  refusedAppends: number;
  refusedPolls: number;
  /** Refused calls (renewals, appends, polls) after the warm-up. */
  steadyRefused: number;
  /** Events produced and stored after the warm-up, and appends answered 200 then. */
  offeredEvents: number;
  storedEvents: number;
  storedAppends: number;
  /** Renewals that came after the previous grant had already expired, or were refused. */
  leasesExpired: number;
  leasesLost: number;
  errors: number;
  polls: number;
  steadySeconds: number;
  /** This client's own event-loop delay p99 (ms): its share in every latency above. */
  clientLagP99: number;
}

/** Drive the fleet for `seconds`; latencies count after `warmupMs`. */
export async function driveFleet(
  client: FleetClient,
  sims: Sim[],
  seconds: number,
  warmupMs: number,
): Promise<FleetStats> {
  const stats: FleetStats = {
    heartbeats: [],
    steadyHeartbeats: [],
    appends: [],
    steadyAppends: [],
    refusals: [],
    refusedAppends: 0,
    refusedPolls: 0,
    steadyRefused: 0,
    offeredEvents: 0,
    storedEvents: 0,
    storedAppends: 0,
    leasesExpired: 0,
    leasesLost: 0,
    errors: 0,
    polls: 0,
    steadySeconds: Math.max(0, seconds - warmupMs / 1000),
    clientLagP99: 0,
  };
  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  const stop = new AbortController();
  // Every simulated runner's open long-poll listens on this one signal.
  setMaxListeners(0, stop.signal);
  const wallStart = performance.now();
  const deadline = Date.now() + seconds * 1000;
  const steady = () => performance.now() - wallStart >= warmupMs;
  const sleep = (ms: number) =>
    new Promise<void>((resolve) =>
      setTimeout(resolve, Math.max(0, Math.min(ms, deadline - Date.now()))),
    );
  const backoff = (kind: 'events' | 'poll', attempt: number, r: Answer | null) =>
    backoffMs(BACKOFF[kind], attempt, r?.retryAfterMs ?? null);

  const runner = async (sim: Sim, i: number) => {
    const call = (method: string, path: string, body?: unknown, signal?: AbortSignal) =>
      client.call(sim.base, method, path, body, sim.token, signal);
    // Spread the fleet's timers so the load is steady, as real runners started over time are.
    const renew = async () => {
      let expiresAt = Infinity;
      await sleep((i / sims.length) * RENEW_MS);
      while (Date.now() < deadline) {
        const next = Date.now() + RENEW_MS;
        const started = performance.now();
        try {
          const r = await call('PATCH', `/api/v1/runs/${sim.runId}/lease`, {
            runnerId: sim.runnerId,
          });
          const took = performance.now() - started;
          stats.heartbeats.push(took);
          if (steady()) stats.steadyHeartbeats.push(took);
          if (r.status === 200) {
            const granted = Date.parse(r.body.lease.expiresAt);
            // Renewed at granted - ttl (database clock): past the previous expiry, it lapsed.
            if (granted - r.body.lease.ttlMs > expiresAt) stats.leasesExpired++;
            expiresAt = granted;
          } else if (r.status === 503) {
            stats.refusals.push(took);
            if (steady()) stats.steadyRefused++;
            await sleep(500 * Math.random());
            continue;
          } else stats.leasesLost++;
        } catch {
          stats.errors++;
        }
        await sleep(next - Date.now());
      }
    };
    const append = async () => {
      let pending: unknown[] = [];
      let produced = 0;
      let nextBatch = Date.now() + (i / sims.length) * BATCH_MS;
      let retryAt = 0;
      let attempt = 0;
      for (;;) {
        const now = Date.now();
        if (now >= deadline) break;
        while (nextBatch <= now) {
          const b = produced++;
          for (let k = 0; k < BATCH_EVENTS; k++)
            pending.push({
              key: `f-${b}-${k}`,
              category: 'command_output',
              name: 'exec',
              data: {
                itemId: `item-${b}`,
                stream: 'stdout',
                text: `line ${b}.${k}`,
                originalBytes: 8,
              },
            });
          if (steady()) stats.offeredEvents += BATCH_EVENTS;
          nextBatch += BATCH_MS;
        }
        if (pending.length === 0 || now < retryAt) {
          await sleep(Math.min(nextBatch, retryAt > now ? retryAt : nextBatch) - now);
          continue;
        }
        const events = pending.slice(0, MAX_APPEND);
        const started = performance.now();
        let r: Answer | null = null;
        try {
          r = await call('POST', `/api/v1/runs/${sim.runId}/events`, {
            runnerId: sim.runnerId,
            events,
          });
        } catch {
          stats.errors++;
        }
        const took = performance.now() - started;
        if (r?.status === 200) {
          attempt = 0;
          pending = pending.slice(events.length);
          stats.appends.push(took);
          if (steady()) {
            stats.steadyAppends.push(took);
            stats.storedAppends++;
            stats.storedEvents += r.body.appended;
          }
        } else {
          if (r?.status === 503) {
            stats.refusedAppends++;
            stats.refusals.push(took);
            if (steady()) stats.steadyRefused++;
          } else if (r) stats.errors++;
          retryAt = Date.now() + backoff('events', ++attempt, r);
        }
      }
    };
    const poll = async () => {
      let attempt = 0;
      await sleep((i / sims.length) * BATCH_MS);
      while (Date.now() < deadline) {
        const started = performance.now();
        try {
          const r = await call(
            'GET',
            `/api/v1/runs/${sim.runId}/commands?runnerId=${sim.runnerId}&waitMs=${POLL_WAIT_MS}`,
            undefined,
            stop.signal,
          );
          if (r.status === 503) {
            stats.refusedPolls++;
            stats.refusals.push(performance.now() - started);
            if (steady()) stats.steadyRefused++;
            await sleep(backoff('poll', ++attempt, r));
          } else if (r.status !== 200) stats.errors++;
          else {
            attempt = 0;
            stats.polls++;
          }
        } catch {
          if (!stop.signal.aborted) stats.errors++;
        }
      }
    };
    await Promise.all([renew(), append(), poll()]);
  };
  const fleet = Promise.all(sims.map(runner));
  await sleep(seconds * 1000);
  stop.abort();
  await fleet;
  lag.disable();
  stats.clientLagP99 = lag.percentile(99) / 1e6;

  // Every lease must still be held by its runner at the end.
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < sims.length) {
        const sim = sims[next++]!;
        for (;;) {
          const r = await client.call(
            sim.base,
            'PATCH',
            `/api/v1/runs/${sim.runId}/lease`,
            { runnerId: sim.runnerId },
            sim.token,
          );
          if (r.status === 503) continue;
          if (r.status !== 200) stats.leasesLost++;
          break;
        }
      }
    }),
  );
  return stats;
}

export const ms = (values: number[], p: number) =>
  values.length === 0 ? '-' : `${pct(values, p).toFixed(1)} ms`;
