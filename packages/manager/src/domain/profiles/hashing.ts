import { createHash, randomBytes } from 'node:crypto';
import type { Db } from '../../store/db.js';

/**
 * Irreversible hash suffixes. A suffix identifies a value (did the key change? is this the
 * config I wrote?) without revealing it: SHA-256 over a deployment-wide random salt, a purpose
 * label and the value, of which only the last hex characters are shown. The salt lives in the
 * store (one row) so every replica and restart prints the same suffix for the same value;
 * without it a suffix cannot be checked against a guessed key.
 */

const SUFFIX_LENGTH = 12;
const IDENTITY_LENGTH = 24;
const salts = new WeakMap<Db, Promise<string>>();

export type HashPurpose = 'credential' | 'config' | 'catalog' | 'user-id' | 'username';

/** The deployment's salt, created on first use (concurrent first uses agree on one row). */
export function hashSalt(db: Db): Promise<string> {
  let salt = salts.get(db);
  if (!salt) {
    salt = loadSalt(db);
    salts.set(db, salt);
    // A failed read (store down) must not stick: the next call tries again.
    salt.catch(() => salts.delete(db));
  }
  return salt;
}

async function loadSalt(db: Db): Promise<string> {
  await db
    .insertInto('provider_profile_settings')
    .values({ id: 1, hash_salt: randomBytes(32).toString('hex') })
    .onConflict((oc) => oc.column('id').doNothing())
    .execute();
  const row = await db
    .selectFrom('provider_profile_settings')
    .select('hash_salt')
    .where('id', '=', 1)
    .executeTakeFirstOrThrow();
  return row.hash_salt;
}

function saltedDigest(salt: string, purpose: HashPurpose, value: string | Uint8Array): string {
  return createHash('sha256')
    .update(salt)
    .update('\0')
    .update(purpose)
    .update('\0')
    .update(value)
    .digest('hex');
}

/** The short printable suffix of a Secret value. */
export function hashSuffix(salt: string, purpose: HashPurpose, value: string | Uint8Array): string {
  return saltedDigest(salt, purpose, value).slice(-SUFFIX_LENGTH);
}

/** A stable pseudonym for an audit identity (user id, username). */
export function identityHash(salt: string, purpose: HashPurpose, value: string): string {
  return saltedDigest(salt, purpose, value).slice(0, IDENTITY_LENGTH);
}

/**
 * The suffix that tracks the credential: of the API key inside auth.json when it holds one,
 * else of the whole file (an auth.json written by hand in another shape).
 */
export function credentialSuffix(salt: string, authJson: Buffer | undefined): string | null {
  if (!authJson) return null;
  try {
    const parsed = JSON.parse(authJson.toString('utf8')) as Record<string, unknown>;
    const key = parsed['OPENAI_API_KEY'];
    if (typeof key === 'string' && key !== '') return hashSuffix(salt, 'credential', key);
  } catch {
    // not JSON: hash the bytes
  }
  return hashSuffix(salt, 'credential', authJson);
}

export interface SecretSuffixes {
  credentialHashSuffix: string | null;
  configHashSuffix: string | null;
  catalogHashSuffix: string | null;
}

export function secretSuffixes(
  salt: string,
  data: Readonly<Record<string, Buffer>> | null,
): SecretSuffixes {
  const config = data?.['config.toml'];
  const catalog = data?.['model-catalog.json'];
  return {
    credentialHashSuffix: credentialSuffix(salt, data?.['auth.json']),
    configHashSuffix: config ? hashSuffix(salt, 'config', config) : null,
    catalogHashSuffix: catalog ? hashSuffix(salt, 'catalog', catalog) : null,
  };
}
