import { Type } from '@sinclair/typebox';
import type { ManagerConfig } from '../config.js';
import type { Store } from '../store/db.js';
import { ROUTINE } from '../http/request-log.js';
import { migrationState } from '../store/migrate.js';
import type { App } from './common.js';

const Health = Type.Object({
  status: Type.String(),
  serviceId: Type.String(),
  ready: Type.Boolean(),
  draining: Type.Boolean(),
  store: Type.Object({ kind: Type.String(), reachable: Type.Boolean() }),
  migrations: Type.Object({
    applied: Type.Integer(),
    pending: Type.Array(Type.String()),
    latest: Type.Union([Type.String(), Type.Null()]),
    upToDate: Type.Boolean(),
  }),
  build: Type.Object({
    version: Type.String(),
    commit: Type.String(),
    builtAt: Type.Union([Type.String(), Type.Null()]),
    node: Type.String(),
  }),
  auth: Type.Object({ mode: Type.String(), apiKeyConfigured: Type.Boolean() }),
  redaction: Type.Object({
    secretRefsOnly: Type.Boolean(),
    valuesPrinted: Type.Literal(false),
    redactedValueCount: Type.Integer(),
  }),
  extra: Type.Record(Type.String(), Type.Unknown()),
});

export interface HealthSources {
  config: ManagerConfig;
  store: Store;
  /** True once SIGTERM began a graceful shutdown: the replica is no longer ready. */
  draining: () => boolean;
  redactedValueCount: () => number;
  /** Summaries other layers add (launcher, work-ready tools); never secret values. */
  extra: () => Promise<Record<string, unknown>>;
}

/** Public health: enough to locate a fault, never a secret (no URLs, keys or passwords). */
export function healthRoutes(app: App, sources: HealthSources): void {
  const report = async () => {
    const reachable = await sources.store.ping();
    const migrations = reachable ? await migrationState(sources.store.db).catch(() => null) : null;
    const upToDate = migrations?.upToDate ?? false;
    const { config } = sources;
    const draining = sources.draining();
    return {
      status: draining ? 'draining' : reachable && upToDate ? 'ok' : 'degraded',
      serviceId: config.serviceId,
      ready: reachable && upToDate && !draining,
      draining,
      store: { kind: sources.store.kind, reachable },
      migrations: {
        applied: migrations?.applied.length ?? 0,
        pending: migrations?.pending ?? [],
        latest: migrations?.latest ?? null,
        upToDate,
      },
      build: { ...config.build, node: process.version },
      auth: { mode: config.deploymentMode, apiKeyConfigured: config.apiKeys.length > 0 },
      redaction: {
        secretRefsOnly: true,
        valuesPrinted: false as const,
        redactedValueCount: sources.redactedValueCount(),
      },
      extra: await sources.extra(),
    };
  };

  app.get('/health', { schema: { response: { 200: Health } } }, report);
  // Probes come every few seconds from the orchestrator: routine request lines.
  app.get(
    '/health/live',
    {
      config: ROUTINE,
      schema: {
        response: { 200: Type.Object({ status: Type.String(), serviceId: Type.String() }) },
      },
    },
    () => ({
      status: 'ok',
      serviceId: sources.config.serviceId,
    }),
  );
  app.get(
    '/health/readiness',
    { config: ROUTINE, schema: { response: { 200: Health, 503: Health } } },
    async (_request, reply) => {
      const body = await report();
      return reply.code(body.ready ? 200 : 503).send(body);
    },
  );
}
