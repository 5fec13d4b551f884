import {
  copyFile,
  lstat,
  mkdir,
  readFile,
  readlink,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { ServiceError, sha256Hex, type ExecutionPolicy, type Redactor } from '@svc/contracts';
import { mergeRunnerConfig } from './agent/index.js';
import type { SessionMount } from './config.js';

export interface AgentHomeOptions {
  profile: string;
  /** The read-only projection of the profile Secret (auth.json, config.toml, …). */
  profileDir: string;
  agentHome: string;
  workspaceDir: string;
  policy: Pick<ExecutionPolicy, 'sandbox' | 'approval' | 'network'>;
  session: SessionMount | null;
  redactor: Redactor;
}

export interface AgentHomeSummary {
  profile: string;
  agentHome: string;
  files: Array<{ name: string; sha256Prefix: string; bytes: number }>;
  providerId: string;
  model: string | null;
  configWarnings: string[];
  rolloutStorage: { mounted: boolean; mountPath: string | null; subdir: string | null };
  valuesPrinted: false;
}

const REQUIRED = ['auth.json', 'config.toml'];
const OPTIONAL = ['model-catalog.json'];

/**
 * Assembly step 4: copy the profile Secret's read-only projection into this run's writable
 * agent home (never shared between profiles or runs), merging the runner's required settings
 * into config.toml. Every secret value found is registered with the redactor first.
 */
export async function materializeAgentHome(options: AgentHomeOptions): Promise<AgentHomeSummary> {
  const { agentHome, profileDir } = options;
  await mkdir(agentHome, { recursive: true, mode: 0o700 });
  const present: string[] = [];
  for (const name of [...REQUIRED, ...OPTIONAL]) {
    if (await exists(join(profileDir, name))) present.push(name);
  }
  const required = options.profile === 'builtin-d' ? [...REQUIRED, 'model-catalog.json'] : REQUIRED;
  const missing = required.filter((name) => !present.includes(name));
  if (missing.length > 0) {
    throw new ServiceError(
      'secret-unavailable',
      `profile ${options.profile}: its Secret projection lacks ${missing.join(', ')}`,
      { profile: options.profile, missingKeys: missing },
    );
  }
  const files: AgentHomeSummary['files'] = [];
  let merged: ReturnType<typeof mergeRunnerConfig> | null = null;
  for (const name of present) {
    const content = await readFile(join(profileDir, name));
    registerSecrets(name, content.toString('utf8'), options.redactor);
    files.push({ name, sha256Prefix: sha256Hex(content).slice(0, 12), bytes: content.length });
    if (name !== 'config.toml') {
      await copyFile(join(profileDir, name), join(agentHome, name));
      continue;
    }
    merged = mergeRunnerConfig(content.toString('utf8'), {
      approvalPolicy: options.policy.approval === 'on-request' ? 'on-request' : 'never',
      sandboxMode: options.policy.sandbox,
      networkAccess: options.policy.network === 'enabled',
      trustedProjects: [options.workspaceDir],
      ...(present.includes('model-catalog.json')
        ? { modelCatalogJson: join(agentHome, 'model-catalog.json') }
        : {}),
    });
    for (const value of merged.secretValues) options.redactor.add(value);
    await writeFile(join(agentHome, 'config.toml'), merged.toml, { mode: 0o600 });
  }
  const rolloutStorage = await mountRolloutStorage(agentHome, options.session);
  return {
    profile: options.profile,
    agentHome,
    files,
    providerId: merged?.providerId ?? 'openai',
    model: merged?.model ?? null,
    configWarnings: merged?.warnings ?? [],
    rolloutStorage,
    valuesPrinted: false,
  };
}

/**
 * The session volume holds only the agent's rollout files, at `<agent_home>/<subdir>`. In a
 * cluster the claim is mounted there directly; locally the session directory lives elsewhere
 * and is linked in.
 */
async function mountRolloutStorage(
  agentHome: string,
  session: SessionMount | null,
): Promise<AgentHomeSummary['rolloutStorage']> {
  if (!session) return { mounted: false, mountPath: null, subdir: null };
  const target = join(agentHome, session.rolloutSubdir);
  if (session.mountPath !== target) {
    await mkdir(session.mountPath, { recursive: true, mode: 0o700 });
    const current = await readlink(target).catch(() => null);
    if (current === null) {
      await rm(target, { recursive: true, force: true });
      await symlink(relative(dirname(target), session.mountPath), target);
    }
  } else {
    await mkdir(target, { recursive: true, mode: 0o700 });
  }
  return { mounted: true, mountPath: session.mountPath, subdir: session.rolloutSubdir };
}

/** auth.json keys and any long string value in it are secrets. */
function registerSecrets(name: string, text: string, redactor: Redactor): void {
  redactor.add(text.trim());
  if (name !== 'auth.json') return;
  try {
    const parsed = JSON.parse(text) as Record<string, unknown>;
    const walk = (value: unknown): void => {
      if (typeof value === 'string') redactor.add(value);
      else if (value && typeof value === 'object') {
        // auth_mode is a word like "apikey", not a secret: redacting it would shred logs.
        for (const [key, child] of Object.entries(value)) if (key !== 'auth_mode') walk(child);
      }
    };
    walk(parsed);
  } catch {
    // not JSON: the whole text was registered above
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch {
    return false;
  }
}
