import {
  payloadHash,
  ServiceError,
  sha256Hex,
  TRANSIENT_ENV_MAX_VALUE_BYTES,
  type TransientEnvSummary,
} from '@svc/contracts';

export interface EnvEntry {
  name: string;
  value: string;
}

/**
 * What `transientEnv` may never carry: provider credentials, code-host tokens, the platform
 * SSH client token and long-lived SSH keys. Names are refused outright; values are also checked
 * for well-known credential shapes, since a name is easy to change.
 */
const FORBIDDEN_NAMES =
  /^(OPENAI_API_KEY|SVC_PROVIDER_API_KEY|ANTHROPIC_API_KEY|AZURE_OPENAI_API_KEY|CODEX_API_KEY|.*_PROVIDER_.*KEY|CODEHOST_TOKEN|CODEHOST_CLI_TOKEN|GH_TOKEN|GITHUB_TOKEN|GH_ENTERPRISE_TOKEN|GITLAB_TOKEN|PLATFORM_SSH_CLIENT_TOKEN|SSH_PRIVATE_KEY|SSH_KEY|.*_SSH_KEY|GIT_SSH_KEY|SVC_API_KEY)$/;
const FORBIDDEN_VALUES: Array<[RegExp, string]> = [
  [/-----BEGIN [A-Z ]*PRIVATE KEY-----/, 'a private key'],
  [/\b(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp\d+) AAAA/, 'an SSH key'],
  [/\b(ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}/, 'a code-host token'],
  [/\bgithub_pat_[A-Za-z0-9_]{20,}/, 'a code-host token'],
  [/\bglpat-[A-Za-z0-9_-]{20,}/, 'a code-host token'],
  [/\bsk-(proj-|ant-)?[A-Za-z0-9_-]{20,}/, 'a provider API key'],
];
const PLATFORM_ENDPOINTS = [
  'PLATFORM_MAIN_SERVER_IP',
  'PLATFORM_MAIN_SERVER_HOST',
  'PLATFORM_FRONTEND_URL',
];

/** Validate entries; never echo a value in an error. */
export function checkTransientEnv(entries: readonly EnvEntry[]): void {
  const seen = new Set<string>();
  entries.forEach((entry, i) => {
    const field = `transientEnv[${i}]`;
    if (seen.has(entry.name))
      throw new ServiceError('schema-invalid', `${field}.name ${entry.name} appears twice`, {
        field,
      });
    seen.add(entry.name);
    if (Buffer.byteLength(entry.value) > TRANSIENT_ENV_MAX_VALUE_BYTES) {
      throw new ServiceError(
        'schema-invalid',
        `${field} (${entry.name}) value exceeds ${TRANSIENT_ENV_MAX_VALUE_BYTES} bytes`,
        { field },
      );
    }
    if (entry.value.includes('\u0000'))
      throw new ServiceError('schema-invalid', `${field} (${entry.name}) value holds U+0000`, {
        field,
      });
    if (FORBIDDEN_NAMES.test(entry.name)) {
      throw new ServiceError(
        'schema-invalid',
        `${field}: ${entry.name} is a credential; transientEnv carries only short-lived lab context (credentials travel as SecretRefs)`,
        { field },
      );
    }
    for (const [pattern, what] of FORBIDDEN_VALUES) {
      if (pattern.test(entry.value)) {
        throw new ServiceError(
          'schema-invalid',
          `${field} (${entry.name}) looks like ${what}; transientEnv must not carry credentials`,
          { field },
        );
      }
    }
  });
}

/**
 * A run that requests the `platform-ssh` tool needs an endpoint in the job environment:
 * from transientEnv, or from the manager's controlled non-secret defaults. Returns the names
 * of defaults added.
 */
export function platformEndpointDefaults(
  entries: readonly EnvEntry[],
  tools: ReadonlyArray<{ tool: string }>,
  defaults: Readonly<Record<string, string>>,
): EnvEntry[] {
  if (!tools.some((t) => t.tool === 'platform-ssh')) return [];
  if (entries.some((e) => PLATFORM_ENDPOINTS.includes(e.name))) return [];
  const added = PLATFORM_ENDPOINTS.filter((name) => defaults[name]).map((name) => ({
    name,
    value: defaults[name]!,
  }));
  if (added.length === 0) {
    throw new ServiceError(
      'schema-invalid',
      `tool platform-ssh needs one of ${PLATFORM_ENDPOINTS.join(', ')} in transientEnv (no manager default is configured)`,
      {
        field: 'transientEnv',
      },
    );
  }
  return added;
}

/** Only value hashes enter the payload hash and the summary. */
export function hashedEntries(
  entries: readonly EnvEntry[],
): Array<{ name: string; valueSha256: string }> {
  return entries.map((e) => ({ name: e.name, valueSha256: sha256Hex(e.value) }));
}

export function transientEnvSummary(
  entries: readonly EnvEntry[],
  defaultsAdded: readonly EnvEntry[],
  secretRef: TransientEnvSummary['secretRef'],
): TransientEnvSummary {
  const all = [...entries, ...defaultsAdded];
  return {
    names: all.map((e) => e.name),
    count: all.length,
    hash: payloadHash(hashedEntries(all)),
    defaultsAdded: defaultsAdded.map((e) => e.name),
    secretRef,
    valuesPrinted: false,
  };
}
