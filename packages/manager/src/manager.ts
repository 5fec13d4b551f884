import type { DestinationStream } from 'pino';
import { Redactor } from '@svc/contracts';
import { buildApp, type BuiltApp } from './app.js';
import type { ManagerConfig } from './config.js';
import { createLogger, type Logger } from './logging.js';
import { Maintenance } from './maintenance.js';
import { createSecretStore } from './secrets/create-store.js';
import { loadSecretMasks, newManagerRedactor } from './secrets/masks.js';
import type { SecretStore } from './secrets/store.js';
import { expireCommands } from './domain/runs/command-expiry.js';
import { openStore, type Store } from './store/db.js';
import { migrateToLatest, migrationState } from './store/migrate.js';
import { assertPortFree } from './port-check.js';
import { createLauncher } from './launcher/index.js';
import { createSessionVolumes, type SessionVolumes } from './sessions/index.js';
import { expectedWorkReady } from './work-ready.js';
import { collectExpiredSessions } from './domain/sessions/gc.js';
import type { Launcher } from './launcher/types.js';
import { loadCatalog } from './domain/runner-jobs/images.js';
import type { RunnerJobDeps } from './domain/runner-jobs/runner-jobs.js';
import { recordPhase } from './domain/runner-jobs/phase.js';
import { restoreTransientEnvMasks } from './domain/runner-jobs/masks.js';
import type { RunnerJobPhase } from '@svc/contracts';
import { Scheduler } from './domain/scheduler/scheduler.js';
import { foldQueueCounters } from './domain/queue/counters.js';
import { DrainState, drainReplica } from './http/drain.js';

/** The accept queue asked of the kernel (see the listen call). */
const LISTEN_BACKLOG = 4096;

export interface RunningManager extends BuiltApp {
  url: string;
  store: Store;
  logger: Logger;
  redactor: Redactor;
  secrets: SecretStore;
  launcher: Launcher;
  maintenance: Maintenance;
  sessionGc: Maintenance;
  /** This replica's scheduler loop (absent with SVC_SCHEDULER=off). */
  scheduler: Scheduler | undefined;
  /**
   * Graceful shutdown (SIGTERM): unready at once, keep serving for the drain delay, release
   * long-polls, wait for requests in flight (bounded), then close.
   */
  drain(): Promise<void>;
  close(): Promise<void>;
}

export interface StartOptions {
  logDestination?: DestinationStream;
  /** Listen on HOST:PORT (default true); tests using inject may skip it. */
  listen?: boolean;
  /**
   * Stand-ins for the cluster side of runner Jobs and session volumes, in place of the ones the
   * configuration names: the scheduler benchmark measures the manager with the cluster answering
   * at once, at a rate no API server (real or fake) could take.
   */
  edges?: { launcher: Launcher; sessionVolumes: SessionVolumes };
  /** Start-up steps for a person watching a terminal (`run-manager` on a TTY). */
  progress?: (step: string) => void;
}

/**
 * Open the store, apply migrations (before anything is served: a failed migration throws and
 * nothing listens), assemble the app and listen.
 */
