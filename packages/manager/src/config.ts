import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import {
  APPROVAL_LEVELS,
  EnvReader,
  MAX_POLICY_TIMEOUT_MS,
  parseOperatorPrefix,
  NETWORK_LEVELS,
  RESULT_AGGREGATION_CAP,
  SANDBOX_LEVELS,
  SECRET_NAMESPACE,
  type ApprovalLevel,
  type Env,
  type NetworkLevel,
  type SandboxLevel,
} from '@svc/contracts';
import { RUNNER_TOKEN_PREFIX } from './domain/caller-tokens.js';
import type { StoreConfig } from './store/db.js';
import type { AdmissionSettings } from './http/admission.js';
import { RUNNER_POD_DEFAULTS } from './launcher/runner-pod-defaults.js';

/** The widest execution policy a run may ask for, and the defaults that complete a policy. */
export interface PolicyLimits {
  maxSandbox: SandboxLevel;
  maxApproval: ApprovalLevel;
  maxNetwork: NetworkLevel;
  maxTimeoutMs: number;
  allowedTools: string[];
  defaultSandbox: SandboxLevel;
  defaultApproval: ApprovalLevel;
  defaultNetwork: NetworkLevel;
  defaultTimeoutMs: number;
}

/** Provider profiles: the built-in profiles' fixed settings and the validation canary. */
export interface ProfileSettings {
  /** The platform's internal bridge (builtin-b, builtin-d), ending in /v1. */
  bridgeBaseUrl: string | null;
  /** The one model builtin-d runs. */
  flashModelId: string | null;
  /** Where validation canary runs live (an allowlisted tenant; its own project). */
  validationTenant: string;
  validationProject: string;
  /** Idle budget of a canary turn. */
  validationTimeoutMs: number;
}

