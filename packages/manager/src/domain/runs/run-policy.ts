import {
  APPROVAL_LEVELS,
  NETWORK_LEVELS,
  PROFILE_SLUG_PATTERN,
  PROVIDER_SECRET_PREFIX,
  SANDBOX_LEVELS,
  SECRET_NAMESPACE,
  ServiceError,
  TOOL_SECRET_PREFIX,
  type ExecutionPolicy,
  type ExecutionPolicyInput,
  type RunCreateBody,
  type SecretRef,
  type SecretRefRecord,
  type ToolCredential,
  type ToolCredentialRecord,
} from '@svc/contracts';
import type { PolicyLimits } from '../../config.js';

const PROVIDER_KEYS = ['auth.json', 'config.toml', 'model-catalog.json'];
const RESERVED_PROFILES = ['runtime-default'];
const SLUG = new RegExp(PROFILE_SLUG_PATTERN);
/** Where volume projections may land: the runner user's home (spec/3, tool credential entry). */
export const RUNNER_HOME = '/home/runner';
export const PLATFORM_SSH_TOKEN_KEY = 'PLATFORM_SSH_CLIENT_TOKEN';

/** backendProfile, or its business alias providerProfile; both given must agree. */
export function resolveProfile(
  body: Pick<RunCreateBody, 'backendProfile' | 'providerProfile'>,
): string {
  const { backendProfile, providerProfile } = body;
  if (backendProfile && providerProfile && backendProfile !== providerProfile) {
    throw new ServiceError(
      'schema-invalid',
      'backendProfile and providerProfile disagree; send one of them',
    );
  }
  const profile = backendProfile ?? providerProfile;
  if (!profile) throw new ServiceError('schema-invalid', 'backendProfile is required');
  checkProfileSlug(profile);
  return profile;
}

export function checkProfileSlug(profile: string): void {
  if (!SLUG.test(profile)) {
    throw new ServiceError('schema-invalid', `backendProfile must match ${PROFILE_SLUG_PATTERN}`, {
      field: 'backendProfile',
    });
  }
  if (RESERVED_PROFILES.includes(profile)) {
    throw new ServiceError(
      'schema-invalid',
      `backendProfile ${profile} is reserved and cannot be used`,
      { field: 'backendProfile' },
    );
  }
}

const PROJECT_KEYS = /^(project[_-]?id|tenant[_-]?id)$/i;

/**
 * projectId is the tenant's policy boundary. Business project or workspace ids belong in
 * metadata (labProjectId, labWorkspaceId) or workspaceRef; a metadata or workspace field that
 * restates projectId or tenantId with another value is an attempt to override it.
 */
export function checkProjectBoundary(body: RunCreateBody, tenants: readonly string[]): void {
  if (!tenants.includes(body.tenantId)) {
    throw new ServiceError(
      'tenant-policy-denied',
      `tenant ${body.tenantId} is not in the allowlist`,
      { field: 'tenantId' },
    );
  }
  const sources: Array<[string, Record<string, unknown> | undefined]> = [
    ['metadata', body.metadata],
    ['workspaceRef', body.workspaceRef],
  ];
  for (const [where, object] of sources) {
    for (const [key, value] of Object.entries(object ?? {})) {
      if (!PROJECT_KEYS.test(key)) continue;
      const boundary = /tenant/i.test(key) ? body.tenantId : body.projectId;
      if (value !== boundary) {
        throw new ServiceError(
          'tenant-policy-denied',
          `${where}.${key} would override the run's ${/tenant/i.test(key) ? 'tenantId' : 'projectId'}; put business ids in metadata.labProjectId or metadata.labWorkspaceId`,
          { field: `${where}.${key}` },
        );
      }
    }
  }
}

const rank = <T extends string>(levels: readonly T[], value: T) => levels.indexOf(value);

/**
 * Complete a run's execution policy with explicit defaults and refuse anything wider than the
 * configured ceiling. The result names which fields were defaulted.
 */
