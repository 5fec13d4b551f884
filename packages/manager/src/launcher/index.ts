import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { ManagerConfig } from '../config.js';
import type { Logger } from '../logging.js';
import { LocalLauncher } from './local.js';
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

/** Variables a local runner inherits from the manager: the search path and test leak tags. */
const INHERITED = ['PATH', 'LANG', 'TZ', 'SVC_TEST_TAG', 'NODE_OPTIONS', 'TMPDIR'];

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
  return new LocalLauncher({
    jobsRoot: join(config.dataDir, 'jobs'),
    secretsRoot: join(config.dataDir, 'secrets'),
    runnerEntry: config.launcher.runnerEntry ?? defaultRunnerEntry(),
    nodePath: process.execPath,
    instanceId: config.instanceId,
    killGraceMs: config.launcher.killGraceMs,
    logger,
    inherit: INHERITED,
  });
}