export interface ManagerConfig {
  host: string;
  port: number;
  dataDir: string;
  store: StoreConfig;
  /** `runtime` deployments must be given SVC_API_KEY; `local` runs permissive without one. */
  deploymentMode: 'local' | 'runtime';
  /** Every accepted operator key (several during a rotation); empty when none is configured. */
  apiKeys: readonly string[];
  /** SVC_API_KEY_FILE, kept out of every runner sandbox. */
  apiKeyFile: string | null;
  tenants: string[];
  /** Largest request body accepted (413 beyond). */
  bodyLimitBytes: number;
  /** How often every controlled Secret is read again into the masks (changes made elsewhere). */
  maskRefreshMs: number;
  /** URL prefixes (a local mirror) a repository address may use beyond the network schemes. */
  repoUrlPrefixes: string[];
  policy: PolicyLimits;
  profiles: ProfileSettings;
  logLevel: string;
  leaseTtlMs: number;
  heartbeatIntervalMs: number;
  pollWaitMaxMs: number;
  /** SIGTERM: serve this long while unready (the Service drops the replica), then drain. */
  drainDelayMs: number;
  /** SIGTERM: wait at most this long for requests in flight before closing. */
  drainTimeoutMs: number;
  commandTtlMs: number;
  maintenanceIntervalMs: number;
  /** Events aggregated per result call before eventsCapped (DESIGN: 50,000). */
  resultEventCap: number;
  serviceId: string;
  /** Distinguishes this process from earlier ones (orphaned local jobs). */
  instanceId: string;
  /** URL runners use to reach the manager; default: the address it listens on. */
  publicUrl: string | null;
  launcher: {
    kind: 'local' | 'kubernetes';
    namespace: string;
    /** Local launcher: the runner entry script (default: the installed @svc/runner build). */
    runnerEntry: string | null;
    killGraceMs: number;
    /** Local launcher: each runner Job in its own bubblewrap sandbox unless turned off. */
    isolation: {
      mode: 'on' | 'off';
      /** bwrap to use; null: the first on PATH. */
      bwrapPath: string | null;
      /** The job's user and group when the manager runs as root. */
      uid: number;
      gid: number;
    };
  };
  /** Where controlled Secrets live: the local directory store or Kubernetes Secrets. */
  secretStore: { kind: 'local' | 'kubernetes' };
  /** The Kubernetes edges (launcher, Secret store, session claims). */
  kubernetes: {
    /** An explicit API server URL; null: KUBECONFIG, ~/.kube/config or in-cluster. */
    apiUrl: string | null;
    /** The wait before listing runner Jobs again when the watch is refused or the API is down. */
    pollIntervalMs: number;
    /** A full list of runner Jobs this often even while the watch is healthy. */
    resyncIntervalMs: number;
    sessionStorageClass: string;
    sessionStorageSize: string;
    /** Every API call: its own timeout, then bounded retries with backoff. */
    requestTimeoutMs: number;
    retries: number;
    /** Runner pod resources (Kubernetes quantities). */
    runnerResources: { requests: Record<string, string>; limits: Record<string, string> };
    /** A runner Job's wall-clock deadline is this many times the run's idle budget. */
    jobDeadlineFactor: number;
  };
  runnerJobs: {
    defaultImage: string;
    imageAllowlist: string[];
    imageCatalogPath: string | null;
    ttlSecondsAfterFinished: number;
    /** Controlled non-secret defaults, e.g. PLATFORM_FRONTEND_URL for platform-ssh runs. */
    platformDefaults: Record<string, string>;
    runnerIdleExitMs: number;
    /** Tools a runner refuses to start without (its SVC_REQUIRED_TOOLS). */
    requiredTools: string[];
    /** Tools the Kubernetes runner image declares. */
    imageTools: string[];
  };
  sessions: {
    /** A session's storage expires this long after its last send (then GC may evict it). */
    ttlSeconds: number;
    gcIntervalMs: number;
    /** Where the agent keeps rollouts inside its home; the session volume is mounted there. */
    rolloutSubdir: string;
  };
  build: { version: string; commit: string; builtAt: string | null };
  /** Clients watching runs: long-poll waits and event streams (docs/operator-surface.md). */
  watch: {
    /** Longest a client's `waitMs` is honoured; a longer wait ends early with what exists. */
    waitMaxMs: number;
    /**
     * Client long-polls (`waitMs` > 0) and event streams open at once in this process, together;
     * one more is refused (429, Retry-After). Runner command polls are not counted.
     */
    maxWatches: number;
    streamHeartbeatMs: number;
    /** A stream closes after this long; the browser reconnects with Last-Event-ID. */
    streamMaxMs: number;
  };
  /** Per-state store counts on /metrics are refreshed when older than this (never per scrape). */
  metricsCountsMaxAgeMs: number;
  /** `pretty` (coloured lines) or `json`; default: pretty on a terminal, json otherwise. */
  logFormat: 'pretty' | 'json';
  scheduler: SchedulerSettings;
  /** Overload: queue-time budget and places per lane (docs/operations.md, "Overload"). */
  admission: AdmissionSettings;
  /** Coalesced appends and lease renewals in flight at once, each kind; 0: one per commit. */
  writeGroups: number;
}