export async function startManager(
  config: ManagerConfig,
  options: StartOptions = {},
): Promise<RunningManager> {
  const redactor = newManagerRedactor(new Redactor(), config);
  const logger = createLogger({
    level: config.logLevel,
    format: config.logFormat,
    redactor,
    ...(options.logDestination ? { destination: options.logDestination } : {}),
  });
  const progress = options.progress ?? (() => undefined);
  if (options.listen !== false) await assertPortFree(config.host, config.port);
  progress(
    config.store.kind === 'postgres'
      ? 'opening PostgreSQL (DATABASE_URL)'
      : `opening the embedded store under ${config.store.dataDir} (a first start takes up to a minute)`,
  );
  const store = await openStore(config.store, logger);
  try {
    if (options.progress) {
      const { pending } = await migrationState(store.db);
      progress(
        pending.length ? `applying ${pending.length} schema migrations` : 'schema up to date',
      );
    }
    const migrations = await migrateToLatest(store.db);
    logger.info(
      { store: store.kind, applied: migrations.applied.length, latest: migrations.latest },
      'store ready',
    );
  } catch (error) {
    await store.close();
    throw error;
  }
  const secrets = await createSecretStore(config);
  try {
    // Every secret the manager is responsible for is masked before the first request.
    await loadSecretMasks(secrets, redactor, logger);
  } catch (error) {
    await store.close();
    throw error;
  }
  const launcher = options.edges?.launcher ?? (await createLauncher(config, logger));
  const sessionVolumes = options.edges?.sessionVolumes ?? (await createSessionVolumes(config));
  const workReady = await expectedWorkReady(config);
  let listeningUrl = '';
  const runnerJobsDeps: RunnerJobDeps = {
    launcher,
    images: {
      defaultImage: config.runnerJobs.defaultImage,
      allowlist: config.runnerJobs.imageAllowlist,
      catalog: loadCatalog(config.runnerJobs.imageCatalogPath ?? undefined),
      repoUrlPrefixes: config.repoUrlPrefixes,
    },
    managerUrl: () => config.publicUrl ?? listeningUrl,
    runnerEnv: () => ({
      SVC_RUNNER_IDLE_EXIT_MS: String(config.runnerJobs.runnerIdleExitMs),
      SVC_REQUIRED_TOOLS: config.runnerJobs.requiredTools.join(','),
    }),
    workReady: () => workReady,
  };
  let scheduler: Scheduler | undefined;
  const drainState = new DrainState();
  const built = await buildApp({
    drain: drainState,
    loopState: () => ({
      enabled: scheduler !== undefined,
      instanceId: config.instanceId,
      lastPassAt: scheduler?.lastPassAt ?? null,
      nextWakeAt: scheduler?.nextWakeAt ?? null,
    }),
    config,
    store,
    logger,
    redactor,
    secrets,
    sessionVolumes,
    runnerJobs: runnerJobsDeps,
  });
  const active = await store.db
    .selectFrom('runner_jobs')
    .select([
      'runner_job_id',
      'job_name',
      'phase',
      'pod_identity',
      'manager_instance',
      'transient_env',
    ])
    .where('launcher', '=', launcher.kind)
    .where('phase', 'in', ['pending', 'starting', 'running'])
    .execute();
  await restoreTransientEnvMasks(
    redactor,
    launcher,
    active.map((j) => ({
      runnerJobId: j.runner_job_id,
      jobName: j.job_name,
      summary: j.transient_env,
    })),
  );
  await launcher.start(
    (update) => recordPhase(built.ctx, update),
    active.map((j) => ({
      jobName: j.job_name,
      phase: j.phase as RunnerJobPhase,
      podIdentity: j.pod_identity,
      managerInstance: j.manager_instance,
    })),
  );

  const maintenance = new Maintenance(config.maintenanceIntervalMs, logger);
  maintenance.add({ name: 'command-expiry', run: () => expireCommands(built.ctx) });
  maintenance.add({ name: 'queue-counters', run: () => foldQueueCounters(store.db) });
  const gc = new Maintenance(config.sessions.gcIntervalMs, logger);
  gc.add({
    name: 'session-gc',
    run: () => collectExpiredSessions(built.ctx, { volumes: sessionVolumes }),
  });
  const masks = new Maintenance(config.maskRefreshMs, logger);
  masks.add({ name: 'secret-masks', run: () => loadSecretMasks(secrets, redactor, logger) });
  maintenance.start();
  gc.start();
  masks.start();

  let url = '';
  if (options.listen !== false) {
    // A fleet of runners opens its connections in bursts (a restart, a deploy): Node's default
    // accept queue of 511 overflows, and every connection dropped there waits out a SYN
    // retransmission (1 s, then 3 s, 7 s...). The kernel caps this at net.core.somaxconn.
    url = await built.app.listen({ host: config.host, port: config.port, backlog: LISTEN_BACKLOG });
    listeningUrl = url;
    logger.info({ url }, 'run manager listening');
    progress(`listening on ${url}`);
    progress(`web console: ${url}/`);
  }
  // Started once runners can reach this manager: the jobs it launches need its URL.
  if (config.scheduler.enabled) {
    scheduler = new Scheduler(
      built.ctx,
      { volumes: sessionVolumes, runnerJobs: runnerJobsDeps },
      config.scheduler,
      logger,
    );
    scheduler.start();
  }
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      await scheduler?.stop();
      await maintenance.stop();
      await gc.stop();
      await masks.stop();
      await built.app.close();
      await launcher.close();
      await store.close();
    })());
  return {
    ...built,
    url,
    store,
    logger,
    redactor,
    secrets,
    launcher,
    maintenance,
    sessionGc: gc,
    scheduler,
    close,
    drain: () =>
      drainReplica({
        state: drainState,
        wakeups: store.wakeups,
        server: built.app.server,
        // The scheduler stops taking work at once; another replica's picks it up.
        stopWork: async () => {
          await scheduler?.stop();
        },
        delayMs: config.drainDelayMs,
        timeoutMs: config.drainTimeoutMs,
        logger,
        close,
      }),
  };
}
