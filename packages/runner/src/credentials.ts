import { chmod, copyFile, mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ServiceError, type Redactor } from '@svc/contracts';
import type { RunnerConfig, ToolCredentialProjection } from './config.js';

/** The runner user's home as the manager validates mount paths against it. */
export const RUNNER_HOME_IN_POLICY = '/home/runner';

export interface ProjectedCredentials {
  /** Environment for the agent process (tool env projections and transientEnv). */
  env: Record<string, string>;
  summary: {
    tools: Array<{
      tool: string;
      purpose: string;
      secretRef: { name: string; keys: string[] };
      projection: string;
      target: string;
      valuesPrinted: false;
    }>;
    transientEnv: { names: string[]; count: number; valuesPrinted: false };
  };
}

/**
 * Assembly step 5: project this run's tool credentials (env, or a read-only copy under the
 * runner home) and the job's transientEnv. Only the current run's entries; no namespace is
 * enumerated. Values go to the agent's environment or files, and to the redactor.
 */
export async function projectCredentials(
  config: RunnerConfig,
  redactor: Redactor,
): Promise<ProjectedCredentials> {
  const env: Record<string, string> = {};
  const tools: ProjectedCredentials['summary']['tools'] = [];
  for (const entry of config.toolCredentials) {
    const target = await projectOne(entry, config.runnerHome, env, redactor);
    tools.push({
      tool: entry.tool,
      purpose: entry.purpose,
      secretRef: { name: entry.secretRef.name, keys: entry.secretRef.keys },
      projection: entry.projection.kind,
      target,
      valuesPrinted: false,
    });
  }
  for (const { name, value } of config.transientEnv) {
    redactor.add(value);
    env[name] = value;
  }
  return {
    env,
    summary: {
      tools,
      transientEnv: {
        names: config.transientEnv.map((e) => e.name),
        count: config.transientEnv.length,
        valuesPrinted: false,
      },
    },
  };
}

async function projectOne(
  entry: ToolCredentialProjection,
  runnerHome: string,
  env: Record<string, string>,
  redactor: Redactor,
): Promise<string> {
  const read = async (key: string) => {
    try {
      return await readFile(join(entry.secretDir, key));
    } catch {
      throw new ServiceError(
        'secret-unavailable',
        `tool credential ${entry.tool}: Secret ${entry.secretRef.name} has no key ${key}`,
        {
          tool: entry.tool,
          secretName: entry.secretRef.name,
        },
      );
    }
  };
  if (entry.projection.kind === 'env') {
    const key = entry.secretRef.keys[0];
    if (!key)
      throw new ServiceError('schema-invalid', `tool credential ${entry.tool} names no key`);
    const value = (await read(key)).toString('utf8').trim();
    redactor.add(value);
    env[entry.projection.envName] = value;
    return `env:${entry.projection.envName}`;
  }
  const dir = volumeProjectionDir(entry.projection.mountPath, runnerHome);
  if (!dir) {
    throw new ServiceError(
      'schema-invalid',
      `tool credential ${entry.tool}: volume mount ${entry.projection.mountPath} is outside the runner home`,
    );
  }
  await mkdir(dir, { recursive: true, mode: 0o700 });
  for (const key of entry.secretRef.keys) {
    const value = await read(key);
    redactor.add(value.toString('utf8').trim());
    await copyFile(join(entry.secretDir, key), join(dir, key));
    await chmod(join(dir, key), 0o400); // read-only, like a mounted Secret volume
  }
  return `volume:${dir}`;
}

/** Where a volume projection's copies go under the runner home; null when outside it. */
export function volumeProjectionDir(mountPath: string, runnerHome: string): string | null {
  const suffix = mountPath.slice(RUNNER_HOME_IN_POLICY.length).replace(/^\/+/, '');
  if (!mountPath.startsWith(`${RUNNER_HOME_IN_POLICY}/`) || suffix.split('/').includes('..'))
    return null;
  return join(runnerHome, suffix);
}