/** Capacity limits: null means no limit at that level; the maps override per name. */
export interface SchedulerSettings {
  enabled: boolean;
  maxRunning: number;
  perTenant: number | null;
  tenants: Record<string, number>;
  perProfile: number | null;
  profiles: Record<string, number>;
  perQueue: number | null;
  queues: Record<string, number>;
  batchSize: number;
  scanIntervalMs: number;
  launchConcurrency: number;
  retry: { backoffMs: number; maxBackoffMs: number };
  replacement: { maxPerRun: number; backoffMs: number };
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Parse the manager's environment once. Throws ConfigError listing every problem. */
export function loadConfig(env: Env = process.env): ManagerConfig {
  const r = new EnvReader(env);
  const dataDir = resolve(r.string('SVC_DATA_DIR', './.data'));
  const databaseUrl = r.url('DATABASE_URL');
  const writeGroups = r.int('SVC_WRITE_GROUPS', 4, { min: 0, max: 32 });
  const store: StoreConfig = databaseUrl
    ? {
        kind: 'postgres',
        url: databaseUrl,
        poolSize: r.int('SVC_DB_POOL_SIZE', 10, { min: 1, max: 200 }),
        leasePoolSize: r.int('SVC_DB_LEASE_POOL_SIZE', 2, { min: 0, max: 50 }),
        writePoolSize: writeGroups,
      }
    : { kind: 'pglite', dataDir: resolve(dataDir, 'pglite') };

  const apiKeys = readApiKeys(r);
  const deploymentMode = r.oneOf('SVC_DEPLOYMENT_MODE', ['local', 'runtime'] as const, 'local');

  const policy: PolicyLimits = {
    maxSandbox: r.oneOf('SVC_POLICY_MAX_SANDBOX', SANDBOX_LEVELS, 'danger-full-access'),
    maxApproval: r.oneOf('SVC_POLICY_MAX_APPROVAL', APPROVAL_LEVELS, 'never'),
    maxNetwork: r.oneOf('SVC_POLICY_MAX_NETWORK', NETWORK_LEVELS, 'enabled'),
    maxTimeoutMs: r.int('SVC_POLICY_MAX_TIMEOUT_MS', 3_600_000, {
      min: 1000,
      max: MAX_POLICY_TIMEOUT_MS,
    }),
    allowedTools: r.list('SVC_POLICY_ALLOWED_TOOLS', ['codehost', 'platform-ssh']),
    defaultSandbox: r.oneOf('SVC_POLICY_DEFAULT_SANDBOX', SANDBOX_LEVELS, 'workspace-write'),
    defaultApproval: r.oneOf('SVC_POLICY_DEFAULT_APPROVAL', APPROVAL_LEVELS, 'never'),
    defaultNetwork: r.oneOf('SVC_POLICY_DEFAULT_NETWORK', NETWORK_LEVELS, 'disabled'),
    defaultTimeoutMs: r.int('SVC_POLICY_DEFAULT_TIMEOUT_MS', 600_000, {
      min: 1000,
      max: MAX_POLICY_TIMEOUT_MS,
    }),
  };
  checkDefaultsWithinCeiling(r, policy);

  const config: ManagerConfig = {
    host: r.string('HOST', '127.0.0.1'),
    port: r.int('PORT', 8080, { min: 0, max: 65535 }),
    dataDir,
    store,
    deploymentMode,
    apiKeys,
    apiKeyFile: r.optional('SVC_API_KEY_FILE') ?? null,
    tenants: r.list('SVC_TENANT_ALLOWLIST', ['tenant-a', 'tenant-b']),
    bodyLimitBytes: r.int('SVC_BODY_LIMIT_BYTES', 1024 * 1024, {
      min: 1024,
      max: 64 * 1024 * 1024,
    }),
    maskRefreshMs: r.int('SVC_MASK_REFRESH_MS', 60_000, { min: 1000 }),
    repoUrlPrefixes: repoUrlPrefixes(r),
    policy,
    profiles: profileSettings(r),
    logLevel: r.oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
    leaseTtlMs: r.int('SVC_LEASE_TTL_MS', 30_000, { min: 1000 }),
    heartbeatIntervalMs: r.int('SVC_HEARTBEAT_INTERVAL_MS', 10_000, { min: 100 }),
    pollWaitMaxMs: r.int('SVC_POLL_WAIT_MAX_MS', 20_000, { min: 0, max: 30_000 }),
    drainDelayMs: r.int('SVC_DRAIN_DELAY_MS', 5_000, { min: 0, max: 120_000 }),
    drainTimeoutMs: r.int('SVC_DRAIN_TIMEOUT_MS', 25_000, { min: 0, max: 600_000 }),
    commandTtlMs: r.int('SVC_COMMAND_TTL_MS', 15 * 60_000, { min: 1000 }),
    maintenanceIntervalMs: r.int('SVC_MAINTENANCE_INTERVAL_MS', 10_000, { min: 100 }),
    resultEventCap: r.int('SVC_RESULT_EVENT_CAP', RESULT_AGGREGATION_CAP, {
      min: 1,
      max: 1_000_000,
    }),
    serviceId: r.string('SVC_SERVICE_ID', 'run-manager'),
    instanceId: `mgr-${randomBytes(6).toString('hex')}`,
    publicUrl: r.url('SVC_MANAGER_PUBLIC_URL') ?? null,
    launcher: {
      kind: r.oneOf('SVC_LAUNCHER', ['local', 'kubernetes'] as const, 'local'),
      namespace: r.string('SVC_NAMESPACE', 'svc-v01'),
      runnerEntry: r.optional('SVC_RUNNER_ENTRY') ?? null,
      killGraceMs: r.int('SVC_RUNNER_KILL_GRACE_MS', 5000, { min: 0 }),
      isolation: {
        mode: r.oneOf('SVC_LOCAL_ISOLATION', ['on', 'off'] as const, 'on'),
        bwrapPath: r.optional('SVC_BWRAP_PATH') ?? null,
        // 65532: an unprivileged id no distribution gives a user (distroless calls it nonroot).
        uid: r.int('SVC_LOCAL_RUNNER_UID', 65532, { min: 1, max: 2 ** 31 - 2 }),
        gid: r.int('SVC_LOCAL_RUNNER_GID', 65532, { min: 1, max: 2 ** 31 - 2 }),
      },
    },
    secretStore: { kind: r.oneOf('SVC_SECRET_STORE', ['local', 'kubernetes'] as const, 'local') },
    kubernetes: {
      apiUrl: r.url('SVC_KUBE_API_URL') ?? null,
      pollIntervalMs: r.int('SVC_KUBE_POLL_INTERVAL_MS', 5000, { min: 100, max: 60_000 }),
      resyncIntervalMs: r.int('SVC_KUBE_RESYNC_INTERVAL_MS', 300_000, {
        min: 1000,
        max: 3_600_000,
      }),
      sessionStorageClass: r.string('SVC_SESSION_STORAGE_CLASS', 'local-path'),
      sessionStorageSize: r.string('SVC_SESSION_STORAGE_SIZE', '1Gi'),
      requestTimeoutMs: r.int('SVC_KUBE_REQUEST_TIMEOUT_MS', 10_000, { min: 100, max: 120_000 }),
      retries: r.int('SVC_KUBE_RETRIES', 3, { min: 0, max: 10 }),
      runnerResources: {
        requests: quantities(r, {
          cpu: ['SVC_RUNNER_CPU_REQUEST', RUNNER_POD_DEFAULTS.requests.cpu],
          memory: ['SVC_RUNNER_MEMORY_REQUEST', RUNNER_POD_DEFAULTS.requests.memory],
          'ephemeral-storage': [
            'SVC_RUNNER_EPHEMERAL_STORAGE_REQUEST',
            RUNNER_POD_DEFAULTS.requests['ephemeral-storage'],
          ],
        }),
        limits: quantities(r, {
          cpu: ['SVC_RUNNER_CPU_LIMIT', ''],
          memory: ['SVC_RUNNER_MEMORY_LIMIT', RUNNER_POD_DEFAULTS.limits.memory],
          'ephemeral-storage': [
            'SVC_RUNNER_EPHEMERAL_STORAGE_LIMIT',
            RUNNER_POD_DEFAULTS.limits['ephemeral-storage'],
          ],
        }),
      },
      jobDeadlineFactor: r.int(
        'SVC_RUNNER_JOB_DEADLINE_FACTOR',
        RUNNER_POD_DEFAULTS.deadlineFactor,
        { min: 1, max: 1000 },
      ),
    },
    runnerJobs: {
      defaultImage: r.string('SVC_RUNNER_IMAGE', LOCAL_RUNNER_IMAGE),
      imageAllowlist: r.list('SVC_RUNNER_IMAGE_ALLOWLIST', []),
      imageCatalogPath: r.optional('SVC_IMAGE_CATALOG') ?? null,
      ttlSecondsAfterFinished: r.int('SVC_JOB_TTL_SECONDS', 3600, { min: 0 }),
      platformDefaults: keyValues(r, 'SVC_PLATFORM_DEFAULTS'),
      runnerIdleExitMs: r.int('SVC_RUNNER_IDLE_EXIT_MS', 120_000, { min: 100 }),
      requiredTools: r.list('SVC_REQUIRED_TOOLS', ['git', 'node']),
      imageTools: r.list('SVC_RUNNER_TOOLS', [
        'git',
        'node',
        'npm',
        'ssh',
        'curl',
        'rg',
        'kubectl',
        'gh',
        'jq',
        'python3',
      ]),
    },
    sessions: {
      ttlSeconds: r.int('SVC_SESSION_TTL_SECONDS', 7 * 24 * 3600, { min: 60 }),
      gcIntervalMs: r.int('SVC_SESSION_GC_INTERVAL_MS', 5 * 60_000, { min: 100 }),
      rolloutSubdir: r.string('SVC_AGENT_ROLLOUT_SUBDIR', 'sessions'),
    },
    build: {
      version: r.string('SVC_VERSION', '0.1.0'),
      commit: r.optional('SVC_SOURCE_COMMIT') ?? gitCommit() ?? 'unknown',
      builtAt: r.optional('SVC_BUILD_TIME') ?? null,
    },
    scheduler: schedulerSettings(r),
    admission: {
      enabled: r.oneOf('SVC_ADMISSION', ['on', 'off'] as const, 'on') === 'on',
      queueBudgetMs: r.int('SVC_ADMISSION_QUEUE_MS', 100, { min: 0, max: 60_000 }),
      runnerPlaces: r.int('SVC_ADMISSION_RUNNER_PLACES', 128, { min: 1, max: 100_000 }),
      clientPlaces: r.int('SVC_ADMISSION_CLIENT_PLACES', 64, { min: 1, max: 100_000 }),
    },
    writeGroups,
    watch: {
      waitMaxMs: r.int('SVC_CLIENT_WAIT_MAX_MS', 30_000, { min: 0, max: 300_000 }),
      maxWatches: r.int('SVC_MAX_WATCHES', 200, { min: 0, max: 100_000 }),
      streamHeartbeatMs: r.int('SVC_STREAM_HEARTBEAT_MS', 15_000, { min: 100, max: 300_000 }),
      streamMaxMs: r.int('SVC_STREAM_MAX_MS', 15 * 60_000, { min: 1000 }),
    },
    metricsCountsMaxAgeMs: r.int('SVC_METRICS_COUNTS_MAX_AGE_MS', 15_000, { min: 0 }),
    logFormat: r.oneOf(
      'LOG_FORMAT',
      ['pretty', 'json'] as const,
      process.stdout.isTTY ? 'pretty' : 'json',
    ),
  };
  if (config.heartbeatIntervalMs >= config.leaseTtlMs) {
    r.fail('SVC_HEARTBEAT_INTERVAL_MS must be shorter than SVC_LEASE_TTL_MS');
  }
  if (config.tenants.length === 0) r.fail('SVC_TENANT_ALLOWLIST must name at least one tenant');
  checkKubernetes(r, config);
  const bwrap = config.launcher.isolation.bwrapPath;
  if (bwrap !== null && !bwrap.startsWith('/')) r.fail('SVC_BWRAP_PATH must be an absolute path');
  r.done();
  return config;
}

function repoUrlPrefixes(r: EnvReader): string[] {
  const prefixes: string[] = [];
  for (const item of r.list('SVC_REPO_URL_ALLOW_PREFIXES', [])) {
    const prefix = parseOperatorPrefix(item);
    if (prefix) prefixes.push(prefix);
    else
      r.fail(
        `SVC_REPO_URL_ALLOW_PREFIXES: ${JSON.stringify(item)} is not a canonical URL ending in /`,
      );
  }
  return prefixes;
}

/**
 * The image name of the local launcher's runner: the installed runner build, named by a digest
 * of its version so it passes the same digest-pinning rule as registry images.
 */
const LOCAL_RUNNER_IMAGE = `localhost/svc-runner@sha256:${createHash('sha256').update('svc-runner-local-0.1.0').digest('hex')}`;

/** `NAME=value,NAME2=value2` (non-secret settings only). */
function keyValues(r: EnvReader, name: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of r.list(name, [])) {
    const at = pair.indexOf('=');
    if (at <= 0) {
      r.fail(`${name} entries must look like NAME=value`);
      continue;
    }
    out[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return out;
}

/**
 * The scheduler runs in every replica by default: replicas share the work through the
 * database (row locks, one capacity lock), so adding a replica adds no double dispatch.
 */
function schedulerSettings(r: EnvReader): SchedulerSettings {
  const optionalInt = (name: string) =>
    r.raw(name) === undefined ? null : r.int(name, 0, { min: 0, max: 100_000 });
  return {
    enabled: r.oneOf('SVC_SCHEDULER', ['on', 'off'] as const, 'on') === 'on',
    maxRunning: r.int('SVC_SCHEDULER_MAX_RUNNING', 20, { min: 0, max: 100_000 }),
    perTenant: optionalInt('SVC_SCHEDULER_TENANT_MAX_RUNNING'),
    tenants: limitMap(r, 'SVC_SCHEDULER_TENANT_LIMITS'),
    perProfile: optionalInt('SVC_SCHEDULER_PROFILE_MAX_RUNNING'),
    profiles: limitMap(r, 'SVC_SCHEDULER_PROFILE_LIMITS'),
    perQueue: optionalInt('SVC_SCHEDULER_QUEUE_MAX_RUNNING'),
    queues: limitMap(r, 'SVC_SCHEDULER_QUEUE_LIMITS'),
    batchSize: r.int('SVC_SCHEDULER_BATCH', 20, { min: 1, max: 500 }),
    scanIntervalMs: r.int('SVC_SCHEDULER_SCAN_MS', 5000, { min: 50, max: 600_000 }),
    launchConcurrency: r.int('SVC_SCHEDULER_LAUNCH_CONCURRENCY', 8, { min: 1, max: 200 }),
    retry: {
      backoffMs: r.int('SVC_RETRY_BACKOFF_MS', 5000, { min: 0, max: 3_600_000 }),
      maxBackoffMs: r.int('SVC_RETRY_MAX_BACKOFF_MS', 300_000, { min: 0, max: 86_400_000 }),
    },
    replacement: {
      maxPerRun: r.int('SVC_REPLACEMENT_MAX', 3, { min: 0, max: 100 }),
      backoffMs: r.int('SVC_REPLACEMENT_BACKOFF_MS', 2000, { min: 0, max: 3_600_000 }),
    },
  };
}

/** `name=limit,name2=limit2`. */
function limitMap(r: EnvReader, name: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, value] of Object.entries(keyValues(r, name))) {
    const n = Number(value);
    if (!Number.isInteger(n) || n < 0) r.fail(`${name}: ${key} needs a whole number >= 0`);
    else out[key] = n;
  }
  return out;
}

