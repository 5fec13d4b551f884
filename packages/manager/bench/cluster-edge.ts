import type { LaunchResult, Launcher, RunnerJobSpec } from '../src/launcher/types.js';
import type { SessionVolume, SessionVolumes } from '../src/sessions/volumes.js';
import { sessionPvcName } from '../src/sessions/volumes.js';

/**
 * The cluster at its edge, answering at once: the launcher records each Job it is asked to
 * create and the volumes each claim. The scheduler's drain is measured against these, so the
 * figure is the manager's own (an API server, real or fake, takes far fewer creates a second).
 */
export class EdgeLauncher implements Launcher {
  readonly kind = 'kubernetes' as const;
  readonly namespace = 'svc-v01';
  launched = 0;
  /** When the first and the latest Job were asked for (performance.now()). */
  firstAt: number | undefined;
  lastAt: number | undefined;

  render(spec: RunnerJobSpec): Record<string, unknown> {
    return { metadata: { name: spec.jobName } };
  }

  launch(spec: RunnerJobSpec): Promise<LaunchResult> {
    this.launched++;
    this.lastAt = performance.now();
    this.firstAt ??= this.lastAt;
    return Promise.resolve({
      phase: 'starting',
      logPath: `kubernetes:${this.namespace}/job/${spec.jobName}`,
      podIdentity: null,
    });
  }

  transientEnvOf(): Promise<Array<{ name: string; value: string }>> {
    return Promise.resolve([]);
  }

  cancel(): Promise<void> {
    return Promise.resolve();
  }

  start(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

export class EdgeVolumes implements SessionVolumes {
  readonly kind = 'kubernetes' as const;
  readonly #claims = new Set<string>();

  create(sessionId: string): Promise<SessionVolume> {
    this.#claims.add(sessionId);
    return Promise.resolve(this.#volume(sessionId));
  }

  planned(sessionId: string): SessionVolume {
    return this.#volume(sessionId);
  }

  get(sessionId: string): Promise<SessionVolume | null> {
    return Promise.resolve(this.#claims.has(sessionId) ? this.#volume(sessionId) : null);
  }

  delete(sessionId: string): Promise<boolean> {
    return Promise.resolve(this.#claims.delete(sessionId));
  }

  #volume(sessionId: string): SessionVolume {
    return {
      pvcName: sessionPvcName(sessionId),
      namespace: 'svc-v01',
      phase: 'Bound',
      mountPath: null,
      storageClass: 'local-path',
      capacity: '1Gi',
    };
  }
}
