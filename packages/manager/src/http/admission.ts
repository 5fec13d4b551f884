import type { FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from '@svc/contracts';
import { admissionInFlight, admissionRefused } from '../metrics/registry.js';
import type { App } from '../routes/common.js';
import { API_PREFIX } from './api-scope.js';
import { sendFailure } from './errors.js';
import { LaneGate, LoopLag, RetryAfter } from './lane-gate.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * `lease`: a lease renewal or claim. Served first: never refused for load, on connections
     * of its own (the store's lease lane), so a live runner's lease never lapses because the
     * manager is busy.
     */
    lane?: 'lease';
  }
}

/** Route config of the lease lane (see `lane`). */
export const LEASE_LANE = { lane: 'lease' } as const;

export type Lane = 'lease' | 'runner' | 'client';

export interface AdmissionSettings {
  enabled: boolean;
  /**
   * Shed on event-loop lag too. Off on the embedded store, whose queries run on the event
   * loop itself: its lag is the store's work, which the places already bound.
   */
  loopLag?: boolean;
  /** Longest a request of the runner or client lane may wait for a place; past it, 503. */
  queueBudgetMs: number;
  runnerPlaces: number;
  clientPlaces: number;
}

/**
 * Lasting event-loop lag past min(budget, 100 ms) sheds a lane whose places are all taken:
 * the lag is then this replica's own load, which refusals relieve, and a refusal must come
 * within 100 ms of arrival. Lag with places free is the machine's (other processes, a
 * collection pause), which refusing would not help. Below 50 ms it is scheduling noise.
 */
const LAG_FLOOR_MS = 50;
const LAG_CEILING_MS = 100;
/** Routes that stay open for minutes (an event stream): admitted, but they hold no place. */
const STREAMS = new Set([`${API_PREFIX}/runs/:runId/events/stream`]);

export interface Admission {
  readonly gates: Readonly<Record<'runner' | 'client', LaneGate>>;
}

/**
 * Admission control of the API: requests of the runner lane (the runner-facing routes but
 * renewals and claims) and of the client lane (everything else under /api/v1) take a place of
 * their lane for as long as they run; one that would wait for a place past the queue-time
 * budget (lane-gate.ts), or that arrives while the event loop itself lags past it, is answered
 * 503 `overloaded` with `Retry-After` on arrival, before it is authenticated or its body read. The
 * lease lane is never refused. Long-polls and event streams are admitted like the others but
 * give their place back at once: waiting holds no connection. Registered on the root, before
 * the API scope's authentication, in app.ts.
 */
export function registerAdmission(app: App, settings: AdmissionSettings): Admission | null {
  if (!settings.enabled) return null;
  const gates = {
    runner: new LaneGate(settings.runnerPlaces, settings.queueBudgetMs),
    client: new LaneGate(settings.clientPlaces, settings.queueBudgetMs),
  };
  const retryAfter = { runner: new RetryAfter(), client: new RetryAfter() };
  const refuse = (
    request: FastifyRequest,
    reply: FastifyReply,
    lane: 'runner' | 'client',
    reason: 'queue' | 'event-loop',
  ) => refusal(request, reply, lane, reason, retryAfter[lane].refused());
  const lag = new LoopLag();
  if (settings.loopLag !== false) lag.start();
  const lagLimitMs = Math.min(Math.max(settings.queueBudgetMs, LAG_FLOOR_MS), LAG_CEILING_MS);
  app.addHook('onClose', (_app, done) => {
    lag.stop();
    gates.runner.close();
    gates.client.close();
    done();
  });

  app.addHook('onRequest', (request, reply, done) => {
    const url = request.routeOptions.url;
    if (url === undefined || !url.startsWith(API_PREFIX)) return done();
    const lane = laneOf(request);
    if (lane === 'lease') {
      admissionInFlight.inc({ lane });
      reply.raw.once('close', () => admissionInFlight.dec({ lane }));
      return done();
    }
    const gate = gates[lane];
    if (lag.lagMs > lagLimitMs && gate.busy >= gate.places)
      return refuse(request, reply, lane, 'event-loop');
    const waits = STREAMS.has(url) || Number((request.query as { waitMs?: unknown }).waitMs) > 0;
    const started = performance.now();
    let closed = false;
    let held = false;
    const leave = () => {
      if (!held) return;
      held = false;
      admissionInFlight.dec({ lane });
      gate.leave(waits ? undefined : performance.now() - started);
    };
    reply.raw.once('close', () => {
      closed = true;
      leave();
    });
    const admitted = (ok: boolean) => {
      if (!ok) {
        if (!closed) refuse(request, reply, lane, 'queue');
        return;
      }
      held = true;
      retryAfter[lane].admitted();
      admissionInFlight.inc({ lane });
      // Gone while it queued, or a wait that needs no place while it waits.
      if (closed || waits) leave();
      done();
    };
    const entered = gate.enter();
    if (typeof entered === 'boolean') return admitted(entered);
    void entered.then(admitted);
  });
  return { gates };
}

function laneOf(request: FastifyRequest): Lane {
  const config = request.routeOptions.config;
  if (config.lane === 'lease') return 'lease';
  return config.access === 'runner' ? 'runner' : 'client';
}

function refusal(
  request: FastifyRequest,
  reply: FastifyReply,
  lane: 'runner' | 'client',
  reason: 'queue' | 'event-loop',
  retryAfterS: number,
): void {
  admissionRefused.inc({ lane, reason });
  reply.header('retry-after', String(retryAfterS));
  void sendFailure(
    request,
    reply,
    ServiceError.answer(
      'overloaded',
      `this manager is past its queue-time budget for ${lane} calls; retry after ${retryAfterS} s`,
      { lane, reason, retryAfterMs: retryAfterS * 1000 },
    ),
  );
}
