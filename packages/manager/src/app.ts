import { randomUUID } from 'node:crypto';
import Fastify, { LogController } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Redactor } from '@svc/contracts';
import type { ManagerConfig } from './config.js';
import { noHooks, type Ctx, type DomainHooks } from './domain/context.js';
import { checkProfileOnce } from './domain/dispatch-scope.js';
import { assertProfileUsable } from './domain/profiles/status.js';
import { registerApiScope, type RouteTable } from './http/api-scope.js';
import { consolePages, consoleSite, registerConsole } from './http/console.js';
import { registerOpenApi } from './http/openapi.js';
import { DrainState } from './http/drain.js';
import { frameworkFailure, registerErrorHandling } from './http/errors.js';
import { registerBodyParsing } from './http/body-parser.js';
import { registerValidation } from './http/validation.js';
import { registerRequestLogging } from './http/request-log.js';
import { registerAdmission } from './http/admission.js';
import { writeLanes } from './store/lanes.js';
import type { Logger } from './logging.js';
import { backendRoutes } from './routes/backends.js';
import { commandRoutes } from './routes/commands.js';
import type { App } from './routes/common.js';
import { eventRoutes } from './routes/events.js';
import { eventStreamRoutes } from './routes/event-stream.js';
import { metricsRoutes } from './routes/metrics.js';
import { registerHttpMetrics } from './metrics/http.js';
import { setBuildInfo } from './metrics/registry.js';
import { StoreGauges } from './metrics/store-gauges.js';
import { healthRoutes } from './routes/health.js';
import { runnerRoutes } from './routes/runner.js';
import { runRoutes } from './routes/runs.js';
import { sessionRoutes } from './routes/sessions.js';
import { followAcknowledged, followTerminal } from './domain/queue/follow.js';
import { judgeTurnEnded } from './domain/scheduler/judge.js';
import { sessionHooks } from './domain/sessions/hooks.js';
import type { SessionVolumes } from './sessions/volumes.js';
import { runnerJobRoutes } from './routes/runner-jobs.js';
import { providerProfileRoutes } from './routes/provider-profiles.js';
import { queueRoutes } from './routes/queue.js';
import type { RunnerJobDeps } from './domain/runner-jobs/runner-jobs.js';
import { stopJobsOfCancelledRun } from './domain/runner-jobs/phase.js';
import type { SecretStore } from './secrets/store.js';
import type { Store } from './store/db.js';
import { QUEUE_WAKE_KEY } from './store/wakeups.js';
import type { LoopState } from './domain/scheduler/view.js';
import { schedulerRoutes } from './routes/scheduler.js';
import { scheduleRoutes } from './routes/schedules.js';
import { WatchSlots } from './domain/runs/watch-slots.js';
import { permissiveWithSandboxes, SandboxPeers } from './http/sandbox-peer.js';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export interface AppDeps {
  config: ManagerConfig;
  store: Store;
  logger: Logger;
  redactor: Redactor;
  secrets: SecretStore;
  runnerJobs: RunnerJobDeps;
  sessionVolumes: SessionVolumes;
  hooks?: Partial<DomainHooks>;
  /** The scheduler loop of this replica, as its API read shows it. */
  loopState?: () => LoopState;
  /** Graceful shutdown state (readiness, connection handling); a fresh one when absent. */
  drain?: DrainState;
}

export interface BuiltApp {
  app: App;
  ctx: Ctx;
  /** Every registered route and whether the authenticated scope holds it. */
  routes: RouteTable;
  storeGauges: StoreGauges;
}

