import { BUILTIN_PROFILES, PROVIDER_SECRET_PREFIX, ServiceError } from '@svc/contracts';
import type { SecretMeta, SecretStore } from '../../secrets/store.js';
import { providerSecretName } from '../run-policy.js';

export const isBuiltin = (profile: string) =>
  (BUILTIN_PROFILES as readonly string[]).includes(profile);

/** Keys a profile's Secret must hold before the profile counts as configured. */
export function requiredProfileKeys(profile: string): string[] {
  return profile === 'builtin-d'
    ? ['auth.json', 'config.toml', 'model-catalog.json']
    : ['auth.json', 'config.toml'];
}

export function missingKeys(profile: string, meta: Pick<SecretMeta, 'keys'> | null): string[] {
  const present = new Set(meta?.keys ?? []);
  return requiredProfileKeys(profile).filter((k) => !present.has(k));
}

/** New runs need a configured profile: there is no fallback to another profile. */
export async function assertProfileUsable(secrets: SecretStore, profile: string): Promise<void> {
  const name = providerSecretName(profile);
  const secret = await secrets.list(name).then((all) => all.find((s) => s.name === name) ?? null);
  const missing = missingKeys(profile, secret);
  if (missing.length > 0) {
    throw new ServiceError(
      'secret-unavailable',
      secret
        ? `provider profile ${profile} is not configured: Secret ${name} lacks ${missing.join(', ')}`
        : `provider profile ${profile} is not configured: Secret ${name} does not exist`,
      { profile, secretName: name, missingKeys: missing },
    );
  }
}

/** Profiles that exist: built-ins always, dynamic ones while a controlled Secret exists. */
export async function knownProfiles(
  secrets: SecretStore,
): Promise<
  Array<{ profile: string; builtin: boolean; configured: boolean; meta: SecretMeta | null }>
> {
  const metas = await secrets.list(PROVIDER_SECRET_PREFIX);
  const byProfile = new Map(metas.map((m) => [m.name.slice(PROVIDER_SECRET_PREFIX.length), m]));
  const names = [...new Set([...BUILTIN_PROFILES, ...byProfile.keys()])];
  return names.map((profile) => {
    const meta = byProfile.get(profile) ?? null;
    return {
      profile,
      builtin: isBuiltin(profile),
      configured: meta !== null && missingKeys(profile, meta).length === 0,
      meta,
    };
  });
}
