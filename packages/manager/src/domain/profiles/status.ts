import {
  BUILTIN_PROFILES,
  PROFILE_SLUG_PATTERN,
  PROVIDER_SECRET_PREFIX,
  SECRET_NAMESPACE,
  ServiceError,
  type ProfileStatus,
} from '@svc/contracts';
import type { SecretMeta, SecretStore } from '../../secrets/store.js';
import type { Ctx } from '../context.js';
import { providerSecretName, requiredProfileKeys, secretRefRecord } from '../runs/run-policy.js';
import { hashSalt, secretSuffixes } from './hashing.js';
import { profileSecretMeta, readProfileSecret } from './secret-io.js';
import { observeValidation } from './validation-outcome.js';
import { latestValidation, toLastValidation } from './validation-records.js';

export const isBuiltin = (profile: string) =>
  (BUILTIN_PROFILES as readonly string[]).includes(profile);

const SLUG = new RegExp(PROFILE_SLUG_PATTERN);
const RESERVED = ['runtime-default'];

export { requiredProfileKeys };

export function missingKeys(profile: string, meta: Pick<SecretMeta, 'keys'> | null): string[] {
  const present = new Set(meta?.keys ?? []);
  return requiredProfileKeys(profile).filter((k) => !present.has(k));
}

/**
 * The one gate of profile use: a new run (and a validation canary, which is a run) needs a
 * configured profile. There is no fallback to another profile.
 */
export async function assertProfileUsable(secrets: SecretStore, profile: string): Promise<void> {
  const name = providerSecretName(profile);
  const secret = await secrets.meta(name);
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

/**
 * Profiles that exist: built-ins always, dynamic ones while a controlled Secret exists. A
 * Secret under the prefix whose slug is invalid or reserved names no profile.
 */
export async function knownProfiles(
  secrets: SecretStore,
): Promise<
  Array<{ profile: string; builtin: boolean; configured: boolean; meta: SecretMeta | null }>
> {
  const metas = await secrets.list(PROVIDER_SECRET_PREFIX);
  const byProfile = new Map(
    metas
      .map((m) => [m.name.slice(PROVIDER_SECRET_PREFIX.length), m] as const)
      .filter(([slug, m]) => m.namespace === SECRET_NAMESPACE && isProfileSlug(slug)),
  );
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

function isProfileSlug(slug: string): boolean {
  return SLUG.test(slug) && !RESERVED.includes(slug);
}

/** The redacted status of one profile: names, versions and hash suffixes, never values. */
export async function profileStatus(
  ctx: Ctx,
  secrets: SecretStore,
  profile: string,
): Promise<ProfileStatus> {
  const name = providerSecretName(profile);
  // Configured means what the run gate sees (the store's listing); values only for suffixes.
  const [meta, salt, last] = await Promise.all([
    profileSecretMeta(ctx, secrets, profile),
    hashSalt(ctx.db),
    latestValidation(ctx.db, profile),
  ]);
  const secret = meta ? await readProfileSecret(ctx, secrets, profile) : null;
  const missing = missingKeys(profile, meta);
  const configured = meta !== null && missing.length === 0;
  const observed = last ? (await observeValidation(ctx, last)).row : null;
  return {
    profile,
    builtin: isBuiltin(profile),
    backendKind: 'codex-app-server',
    configured,
    failureKind: configured ? null : 'secret-unavailable',
    message: configured
      ? null
      : meta
        ? `Secret ${name} lacks ${missing.join(', ')}`
        : `Secret ${name} does not exist`,
    missingKeys: missing,
    secretRef: secretRefRecord(SECRET_NAMESPACE, name, requiredProfileKeys(profile)),
    resourceVersion: meta?.resourceVersion ?? null,
    ...secretSuffixes(salt, secret?.data ?? null),
    updatedAt: meta?.updatedAt ?? null,
    lastValidation: observed ? toLastValidation(observed) : null,
    valuesPrinted: false,
  };
}

export async function listProfileStatuses(
  ctx: Ctx,
  secrets: SecretStore,
): Promise<ProfileStatus[]> {
  const known = await knownProfiles(secrets);
  return Promise.all(known.map(({ profile }) => profileStatus(ctx, secrets, profile)));
}
