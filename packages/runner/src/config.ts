import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { defaultLogFormat, EnvReader, type Env, type LogFormat } from '@svc/contracts';
import { assemblyConfigFromEnv, type AssemblyEnvConfig } from './assembly/index.js';

export interface ToolCredentialProjection {
  tool: string;
  purpose: string;
  secretRef: { namespace: string; name: string; keys: string[] };
  projection: { kind: 'env'; envName: string } | { kind: 'volume'; mountPath: string };
  /** Where the Secret is mounted for this runner (read-only). */
  secretDir: string;
}

export interface SessionMount {
  sessionId: string | null;
  pvcName: string;
  namespace: string | null;
  mountPath: string;
  rolloutSubdir: string;
}

/** The runner's whole configuration, parsed once from the environment its launcher set. */
export interface RunnerConfig {
  managerUrl: string;
  managerToken: string | null;
  /** The per-job Secret's directory; its files are removed once read. */
  secretDir: string | null;
  runId: string;
  runnerId: string | null;
  attemptId: string | null;
  runnerJobId: string | null;
  jobName: string | null;
  profile: string | null;
  profileDir: string | null;
  toolCredentials: ToolCredentialProjection[];
  /** The projected fetch credential of the run's git bundle (fetch only, never the agent's). */
  bundleCredentialDir: string | null;
  transientEnv: Array<{ name: string; value: string }>;
  workspaceDir: string;
  agentHome: string;
  runnerHome: string;
  idleExitMs: number;
  /** The run gets no follow-up turn (a queue task's): close it once its turn ended, and exit. */
  singleTurn: boolean;
  codexBinary: string | null;
  session: SessionMount | null;
  image: string | null;
  /** The manager's image resolution (ref, digest, source, reuse), no secret in it. */
  imageSummary: Record<string, unknown> | null;
  logLevel: string;
  /** LOG_FORMAT: `json` (a job log) unless set, or stdout is a terminal. */
  logFormat: LogFormat;
  /** Base tools the runner refuses to start without (infra-failed). */
  requiredTools: string[];
  /** Tool versions probed on this host before (SVC_WORK_READY_CACHE; the local launcher's). */
  workReadyCache: string | null;
  /** The service's own tools (tran, trans, apply_patch), linked into every run's PATH. */
  serviceToolsDir: string | null;
  assembly: AssemblyEnvConfig;
}

