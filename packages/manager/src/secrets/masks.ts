import {
  BUILTIN_PROFILES,
  PROVIDER_SECRET_PREFIX,
  TOOL_SECRET_PREFIX,
  connectionStringPassword,
  type Redactor,
} from '@svc/contracts';
import type { ManagerConfig } from '../config.js';
import type { Logger } from '../logging.js';
import type { SecretStore } from './store.js';

/**
 * Which values the manager masks, by source: each controlled Secret (`secret:<name>`), the API
 * keys and the store password. A source is registered again whenever its values are read or
 * written successfully, and unregistered when the Secret is deleted.
 */

/** Keys of a provider Secret that are configuration, not credentials (the config route serves them). */
const NOT_SECRET_KEYS = new Set(['config.toml', 'model-catalog.json']);

export const secretSource = (name: string) => `secret:${name}`;

/** Words of this deployment that are never secrets: tenant ids, profile names, the service id. */
export function newManagerRedactor(redactor: Redactor, config: ManagerConfig): Redactor {
  return redactor
    .ignore([...config.tenants, ...BUILTIN_PROFILES, config.serviceId])
    .register('config:api-keys', [...config.apiKeys])
    .register('config:store-password', [
      config.store.kind === 'postgres' ? connectionStringPassword(config.store.url) : undefined,
    ]);
}

/** The values of a Secret worth masking: every value, or the strings inside a JSON value. */
export function secretValues(name: string, data: Record<string, Buffer>): string[] {
  const values: string[] = [];
  const provider = name.startsWith(PROVIDER_SECRET_PREFIX);
  for (const [key, buffer] of Object.entries(data)) {
    if (provider && NOT_SECRET_KEYS.has(key)) continue;
    const text = buffer.toString('utf8').trim();
    // A JSON document's secrets are its string leaves (found wherever they are copied); the
    // whole text is registered only when it does not parse.
    const leaves = key.endsWith('.json') ? jsonStrings(text) : null;
    values.push(...(leaves ?? [text]));
  }
  return values;
}

/** String leaves of a JSON document; `auth_mode` names a login kind ("apikey"), not a secret. */
function jsonStrings(text: string): string[] | null {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return null;
  }
  const out: string[] = [];
  const stack: unknown[] = [doc];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value === 'string') out.push(value);
    else if (Array.isArray(value)) stack.push(...(value as unknown[]));
    else if (value && typeof value === 'object')
      for (const [key, child] of Object.entries(value)) if (key !== 'auth_mode') stack.push(child);
  }
  return out;
}

/** Register one Secret's current values (and its profile slug as a common word). */
export function registerSecret(
  redactor: Redactor,
  name: string,
  data: Record<string, Buffer> | null,
): void {
  if (name.startsWith(PROVIDER_SECRET_PREFIX))
    redactor.ignore([name.slice(PROVIDER_SECRET_PREFIX.length)]);
  redactor.register(secretSource(name), data ? secretValues(name, data) : []);
}

/**
 * Load every controlled Secret's values into the redactor: at start before anything is served
 * (a failure stops the start: serving without the masks could leak), then periodically, so a
 * Secret changed by another replica or by an operator is known here too.
 */
export async function loadSecretMasks(
  secrets: SecretStore,
  redactor: Redactor,
  logger: Logger,
): Promise<number> {
  const metas = [
    ...(await secrets.list(PROVIDER_SECRET_PREFIX)),
    ...(await secrets.list(TOOL_SECRET_PREFIX)),
  ];
  const present = new Set<string>();
  for (const meta of metas) {
    const secret = await secrets.get(meta.name);
    registerSecret(redactor, meta.name, secret?.data ?? null);
    present.add(meta.name);
  }
  for (const name of known.get(redactor) ?? [])
    if (!present.has(name)) registerSecret(redactor, name, null);
  known.set(redactor, present);
  logger.debug({ secrets: present.size, maskedValues: redactor.size }, 'secret masks loaded');
  return present.size;
}

/** The Secrets each redactor was loaded from, to forget the ones that disappeared. */
const known = new WeakMap<Redactor, Set<string>>();
