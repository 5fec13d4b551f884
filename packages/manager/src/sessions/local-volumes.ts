import { chmod, mkdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { sessionPvcName, type SessionVolume, type SessionVolumes } from './volumes.js';
import { assertSessionId, DEFAULT_SESSION_CAPACITY } from './volume-ids.js';

/**
 * Session storage of the embedded deployment: one directory per session under
 * `<dataDir>/sessions`, mode 0700. The local launcher links it into the agent home, where a
 * cluster mounts the claim. The name in records stays the claim name, so both deployments
 * describe a session's storage the same way.
 */
export class LocalSessionVolumes implements SessionVolumes {
  readonly kind = 'local' as const;

  constructor(
    private readonly root: string,
    private readonly capacity = DEFAULT_SESSION_CAPACITY,
  ) {}

  planned(sessionId: string): SessionVolume {
    assertSessionId(sessionId);
    return this.#volume(sessionId, join(this.root, sessionId));
  }

  async create(sessionId: string): Promise<SessionVolume> {
    assertSessionId(sessionId);
    const dir = join(this.root, sessionId);
    await mkdir(this.root, { recursive: true, mode: 0o700 });
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await chmod(dir, 0o700);
    return this.#volume(sessionId, dir);
  }

  async get(sessionId: string): Promise<SessionVolume | null> {
    assertSessionId(sessionId);
    const dir = join(this.root, sessionId);
    const found = await stat(dir).catch(() => null);
    return found?.isDirectory() ? this.#volume(sessionId, dir) : null;
  }

  async delete(sessionId: string): Promise<boolean> {
    assertSessionId(sessionId);
    const existed = (await this.get(sessionId)) !== null;
    await rm(join(this.root, sessionId), { recursive: true, force: true });
    return existed;
  }

  #volume(sessionId: string, dir: string): SessionVolume {
    return {
      pvcName: sessionPvcName(sessionId),
      namespace: 'local',
      phase: 'Bound',
      mountPath: dir,
      storageClass: null,
      capacity: this.capacity,
    };
  }
}