export function completeExecutionPolicy(
  input: ExecutionPolicyInput | undefined,
  profile: string,
  limits: PolicyLimits,
): ExecutionPolicy {
  const given = input ?? {};
  const defaultsApplied: string[] = [];
  const pick = <K extends 'sandbox' | 'approval' | 'network' | 'timeoutMs'>(
    key: K,
    fallback: NonNullable<ExecutionPolicyInput[K]>,
  ) => {
    const value = given[key];
    if (value === undefined) {
      defaultsApplied.push(key);
      return fallback;
    }
    return value as NonNullable<ExecutionPolicyInput[K]>;
  };
  const sandbox = pick('sandbox', limits.defaultSandbox);
  const approval = pick('approval', limits.defaultApproval);
  const network = pick('network', limits.defaultNetwork);
  const timeoutMs = pick('timeoutMs', limits.defaultTimeoutMs);

  const wider: string[] = [];
  if (rank(SANDBOX_LEVELS, sandbox) > rank(SANDBOX_LEVELS, limits.maxSandbox))
    wider.push(`sandbox ${sandbox} > ${limits.maxSandbox}`);
  if (rank(APPROVAL_LEVELS, approval) > rank(APPROVAL_LEVELS, limits.maxApproval))
    wider.push(`approval ${approval} > ${limits.maxApproval}`);
  if (rank(NETWORK_LEVELS, network) > rank(NETWORK_LEVELS, limits.maxNetwork))
    wider.push(`network ${network} > ${limits.maxNetwork}`);
  if (timeoutMs > limits.maxTimeoutMs)
    wider.push(`timeoutMs ${timeoutMs} > ${limits.maxTimeoutMs}`);
  if (sandbox === 'danger-full-access' && network === 'disabled') {
    throw new ServiceError(
      'schema-invalid',
      'sandbox danger-full-access cannot restrict the network; set network to enabled or choose workspace-write',
      {
        field: 'executionPolicy.network',
      },
    );
  }

  const scope = given.secretScope ?? {};
  if (!scope.providerCredentials) defaultsApplied.push('secretScope.providerCredentials');
  const providerCredentials = completeProviderCredentials(scope.providerCredentials, profile);
  const toolCredentials = (scope.toolCredentials ?? []).map((entry, i) =>
    completeToolCredential(entry, i, limits),
  );
  if (!scope.toolCredentials) defaultsApplied.push('secretScope.toolCredentials');

  if (wider.length > 0) {
    throw new ServiceError(
      'tenant-policy-denied',
      `executionPolicy is wider than allowed: ${wider.join(', ')}`,
      {
        field: 'executionPolicy',
        ceiling: {
          sandbox: limits.maxSandbox,
          approval: limits.maxApproval,
          network: limits.maxNetwork,
          timeoutMs: limits.maxTimeoutMs,
        },
      },
    );
  }
  return {
    sandbox,
    approval,
    network,
    timeoutMs,
    timeoutKind: 'idle',
    secretScope: { providerCredentials, toolCredentials },
    defaultsApplied,
  };
}

/** Keys a profile's Secret must hold before the profile counts as configured. */
export function requiredProfileKeys(profile: string): string[] {
  return profile === 'builtin-d'
    ? ['auth.json', 'config.toml', 'model-catalog.json']
    : ['auth.json', 'config.toml'];
}

export function providerSecretName(profile: string): string {
  return `${PROVIDER_SECRET_PREFIX}${profile}`;
}

