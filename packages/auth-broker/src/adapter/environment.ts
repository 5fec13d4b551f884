import { sanitizeUrl, type Env } from '@svc/contracts';
import { BrokerError } from '../errors.js';
import type { RUNNER_TOKEN_VARIABLES } from '../codehost/credential.js';

/**
 * What the adapter reads from the runner environment: the broker address, and whether the old
 * token variables exist. Token variables are checked by name only; their values are never read.
 */
export const BROKER_URL_VARIABLES = ['SVC_AUTH_BROKER_URL', 'AUTH_BROKER_URL'] as const;

export interface BrokerAddress {
  /** Scheme, host and port; user info, query and fragment are dropped. */
  origin: string;
  /** Path prefix when the broker sits behind a path-routing proxy ('' otherwise). */
  basePath: string;
  /** For printing. */
  display: string;
  source: (typeof BROKER_URL_VARIABLES)[number];
}

/** The configured broker, null when none is set, or a BrokerError when the value is unusable. */
export function brokerAddress(env: Env): BrokerAddress | null {
  for (const name of BROKER_URL_VARIABLES) {
    const raw = env[name]?.trim();
    if (!raw) continue;
    const display = sanitizeUrl(raw);
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new BrokerError('broker-unavailable', `${name} is not a valid URL`, {
        degradedReason: 'broker-url-invalid',
        next: [`set ${name} to http(s)://<host>:<port> of the broker`],
      });
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new BrokerError('broker-unavailable', `${name} must be an http(s) URL`, {
        degradedReason: 'broker-url-invalid',
        next: [`set ${name} to http(s)://<host>:<port> of the broker`],
      });
    // Collapsed slashes: `//host` as a path would otherwise read as another origin.
    const basePath = url.pathname.replace(/\/{2,}/g, '/').replace(/\/+$/, '');
    return { origin: url.origin, basePath, display, source: name };
  }
  return null;
}

export function endpoint(address: BrokerAddress, path: string): URL {
  return new URL(`${address.basePath}${path}`, address.origin);
}

/** Presence of the runner token variables, by name: a migration diagnostic, never readiness. */
export function tokenPresence(env: Env): {
  runnerEnvTokens: Record<(typeof RUNNER_TOKEN_VARIABLES)[number], { present: boolean }>;
  note: string;
} {
  const present = (name: string) => Object.hasOwn(env, name);
  const runnerEnvTokens = {
    CODEHOST_CLI_TOKEN: { present: present('CODEHOST_CLI_TOKEN') },
    CODEHOST_TOKEN: { present: present('CODEHOST_TOKEN') },
  };
  const any = Object.values(runnerEnvTokens).some((t) => t.present);
  return {
    runnerEnvTokens,
    note: any
      ? 'runner token variables are set; they are not used: remove them once the broker serves this runner'
      : 'no runner token variables are set',
  };
}
