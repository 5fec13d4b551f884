import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { RunnerConfig } from './config.js';
import { volumeProjectionDir } from './credentials.js';

/** The per-job Secret's files: read once at start, then removed (a read-only mount stays). */
export const JOB_SECRET_FILES = ['manager-token', 'transient-env.json'] as const;

/**
 * Removes the job's secret material the runner put on disk: the agent home (auth.json, the
 * config with its keys, the model catalog, whatever the agent wrote there) except the session's
 * rollout storage, the tool credential copies under the runner home, and what is left of the
 * per-job Secret's files. Synchronous, so the SIGTERM path can run it before exiting; every
 * step is best effort (a read-only or already removed path is no failure).
 */
export function wipeSecretMaterial(
  config: Pick<
    RunnerConfig,
    'agentHome' | 'session' | 'toolCredentials' | 'runnerHome' | 'secretDir'
  >,
): void {
  const keep = config.session ? config.session.rolloutSubdir : null;
  for (const name of list(config.agentHome)) {
    if (name !== keep) remove(join(config.agentHome, name));
  }
  for (const entry of config.toolCredentials) {
    if (entry.projection.kind !== 'volume') continue;
    const dir = volumeProjectionDir(entry.projection.mountPath, config.runnerHome);
    if (dir) for (const key of entry.secretRef.keys) remove(join(dir, key));
  }
  if (config.secretDir) for (const file of JOB_SECRET_FILES) remove(join(config.secretDir, file));
}

function list(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function remove(path: string): void {
  try {
    rmSync(path, { recursive: true, force: true });
  } catch {
    // read-only (a mounted Secret) or in use: the launcher removes the job's directories
  }
}
