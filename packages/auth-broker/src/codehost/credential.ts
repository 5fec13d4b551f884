import { readFile } from 'node:fs/promises';
import { basename, isAbsolute, resolve } from 'node:path';
import { sha256Hex, type Env, type Redactor } from '@svc/contracts';
import { BrokerError } from '../errors.js';

/**
 * The broker-held credential is known only by reference: `file:<path>` (a mounted Secret file)
 * or `env:<NAME>`. The value is read when a request needs it, so a rotated Secret file is
 * picked up without a restart, and is registered with the redactor the moment it is read.
 */
export interface CredentialRef {
  scheme: 'file' | 'env';
  /** Absolute file path, or environment variable name. */
  target: string;
  /** `<scheme>:<name>#<sha256 prefix of the reference>`: stable, and never derived from the value. */
  display: string;
}

/** p0 holds one static token; later kinds (app installations) would be added here. */
export type CredentialKind = 'static-token' | 'none';

/** The runner's own token variables: a broker reading them would recreate what it replaces. */
export const RUNNER_TOKEN_VARIABLES = ['CODEHOST_CLI_TOKEN', 'CODEHOST_TOKEN'] as const;

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
const DISPLAY_HASH_CHARS = 12;

/** Parse a reference; returns a problem string instead when it is unusable. */
export function parseCredentialRef(raw: string): CredentialRef | string {
  const colon = raw.indexOf(':');
  const scheme = colon > 0 ? raw.slice(0, colon) : '';
  const rest = colon > 0 ? raw.slice(colon + 1).trim() : '';
  if (scheme === 'env') {
    if (!ENV_NAME.test(rest)) return 'env:<NAME> needs a valid environment variable name';
    if ((RUNNER_TOKEN_VARIABLES as readonly string[]).includes(rest))
      return `must not name the runner token variable ${rest}; give the broker its own`;
    return { scheme, target: rest, display: displayRef('env', rest, `env:${rest}`) };
  }
  if (scheme === 'file') {
    if (rest === '') return 'file:<path> needs a path';
    const path = isAbsolute(rest) ? rest : resolve(rest);
    return { scheme, target: path, display: displayRef('file', basename(path), `file:${path}`) };
  }
  return 'must be file:<path> or env:<NAME>';
}

function displayRef(scheme: string, name: string, reference: string): string {
  return `${scheme}:${name}#${sha256Hex(reference).slice(0, DISPLAY_HASH_CHARS)}`;
}

export interface CredentialSource {
  readonly configured: boolean;
  readonly kind: CredentialKind;
  /** Redacted reference, or `none`. */
  readonly display: string;
  /** The value, or a BrokerError `auth-not-configured`. */
  resolve(): Promise<string>;
  /** Presence check for health: true when a value is available, without returning it. */
  available(): Promise<boolean>;
}

/** With `enabled` false (the operator switch) the reference is shown but never read. */
export function createCredentialSource(
  ref: CredentialRef | null,
  enabled: boolean,
  env: Env,
  redactor: Redactor,
): CredentialSource {
  if (!ref || !enabled) {
    return {
      configured: false,
      kind: 'none',
      display: ref?.display ?? 'none',
      resolve: () =>
        Promise.reject(
          new BrokerError('auth-not-configured', 'no code-host credential reference configured', {
            degradedReason: 'credential-ref-missing',
          }),
        ),
      available: () => Promise.resolve(false),
    };
  }
  const read = async (): Promise<string | undefined> => {
    let value: string | undefined;
    if (ref.scheme === 'env') value = env[ref.target];
    else value = await readFile(ref.target, 'utf8').catch(() => undefined);
    value = value?.trim();
    if (!value) return undefined;
    redactor.add(value);
    return value;
  };
  return {
    configured: true,
    kind: 'static-token',
    display: ref.display,
    async resolve() {
      const value = await read();
      if (value === undefined)
        throw new BrokerError(
          'auth-not-configured',
          `the credential ${ref.display} is configured but has no value`,
          { degradedReason: 'credential-unreadable' },
        );
      return value;
    },
    async available() {
      return (await read()) !== undefined;
    },
  };
}
