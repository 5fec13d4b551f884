import { isServiceError, SECRET_NAMESPACE, ServiceError } from '@svc/contracts';
import type { ProfileSettings } from '../../config.js';
import { checkProfileSlug, providerSecretName } from '../runs/run-policy.js';

/**
 * The rules a provider profile's Secret must satisfy before the manager writes it (spec/2,
 * "Built-in profiles", "Dynamic profiles", provider profile rules 4 and 7). Each refusal is a
 * ServiceError naming the field, never echoing a value the caller sent.
 */

export const BUILTIN_D_CONTEXT_WINDOW = 1_000_000;
export const BUILTIN_D_AUTO_COMPACT_LIMIT = 900_000;
/** Relative to the agent home; the runner rewrites it to the absolute agent-home path. */
export const CATALOG_FILE = 'model-catalog.json';

export type Toml = Record<string, unknown>;

/** Slug pattern and reserved names (`runtime-default`): the same check runs use. */
export function assertManageableProfile(profile: string): void {
  try {
    checkProfileSlug(profile);
  } catch (error) {
    if (!isServiceError(error)) throw error;
    throw new ServiceError(error.failureKind, error.message.replace(/^backendProfile/, 'profile'), {
      field: 'profile',
    });
  }
}

/** A caller may say which Secret it means; only the profile's own controlled Secret is allowed. */
export function assertExpectedSecretRef(
  profile: string,
  ref: { namespace?: string; name?: string } | undefined,
): void {
  if (!ref) return;
  if (ref.namespace !== undefined && ref.namespace !== SECRET_NAMESPACE) {
    throw new ServiceError(
      'tenant-policy-denied',
      `provider profile Secrets live only in namespace ${SECRET_NAMESPACE}`,
      { field: 'secretRef.namespace' },
    );
  }
  const expected = providerSecretName(profile);
  if (ref.name !== undefined && ref.name !== expected) {
    throw new ServiceError(
      'tenant-policy-denied',
      `the Secret of profile ${profile} is always ${expected}; other Secret names are refused`,
      { field: 'secretRef.name' },
    );
  }
}

const LOOPBACK = /^(127(?:\.\d{1,3}){3}|localhost|\[::1\])$/i;
const trimSlash = (url: string) => url.replace(/\/+$/, '');

/**
 * A provider base URL: http(s), no credentials, query or fragment. builtin-b accepts only the
 * configured bridge; builtin-d the bridge or a wrapper-local bridge on loopback. The refused
 * URL is never echoed: it came from the caller and may hold anything.
 */
export function checkBaseUrl(
  profile: string,
  raw: string,
  settings: ProfileSettings,
  field: string,
): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalidUrl(field, `${field} is not a valid URL`, 'unparseable');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw invalidUrl(field, `${field} must be an http or https URL`, 'scheme');
  if (url.username || url.password)
    throw invalidUrl(
      field,
      `${field} must not carry credentials; the API key goes to auth.json`,
      'credentials-in-url',
    );
  if (url.search || url.hash)
    throw invalidUrl(field, `${field} must not have a query or fragment`, 'query');
  const normalized = trimSlash(raw);
  const bridge = settings.bridgeBaseUrl ? trimSlash(settings.bridgeBaseUrl) : null;
  if (profile === 'builtin-b') {
    if (!bridge) throw bridgeMissing(profile);
    if (normalized !== bridge) {
      throw invalidUrl(
        field,
        `builtin-b routes only to the internal bridge ${bridge}; another gateway is refused`,
        'not-the-bridge',
      );
    }
  }
  if (profile === 'builtin-d' && normalized !== bridge) {
    const local = LOOPBACK.test(url.hostname) && trimSlash(url.pathname).endsWith('/v1');
    if (!local) {
      throw invalidUrl(
        field,
        `builtin-d routes only to the internal bridge${bridge ? ` ${bridge}` : ''} or a wrapper-local bridge on loopback ending in /v1`,
        'not-the-bridge',
      );
    }
  }
  return normalized;
}

function invalidUrl(field: string, message: string, reason: string): ServiceError {
  return new ServiceError('schema-invalid', message, { field, reason });
}

