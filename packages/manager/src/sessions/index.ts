import { join } from 'node:path';
import type { ManagerConfig } from '../config.js';
import { LocalSessionVolumes } from './local-volumes.js';
import type { SessionVolumes } from './volumes.js';

export type { SessionVolume, SessionVolumes } from './volumes.js';
export { sessionPvcName } from './volumes.js';

/** Session volumes matching the launcher: directories locally, claims in a cluster. */
export async function createSessionVolumes(config: ManagerConfig): Promise<SessionVolumes> {
  if (config.launcher.kind === 'kubernetes') {
    // Loaded only when configured (the Kubernetes client is large).
    const [{ createKubeApis }, { KubernetesSessionVolumes }] = await Promise.all([
      import('../launcher/kube-api.js'),
      import('./kubernetes-volumes.js'),
    ]);
    return new KubernetesSessionVolumes({
      core: createKubeApis(config.kubernetes).core,
      namespace: config.launcher.namespace,
      storageClass: config.kubernetes.sessionStorageClass,
      capacity: config.kubernetes.sessionStorageSize,
      rolloutSubdir: config.sessions.rolloutSubdir,
    });
  }
  return new LocalSessionVolumes(
    join(config.dataDir, 'sessions'),
    config.kubernetes.sessionStorageSize,
  );
}
