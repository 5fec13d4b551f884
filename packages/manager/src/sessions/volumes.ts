/**
 * Persistent session storage: one volume per session, holding only the agent's rollout files.
 * Local launcher: a directory under the data dir. Kubernetes: a PersistentVolumeClaim named
 * `svc-v01-session-<sessionId>` (RWO, 1Gi by default, class SVC_SESSION_STORAGE_CLASS, default
 * `local-path`) in namespace svc-v01, mounted by the runner Job at
 * `<agent_home>/<agent_rollout_subdir>`.
 */
export interface SessionVolume {
  pvcName: string;
  namespace: string;
  /** Kubernetes claim phase (`Pending`, `Bound`, `Lost`), or `Bound` for a local directory. */
  phase: string;
  /** Where a runner of this launcher mounts it (local: the directory itself). */
  mountPath: string | null;
  storageClass: string | null;
  capacity: string;
}

export interface SessionVolumes {
  readonly kind: 'local' | 'kubernetes';
  /** Create synchronously (idempotent: an existing volume is returned). */
  create(sessionId: string): Promise<SessionVolume>;
  /**
   * The volume `create` will make, named and placed before it exists (its phase as when just
   * created): records of a session can be written in the same transaction as its run.
   */
  planned(sessionId: string): SessionVolume;
  /** The volume, or null when it does not exist (evicted or never created). */
  get(sessionId: string): Promise<SessionVolume | null>;
  /** True when it existed. */
  delete(sessionId: string): Promise<boolean>;
}

export const sessionPvcName = (sessionId: string) => `svc-v01-session-${sessionId}`;