function bridgeMissing(profile: string): ServiceError {
  return new ServiceError(
    'infra-failed',
    `${profile} needs the internal bridge, but SVC_BRIDGE_BASE_URL is not configured on this manager`,
    { reason: 'bridge-not-configured' },
  );
}

/** builtin-d's only model. */
export function flashModel(settings: ProfileSettings): string {
  if (!settings.flashModelId) {
    throw new ServiceError(
      'infra-failed',
      'builtin-d needs its fixed model, but SVC_FLASH_MODEL_ID is not configured on this manager',
      { reason: 'flash-model-not-configured' },
    );
  }
  return settings.flashModelId;
}

const CREDENTIAL_HEADER = /auth|key|token|secret|cookie/i;

/** Paths of credential-like values inside a config (they belong in auth.json). */
export function inlineCredentialFields(doc: Toml): string[] {
  const found: string[] = [];
  const providers = asTable(doc['model_providers']);
  for (const [id, value] of Object.entries(providers ?? {})) {
    const provider = asTable(value);
    if (!provider) continue;
    if (provider['experimental_bearer_token'] !== undefined)
      found.push(`model_providers.${id}.experimental_bearer_token`);
    for (const name of Object.keys(asTable(provider['http_headers']) ?? {}))
      if (CREDENTIAL_HEADER.test(name)) found.push(`model_providers.${id}.http_headers.${name}`);
  }
  return found;
}

/**
 * Check a whole config against the profile's rules and complete builtin-d's fixed settings
 * where they are absent. Returns the (possibly completed) document.
 */
export function applyProfileRules(profile: string, source: Toml, settings: ProfileSettings): Toml {
  const doc = structuredClone(source);
  if (typeof doc['model'] !== 'string' || doc['model'].trim() === '')
    throw configInvalid('model', 'config.toml must set model');
  const providerId = typeof doc['model_provider'] === 'string' ? doc['model_provider'] : 'openai';
  const provider = asTable(asTable(doc['model_providers'])?.[providerId]);
  const pinned = profile === 'builtin-b' || profile === 'builtin-d';
  if (pinned && !provider) {
    throw configInvalid(
      'model_provider',
      `${profile} must select a [model_providers.<id>] table whose base_url is the internal bridge`,
    );
  }
  if (provider) {
    const field = `model_providers.${providerId}.base_url`;
    if (typeof provider['base_url'] !== 'string')
      throw configInvalid(field, `config.toml must set ${field}`);
    checkBaseUrl(profile, provider['base_url'], settings, field);
    if (provider['wire_api'] !== undefined && provider['wire_api'] !== 'responses')
      throw configInvalid(
        `model_providers.${providerId}.wire_api`,
        'wire_api must be "responses" (the agent refuses "chat")',
      );
  }
  if (profile === 'builtin-d') completeBuiltinD(doc, settings);
  return doc;
}

function completeBuiltinD(doc: Toml, settings: ProfileSettings): void {
  const model = flashModel(settings);
  if (doc['model'] !== model)
    throw configInvalid('model', `builtin-d runs only the model ${model}; it is never overridden`);
  fixed(doc, 'model_context_window', BUILTIN_D_CONTEXT_WINDOW);
  fixed(doc, 'model_auto_compact_token_limit', BUILTIN_D_AUTO_COMPACT_LIMIT);
  const catalog = doc['model_catalog_json'];
  if (catalog !== undefined && (typeof catalog !== 'string' || !catalog.endsWith(CATALOG_FILE))) {
    throw configInvalid(
      'model_catalog_json',
      `builtin-d's model_catalog_json must point at the profile's ${CATALOG_FILE} in the agent home`,
    );
  }
  doc['model_catalog_json'] = CATALOG_FILE;
}

function fixed(doc: Toml, key: string, value: number): void {
  const given = doc[key];
  if (given === undefined) doc[key] = value;
  else if (Number(given) !== value)
    throw configInvalid(key, `builtin-d declares ${key} = ${value}; other values are refused`);
}

export function configInvalid(field: string, message: string): ServiceError {
  return new ServiceError('schema-invalid', message, { field: `configToml.${field}` });
}

export function asTable(value: unknown): Toml | null {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Toml)
    : null;
}
