import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import type { ManagerConfig } from '../config.js';
import type { Logger } from '../logging.js';
import { workReadyCacheFile } from '../work-ready.js';
import { LocalLauncher } from './local.js';
import { LocalIsolation } from './local-sandbox.js';
import type { Launcher } from './types.js';

/**
 * The installed runner build the local launcher starts, or null when none is installed: the
 * manager does not depend on the runner (its image carries no agent binary), so the local
 * launcher finds it only where both are installed together (the workspace, `npm start`).
 */
export function defaultRunnerEntry(): string | null {
  const require = createRequire(import.meta.url);
  try {
    return join(dirname(require.resolve('@svc/runner/package.json')), 'dist', 'main.js');
  } catch {
    return null;
  }
}

/**
 * Variables a local runner inherits from the manager: the search path, locale, and test leak
 * tags; unsandboxed runners also share the host's temp dir. Nothing else of the manager's
 * environment (keys, DATABASE_URL, NODE_OPTIONS) reaches a runner.
 */
const INHERITED = ['PATH', 'LANG', 'TZ', 'SVC_TEST_TAG'];
const INHERITED_UNSANDBOXED = [...INHERITED, 'TMPDIR'];

/** The Kubernetes client is loaded only when configured: it costs ~80 MB of memory. */
export async function createLauncher(config: ManagerConfig, logger: Logger): Promise<Launcher> {
  if (config.launcher.kind === 'kubernetes') {
    const [{ createKubeApis }, { KubernetesLauncher }] = await Promise.all([
      import('./kube-api.js'),
      import('./kubernetes.js'),
    ]);
    return new KubernetesLauncher({
      apis: createKubeApis(config.kubernetes),
      namespace: config.launcher.namespace,
      killGraceMs: config.launcher.killGraceMs,
      pollIntervalMs: config.kubernetes.pollIntervalMs,
      resyncIntervalMs: config.kubernetes.resyncIntervalMs,
      runnerPod: {
        resources: config.kubernetes.runnerResources,
        deadlineFactor: config.kubernetes.jobDeadlineFactor,
      },
      logger,
    });
  }
  const runnerEntry = config.launcher.runnerEntry ?? defaultRunnerEntry();
  const isolation = await LocalIsolation.create(config.launcher.isolation, {
    nodePath: process.execPath,
    runnerEntry,
    dataDir: config.dataDir,
    workReadyCache: workReadyCacheFile(config.dataDir),
    mirrors: config.repoUrlPrefixes
      .filter((prefix) => prefix.startsWith('file://'))
      .map((prefix) => decodeURIComponent(new URL(prefix).pathname).replace(/\/+$/, '') || '/'),
    hidden: config.apiKeyFile ? [resolve(config.apiKeyFile)] : [],
    logger,
  });
  return new LocalLauncher({
    jobsRoot: join(config.dataDir, 'jobs'),
    secretsRoot: join(config.dataDir, 'secrets'),
    runnerEntry,
    nodePath: process.execPath,
    instanceId: config.instanceId,
    killGraceMs: config.launcher.killGraceMs,
    logger,
    inherit: isolation.enabled ? INHERITED : INHERITED_UNSANDBOXED,
    isolation,
  });
}
