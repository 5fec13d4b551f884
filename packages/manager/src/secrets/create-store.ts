import { join } from 'node:path';
import type { ManagerConfig } from '../config.js';
import { createKubeApis } from '../launcher/kube-api.js';
import { KubernetesSecretStore } from './kubernetes-store.js';
import { LocalSecretStore } from './local-store.js';
import type { SecretStore } from './store.js';

/** The Secret store SVC_SECRET_STORE names: the local directory store unless `kubernetes`. */
export function createSecretStore(config: ManagerConfig): SecretStore {
  if (config.secretStore.kind === 'kubernetes') {
    return new KubernetesSecretStore({
      core: createKubeApis(config.kubernetes).core,
      namespace: config.launcher.namespace,
    });
  }
  return new LocalSecretStore(join(config.dataDir, 'secrets'));
}
