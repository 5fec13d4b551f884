import { EnvReader, type Env } from '@svc/contracts';
import type { MirrorConfig } from './mirror.js';

/**
 * Assembly settings from the runner's environment. Paths and the mirror are infrastructure, set
 * by the runner Job, never by a request.
 *
 * | Variable | Meaning |
 * | --- | --- |
 * | SVC_RESOURCE_BIN_PATH | directory that receives tool shims (optional) |
 * | SVC_GIT_MIRROR_BASE_URL | mirror read URL; unset means no rewrite |
 * | SVC_GIT_MIRROR_HOSTS | comma-separated code hosts the mirror serves (default github.com) |
 * | SVC_WORKSPACE_PREFIX | allowed workspace prefix (optional) |
 * | SVC_FORBIDDEN_ROOTS | extra comma-separated forbidden roots (Secret projections, agent home, session dirs) |
 * | SVC_GIT_FETCH_TIMEOUT_MS | per fetch or ls-remote (default 300000) |
 */
export interface AssemblyEnvConfig {
  resourceBinPath: string | null;
  mirror: MirrorConfig | null;
  workspacePrefix: string | null;
  forbiddenRoots: string[];
  fetchTimeoutMs: number;
}

export function assemblyConfigFromEnv(env: Env = process.env): AssemblyEnvConfig {
  const reader = new EnvReader(env);
  const mirrorBase = reader.url('SVC_GIT_MIRROR_BASE_URL');
  const config: AssemblyEnvConfig = {
    resourceBinPath: reader.optional('SVC_RESOURCE_BIN_PATH') ?? null,
    mirror: mirrorBase
      ? { baseUrl: mirrorBase, codeHostHosts: reader.list('SVC_GIT_MIRROR_HOSTS', ['github.com']) }
      : null,
    workspacePrefix: reader.optional('SVC_WORKSPACE_PREFIX') ?? null,
    forbiddenRoots: reader.list('SVC_FORBIDDEN_ROOTS', []),
    fetchTimeoutMs: reader.int('SVC_GIT_FETCH_TIMEOUT_MS', 300_000, { min: 1000, max: 3_600_000 }),
  };
  for (const [name, value] of [
    ['SVC_RESOURCE_BIN_PATH', config.resourceBinPath],
    ['SVC_WORKSPACE_PREFIX', config.workspacePrefix],
  ] as const) {
    if (value !== null && !value.startsWith('/')) reader.fail(`${name} must be an absolute path`);
  }
  if (config.forbiddenRoots.some((root) => !root.startsWith('/'))) {
    reader.fail('SVC_FORBIDDEN_ROOTS must list absolute paths');
  }
  reader.done();
  return config;
}