/** Assemble the HTTP service around an open, migrated store. */
export async function buildApp(deps: AppDeps): Promise<BuiltApp> {
  const app = Fastify({
    loggerInstance: deps.logger,
    bodyLimit: deps.config.bodyLimitBytes,
    // A caller's x-request-id becomes the traceId when it is a plain token; otherwise a new one.
    requestIdHeader: false,
    genReqId: (request) => {
      const given = request.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    return503OnClosing: true,
    frameworkErrors: frameworkFailure,
    forceCloseConnections: true,
    // Request lines come from http/request-log.ts, at a level that depends on the route.
    logController: new LogController({ disableRequestLogging: true }),
  }).withTypeProvider<TypeBoxTypeProvider>() as unknown as App;

  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  registerRequestLogging(app);
  registerHttpMetrics(app);
  const drain = deps.drain ?? new DrainState();
  drain.register(app);
  registerValidation(app);
  registerBodyParsing(app, deps.redactor);
  const site = consoleSite();
  const pages = consolePages(site);
  registerErrorHandling(app, (request, reply) => pages.notFound(request, reply));
  // Before the API scope's authentication: a refused request costs no lookup.
  registerAdmission(app, {
    ...deps.config.admission,
    loopLag: deps.store.kind === 'postgres',
  });

  const sessions = sessionHooks(deps.store.db, deps.config, deps.sessionVolumes);
  const hooks: DomainHooks = {
    ...noHooks,
    assertProfileUsable: (profile) =>
      checkProfileOnce(profile, () => assertProfileUsable(deps.secrets, profile)),
    ...sessions,
    // Sessions and queue tasks both follow a terminal change, in its transaction. An ended
    // attempt may free capacity or need a retry, an ended judge turn decides its task: those
    // wake the schedulers on commit. A command of no queue task wakes nobody.
    onTerminal: async (trx, change) => {
      await sessions.onTerminal?.(trx, change);
      if ((await followTerminal(trx, change)) || (await judgeTurnEnded(trx, change)))
        await deps.store.wakeups.publishIn(trx, QUEUE_WAKE_KEY);
    },
    // A queue attempt's task reads `running` from the acknowledgement of its turn on.
    onAcknowledged: async (trx, change) => {
      await followAcknowledged(trx, change.commandId);
    },
    afterRunCancelled: (runId) =>
      stopJobsOfCancelledRun(
        { db: deps.store.db, logger: deps.logger },
        deps.runnerJobs.launcher,
        runId,
        Math.max(10_000, deps.config.launcher.killGraceMs * 2),
      ),
    ...deps.hooks,
  };
  const ctx: Ctx = {
    db: deps.store.db,
    config: deps.config,
    wakeups: deps.store.wakeups,
    logger: deps.logger,
    redactor: deps.redactor,
    hooks,
    watches: new WatchSlots(deps.config.watch.maxWatches),
    lanes: writeLanes(
      deps.store,
      deps.config.writeGroups,
      deps.config.store.kind === 'postgres' ? (deps.config.store.leasePoolSize ?? 0) : 0,
    ),
  };

  // Everything under /api/v1 (and /metrics): inside the one authenticated scope, registered
  // first so that a stray /api route registered anywhere later fails the start.
  const auth = {
    apiKeys: deps.config.apiKeys,
    deploymentMode: deps.config.deploymentMode,
    db: deps.store.db,
    leaseDb: deps.store.leaseDb,
    ...(permissiveWithSandboxes(deps.config) ? { sandboxPeers: new SandboxPeers() } : {}),
  };
  const storeGauges = new StoreGauges(
    deps.store.db,
    deps.config.metricsCountsMaxAgeMs,
    () => deps.store.poolStats(),
    (error) => deps.logger.warn({ err: error }, 'store counts for metrics failed'),
  );
  setBuildInfo(deps.config.build);
  await registerOpenApi(app, { version: deps.config.build.version });
  const routes = await registerApiScope(app, auth, (api) => {
    metricsRoutes(api, storeGauges);
    runRoutes(api, ctx);
    commandRoutes(api, ctx);
    eventRoutes(api, ctx);
    eventStreamRoutes(api, ctx);
    runnerRoutes(api, ctx);
    backendRoutes(api, ctx, deps.secrets);
    runnerJobRoutes(api, ctx, deps.runnerJobs);
    providerProfileRoutes(api, ctx, { secrets: deps.secrets, runnerJobs: deps.runnerJobs });
    sessionRoutes(api, ctx, { volumes: deps.sessionVolumes, runnerJobs: deps.runnerJobs });
    queueRoutes(api, ctx, { volumes: deps.sessionVolumes, runnerJobs: deps.runnerJobs });
    scheduleRoutes(api, ctx);
    schedulerRoutes(api, ctx, {
      loopState:
        deps.loopState ??
        (() => ({
          enabled: false,
          instanceId: deps.config.instanceId,
          lastPassAt: null,
          nextWakeAt: null,
        })),
    });
  });

  // Public: health only (it holds no data). The console's static files, /docs and
  // /openapi.json are registered here too, next to health, outside the API scope.
  healthRoutes(app, {
    config: deps.config,
    store: deps.store,
    draining: () => drain.draining,
    redactedValueCount: () => deps.redactor.size,
    extra: () =>
      Promise.resolve({
        launcher: deps.runnerJobs.launcher.kind,
        isolation: deps.runnerJobs.launcher.isolationReport?.() ?? null,
        secretStore: deps.secrets.kind,
        workReady: deps.runnerJobs.workReady(),
      }),
  });
  registerConsole(app, site);
  app.addHook('onClose', () => storeGauges.close());
  await app.ready();
  return { app, ctx, routes, storeGauges };
}