export function loadRunnerConfig(env: Env = process.env): RunnerConfig {
  const r = new EnvReader(env);
  const secretDir = r.optional('SVC_SECRET_DIR');
  // Read once, then removed: the values live on in this process only, not on the job's disk.
  const readSecret = (file: string): string | null => {
    if (!secretDir) return null;
    let text: string;
    try {
      text = readFileSync(join(secretDir, file), 'utf8');
    } catch {
      return null;
    }
    try {
      rmSync(join(secretDir, file), { force: true });
    } catch {
      // a read-only Secret volume (Kubernetes): it ends with the pod
    }
    return text;
  };
  const tokenFile = r.optional('SVC_API_KEY_FILE');
  const managerToken = tokenFile
    ? readFileSafe(r, tokenFile, 'SVC_API_KEY_FILE')
    : (readSecret('manager-token')?.trim() ?? null);
  const transientRaw = readSecret('transient-env.json');
  let transientEnv: RunnerConfig['transientEnv'] = [];
  if (transientRaw) {
    try {
      transientEnv = JSON.parse(transientRaw) as RunnerConfig['transientEnv'];
    } catch {
      r.fail('the per-job transient-env.json is not valid JSON');
    }
  }
  const tools =
    r.json<ToolCredentialProjection[]>('SVC_TOOL_CREDENTIALS', (v) =>
      Array.isArray(v) ? null : 'must be a JSON array',
    ) ?? [];
  const jobDir = r.optional('SVC_JOB_DIR') ?? process.cwd();
  const pvcName = r.optional('SVC_SESSION_PVC_NAME');
  const agentHome = r.string('SVC_AGENT_HOME', join(jobDir, 'agent-home'));
  const rolloutSubdir = r.string('SVC_AGENT_ROLLOUT_SUBDIR', 'sessions');
  const managerUrl = r.url('SVC_MANAGER_URL');
  const runId = r.optional('SVC_RUN_ID');
  if (!managerUrl) r.fail('SVC_MANAGER_URL is required');
  if (!runId) r.fail('SVC_RUN_ID is required');
  const config: RunnerConfig = {
    managerUrl: managerUrl ?? '',
    managerToken,
    secretDir: secretDir ?? null,
    runId: runId ?? '',
    runnerId: r.optional('SVC_RUNNER_ID') ?? null,
    attemptId: r.optional('SVC_ATTEMPT_ID') ?? null,
    runnerJobId: r.optional('SVC_RUNNER_JOB_ID') ?? null,
    jobName: r.optional('SVC_JOB_NAME') ?? null,
    profile: r.optional('SVC_PROFILE') ?? null,
    profileDir: r.optional('SVC_PROFILE_DIR') ?? null,
    toolCredentials: tools,
    bundleCredentialDir: r.optional('SVC_BUNDLE_CREDENTIAL_DIR') ?? null,
    transientEnv,
    workspaceDir: r.string('SVC_WORKSPACE_DIR', join(jobDir, 'workspace')),
    agentHome,
    runnerHome: r.string('SVC_RUNNER_HOME', r.string('HOME', jobDir)),
    idleExitMs: r.int('SVC_RUNNER_IDLE_EXIT_MS', 120_000, { min: 0 }),
    singleTurn: r.bool('SVC_RUNNER_SINGLE_TURN', false),
    codexBinary: r.optional('SVC_CODEX_BIN') ?? null,
    session: pvcName
      ? {
          sessionId: r.optional('SVC_SESSION_ID') ?? null,
          pvcName,
          namespace: r.optional('SVC_SESSION_PVC_NAMESPACE') ?? null,
          mountPath: r.string('SVC_SESSION_PVC_MOUNT_PATH', join(agentHome, rolloutSubdir)),
          rolloutSubdir,
        }
      : null,
    image: r.optional('SVC_IMAGE') ?? null,
    imageSummary:
      r.json<Record<string, unknown>>('SVC_IMAGE_SUMMARY', (v) =>
        v && typeof v === 'object' && !Array.isArray(v) ? null : 'must be a JSON object',
      ) ?? null,
    logLevel: r.string('LOG_LEVEL', 'info'),
    logFormat: r.oneOf('LOG_FORMAT', ['json', 'pretty'] as const, defaultLogFormat()),
    requiredTools: r.list('SVC_REQUIRED_TOOLS', ['git', 'node']),
    workReadyCache: r.optional('SVC_WORK_READY_CACHE') ?? null,
    serviceToolsDir: r.optional('SVC_SERVICE_TOOLS_DIR') ?? defaultServiceTools(),
    assembly: assemblyFromEnv(r, env),
  };
  r.done();
  return config;
}

/** The repository's tools/ next to this package (the image copies them to the same place). */
function defaultServiceTools(): string | null {
  const candidate = join(import.meta.dirname, '..', '..', '..', 'tools');
  return existsSync(join(candidate, 'apply_patch')) ? candidate : null;
}

/** The assembly settings, folded into this one parse so every problem is listed together. */
function assemblyFromEnv(r: EnvReader, env: Env): AssemblyEnvConfig {
  try {
    return assemblyConfigFromEnv(env);
  } catch (error) {
    r.fail(error instanceof Error ? error.message : String(error));
    return {
      resourceBinPath: null,
      mirror: null,
      workspacePrefix: null,
      forbiddenRoots: [],
      fetchTimeoutMs: 300_000,
    };
  }
}

function readFileSafe(r: EnvReader, path: string, name: string): string | null {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    r.fail(`${name} ${path} cannot be read`);
    return null;
  }
}
