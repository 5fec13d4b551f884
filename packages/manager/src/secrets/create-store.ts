import { join } from 'node:path';
import type { ManagerConfig } from '../config.js';
import { LocalSecretStore } from './local-store.js';
import type { SecretStore } from './store.js';

/** The Secret store SVC_SECRET_STORE names: the local directory store unless `kubernetes`. */
export async function createSecretStore(config: ManagerConfig): Promise<SecretStore> {
  if (config.secretStore.kind === 'kubernetes') {
    // Loaded only when configured (the Kubernetes client is large).
    const [{ createKubeApis }, { KubernetesSecretStore }] = await Promise.all([
      import('../launcher/kube-api.js'),
      import('./kubernetes-store.js'),
    ]);
    return new KubernetesSecretStore({
      core: createKubeApis(config.kubernetes).core,
      namespace: config.launcher.namespace,
    });
  }
  return new LocalSecretStore(join(config.dataDir, 'secrets'));
}