/**
 * Operator API keys: `SVC_API_KEY` (comma-separated) and `SVC_API_KEY_FILE` (one key per line,
 * `#` comments) together, so a rotation can add the new key before the old one is removed.
 */
function readApiKeys(r: EnvReader): string[] {
  const keys = splitKeys(r.raw('SVC_API_KEY') ?? '', /,/);
  const file = r.raw('SVC_API_KEY_FILE');
  if (file) {
    try {
      const fromFile = splitKeys(readFileSync(file, 'utf8'), /\r?\n/).filter(
        (k) => !k.startsWith('#'),
      );
      if (fromFile.length === 0) r.fail(`SVC_API_KEY_FILE ${file} holds no key`);
      keys.push(...fromFile);
    } catch (error) {
      r.fail(
        `SVC_API_KEY_FILE ${file} cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
      );
    }
  }
  for (const key of keys) {
    // A key is a bearer token: whitespace would never survive the Authorization header.
    if (/\s/.test(key)) r.fail('an API key must not contain whitespace');
    else if (key.startsWith(RUNNER_TOKEN_PREFIX))
      r.fail(`an API key must not start with ${RUNNER_TOKEN_PREFIX} (runner tokens do)`);
  }
  return [...new Set(keys)];
}

function splitKeys(text: string, separator: RegExp): string[] {
  return text
    .split(separator)
    .map((k) => k.trim())
    .filter((k) => k !== '');
}

function checkDefaultsWithinCeiling(r: EnvReader, p: PolicyLimits): void {
  const rank = <T extends string>(levels: readonly T[], v: T) => levels.indexOf(v);
  if (rank(SANDBOX_LEVELS, p.defaultSandbox) > rank(SANDBOX_LEVELS, p.maxSandbox))
    r.fail('SVC_POLICY_DEFAULT_SANDBOX is wider than SVC_POLICY_MAX_SANDBOX');
  if (rank(APPROVAL_LEVELS, p.defaultApproval) > rank(APPROVAL_LEVELS, p.maxApproval))
    r.fail('SVC_POLICY_DEFAULT_APPROVAL is wider than SVC_POLICY_MAX_APPROVAL');
  if (rank(NETWORK_LEVELS, p.defaultNetwork) > rank(NETWORK_LEVELS, p.maxNetwork))
    r.fail('SVC_POLICY_DEFAULT_NETWORK is wider than SVC_POLICY_MAX_NETWORK');
  if (p.defaultTimeoutMs > p.maxTimeoutMs)
    r.fail('SVC_POLICY_DEFAULT_TIMEOUT_MS is above SVC_POLICY_MAX_TIMEOUT_MS');
}

function profileSettings(r: EnvReader): ProfileSettings {
  const bridgeBaseUrl = r.url('SVC_BRIDGE_BASE_URL') ?? null;
  if (bridgeBaseUrl !== null && !/^https?:\/\/[^/]+(\/.*)?\/v1$/.test(bridgeBaseUrl))
    r.fail('SVC_BRIDGE_BASE_URL must be an http(s) URL ending in /v1');
  const tenants = r.list('SVC_TENANT_ALLOWLIST', ['tenant-a', 'tenant-b']);
  const validationTenant = r.string('SVC_VALIDATION_TENANT', tenants[0] ?? 'tenant-a');
  if (!tenants.includes(validationTenant))
    r.fail('SVC_VALIDATION_TENANT must be one of SVC_TENANT_ALLOWLIST');
  return {
    bridgeBaseUrl,
    flashModelId: r.optional('SVC_FLASH_MODEL_ID') ?? null,
    validationTenant,
    validationProject: r.string('SVC_VALIDATION_PROJECT', 'provider-validation'),
    validationTimeoutMs: r.int('SVC_VALIDATION_TIMEOUT_MS', 120_000, { min: 1000 }),
  };
}

const QUANTITY = /^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti)?$/;

/** Kubernetes resource quantities by resource name; an empty value leaves the resource out. */
function quantities(
  r: EnvReader,
  entries: Record<string, [variable: string, fallback: string]>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [resource, [variable, fallback]] of Object.entries(entries)) {
    const value = r.string(variable, fallback);
    if (value === '' || value === 'none') continue;
    if (!QUANTITY.test(value)) r.fail(`${variable} must be a quantity such as 500m, 512Mi or 2Gi`);
    out[resource] = value;
  }
  return out;
}

/** Settings the Kubernetes edges cannot work without. */
function checkKubernetes(r: EnvReader, config: ManagerConfig): void {
  const usesKubernetes =
    config.launcher.kind === 'kubernetes' || config.secretStore.kind === 'kubernetes';
  // Runner pods mount the profile, tool and session objects, which live in svc-v01 (spec/2).
  if (usesKubernetes && config.launcher.namespace !== SECRET_NAMESPACE)
    r.fail(
      `SVC_NAMESPACE must be ${SECRET_NAMESPACE} with the Kubernetes launcher or Secret store`,
    );
  if (config.launcher.kind === 'kubernetes' && !config.publicUrl)
    r.fail('SVC_MANAGER_PUBLIC_URL is required with SVC_LAUNCHER=kubernetes (the URL pods use)');
  if (!/^[1-9][0-9]*(Mi|Gi|Ti)$/.test(config.kubernetes.sessionStorageSize))
    r.fail('SVC_SESSION_STORAGE_SIZE must be a quantity such as 1Gi or 512Mi');
  if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(config.kubernetes.sessionStorageClass))
    r.fail('SVC_SESSION_STORAGE_CLASS must be a storage class name');
}

/** The checkout's commit, read from .git without spawning git (absent in images). */
function gitCommit(): string | null {
  try {
    const head = readFileSync('.git/HEAD', 'utf8').trim();
    if (!head.startsWith('ref: ')) return head;
    return readFileSync(`.git/${head.slice(5)}`, 'utf8').trim();
  } catch {
    return null;
  }
}