function completeProviderCredentials(
  given: Array<{ profile: string; secretRef?: SecretRef }> | undefined,
  profile: string,
): ExecutionPolicy['secretScope']['providerCredentials'] {
  const entries = given ?? [{ profile }];
  const others = entries.filter((e) => e.profile !== profile);
  if (others.length > 0) {
    throw new ServiceError(
      'tenant-policy-denied',
      `secretScope.providerCredentials may only name the run's profile ${profile} (got ${others.map((o) => o.profile).join(', ')})`,
      {
        field: 'executionPolicy.secretScope.providerCredentials',
      },
    );
  }
  const own = entries.filter((e) => e.profile === profile);
  if (own.length !== 1) {
    throw new ServiceError(
      'schema-invalid',
      `secretScope.providerCredentials must hold exactly one entry for profile ${profile}`,
      {
        field: 'executionPolicy.secretScope.providerCredentials',
      },
    );
  }
  const ref = own[0]?.secretRef;
  const expectedName = providerSecretName(profile);
  if (ref && ref.name !== expectedName) {
    throw new ServiceError(
      'tenant-policy-denied',
      `the provider credential of ${profile} is the Secret ${expectedName}; other Secret names are refused`,
      {
        field: 'executionPolicy.secretScope.providerCredentials[0].secretRef.name',
      },
    );
  }
  checkNamespace(
    ref?.namespace,
    'executionPolicy.secretScope.providerCredentials[0].secretRef.namespace',
  );
  const keys = ref?.keys ?? requiredProfileKeys(profile);
  const foreign = keys.filter((k) => !PROVIDER_KEYS.includes(k));
  if (foreign.length > 0) {
    throw new ServiceError(
      'schema-invalid',
      `provider Secret keys must be among ${PROVIDER_KEYS.join(', ')} (got ${foreign.join(', ')})`,
    );
  }
  return [{ profile, secretRef: secretRefRecord(SECRET_NAMESPACE, expectedName, keys) }];
}

function checkNamespace(namespace: string | undefined, field: string): void {
  if (namespace !== undefined && namespace !== SECRET_NAMESPACE) {
    throw new ServiceError(
      'tenant-policy-denied',
      `Secrets live only in namespace ${SECRET_NAMESPACE}`,
      { field },
    );
  }
}

export function secretRefRecord(namespace: string, name: string, keys: string[]): SecretRefRecord {
  return { namespace, name, keys: [...new Set(keys)], valuesPrinted: false };
}

function completeToolCredential(
  entry: ToolCredential,
  index: number,
  limits: PolicyLimits,
): ToolCredentialRecord {
  const field = `executionPolicy.secretScope.toolCredentials[${index}]`;
  if (!limits.allowedTools.includes(entry.tool)) {
    throw new ServiceError(
      'tenant-policy-denied',
      `tool ${entry.tool} is not allowed by the policy (allowed: ${limits.allowedTools.join(', ') || 'none'})`,
      { field },
    );
  }
  const { secretRef, projection } = entry;
  if (
    !secretRef.name.startsWith(TOOL_SECRET_PREFIX) ||
    !SLUG.test(secretRef.name.slice(TOOL_SECRET_PREFIX.length))
  ) {
    throw new ServiceError(
      'tenant-policy-denied',
      `tool credentials are Secrets named ${TOOL_SECRET_PREFIX}<name>`,
      { field: `${field}.secretRef.name` },
    );
  }
  checkNamespace(secretRef.namespace, `${field}.secretRef.namespace`);
  const keys = secretRef.keys ?? [];
  if (keys.length === 0)
    throw new ServiceError('schema-invalid', `${field}.secretRef.keys must name at least one key`);
  if (entry.tool === 'platform-ssh') {
    if (
      keys.length !== 1 ||
      keys[0] !== PLATFORM_SSH_TOKEN_KEY ||
      projection.kind !== 'env' ||
      projection.envName !== PLATFORM_SSH_TOKEN_KEY
    ) {
      throw new ServiceError(
        'schema-invalid',
        `tool platform-ssh projects only key ${PLATFORM_SSH_TOKEN_KEY} to the same-named environment variable`,
        { field },
      );
    }
  }
  if (projection.kind === 'volume')
    checkVolumeMountPath(projection.mountPath, `${field}.projection.mountPath`);
  return {
    tool: entry.tool,
    purpose: entry.purpose,
    secretRef: secretRefRecord(SECRET_NAMESPACE, secretRef.name, keys),
    projection,
    valuesPrinted: false,
  };
}

export function checkVolumeMountPath(mountPath: string, field: string): void {
  const parts = mountPath.split('/');
  if (!mountPath.startsWith(`${RUNNER_HOME}/`) || parts.includes('..') || parts.includes('.')) {
    throw new ServiceError(
      'schema-invalid',
      `volume projections mount under ${RUNNER_HOME}/ with no '..' (got ${mountPath})`,
      { field },
    );
  }
}
