import type { CoreV1Api, V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { isStatus, kubeFailure } from '../launcher/kube-api.js';
import { POD_PATHS } from '../launcher/kube-job-manifest.js';
import { LABELS, labelValue, MANAGER_NAME, PART_OF } from '../launcher/kube-labels.js';
import { sessionPvcName, type SessionVolume, type SessionVolumes } from './volumes.js';
import { assertSessionId, DEFAULT_SESSION_CAPACITY } from './volume-ids.js';

export interface KubernetesSessionVolumesOptions {
  core: CoreV1Api;
  namespace: string;
  /** SVC_SESSION_STORAGE_CLASS (default `local-path`). */
  storageClass: string;
  capacity?: string;
  /** The agent's rollout directory name inside the agent home (default `sessions`). */
  rolloutSubdir?: string;
}

/**
 * One PersistentVolumeClaim per session, `svc-v01-session-<sessionId>`, ReadWriteOnce. The
 * runner Job mounts it at `<agent_home>/<agent_rollout_subdir>`. A claim being deleted still
 * answers `get` with phase `Terminating`; pods can no longer mount it.
 */
export class KubernetesSessionVolumes implements SessionVolumes {
  readonly kind = 'kubernetes' as const;
  readonly #core: CoreV1Api;
  readonly #namespace: string;
  readonly #capacity: string;
  readonly #mountPath: string;

  constructor(private readonly options: KubernetesSessionVolumesOptions) {
    this.#core = options.core;
    this.#namespace = options.namespace;
    this.#capacity = options.capacity ?? DEFAULT_SESSION_CAPACITY;
    this.#mountPath = `${POD_PATHS.agentHome}/${options.rolloutSubdir ?? 'sessions'}`;
  }

  planned(sessionId: string): SessionVolume {
    assertSessionId(sessionId);
    return {
      pvcName: sessionPvcName(sessionId),
      namespace: this.#namespace,
      phase: 'Pending',
      mountPath: this.#mountPath,
      storageClass: this.options.storageClass,
      capacity: this.#capacity,
    };
  }

  async create(sessionId: string): Promise<SessionVolume> {
    assertSessionId(sessionId);
    const name = sessionPvcName(sessionId);
    const body: V1PersistentVolumeClaim = {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: {
        name,
        namespace: this.#namespace,
        labels: {
          [LABELS.name]: 'svc-session',
          [LABELS.partOf]: PART_OF,
          [LABELS.managedBy]: MANAGER_NAME,
          [LABELS.managed]: 'true',
          [LABELS.sessionId]: labelValue(sessionId),
        },
      },
      spec: {
        accessModes: ['ReadWriteOnce'],
        storageClassName: this.options.storageClass,
        resources: { requests: { storage: this.#capacity } },
      },
    };
    try {
      const created = await this.#core.createNamespacedPersistentVolumeClaim({
        namespace: this.#namespace,
        body,
      });
      return this.#volume(created);
    } catch (error) {
      if (!isStatus(error, 409)) throw kubeFailure(error, `create claim ${name}`);
    }
    // Creation is idempotent: the existing claim is the session's volume.
    const existing = await this.get(sessionId);
    if (!existing) throw kubeFailure(new Error('claim vanished after a conflict'), `read ${name}`);
    return existing;
  }

  async get(sessionId: string): Promise<SessionVolume | null> {
    assertSessionId(sessionId);
    const name = sessionPvcName(sessionId);
    try {
      const claim = await this.#core.readNamespacedPersistentVolumeClaim({
        name,
        namespace: this.#namespace,
      });
      return this.#volume(claim);
    } catch (error) {
      if (isStatus(error, 404)) return null;
      throw kubeFailure(error, `read claim ${name}`);
    }
  }

  async delete(sessionId: string): Promise<boolean> {
    assertSessionId(sessionId);
    const name = sessionPvcName(sessionId);
    try {
      await this.#core.deleteNamespacedPersistentVolumeClaim({ name, namespace: this.#namespace });
      return true;
    } catch (error) {
      if (isStatus(error, 404)) return false;
      throw kubeFailure(error, `delete claim ${name}`);
    }
  }

  #volume(claim: V1PersistentVolumeClaim): SessionVolume {
    return {
      pvcName: claim.metadata?.name ?? '',
      namespace: claim.metadata?.namespace ?? this.#namespace,
      phase: claim.metadata?.deletionTimestamp ? 'Terminating' : (claim.status?.phase ?? 'Pending'),
      mountPath: this.#mountPath,
      storageClass: claim.spec?.storageClassName ?? null,
      capacity:
        claim.status?.capacity?.['storage'] ??
        claim.spec?.resources?.requests?.['storage'] ??
        this.#capacity,
    };
  }
}
