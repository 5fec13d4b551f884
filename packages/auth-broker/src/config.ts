import { closeSync, openSync } from 'node:fs';
import { resolve } from 'node:path';
import { EnvReader, type Env } from '@svc/contracts';
import { parseCredentialRef, type CredentialRef } from './codehost/credential.js';
import { parseRepo, type RepoRef } from './domain/repos.js';
import {
  FeatureConfigError,
  loadFeatureConfig,
  type FeatureConfig,
} from './features/feature-config.js';
import { parseCidr, type Cidr } from './http/caller-boundary.js';

export interface BrokerConfig {
  host: string;
  port: number;
  codehost: {
    /** False when no reference is set or AUTH_BROKER_CODEHOST_CONFIGURED=false. */
    enabled: boolean;
    credential: CredentialRef | null;
    apiUrl: string;
    timeoutMs: number;
    /** Extra attempts for a read that failed on the network or with a 5xx. */
    retries: number;
  };
  allowedRepos: RepoRef[];
  trustedCidrs: Cidr[];
  /** Names a request's Host may carry besides loopback literals (lower case, no port). */
  allowedHosts: string[];
  /** Absolute path of the JSONL audit file; null writes audit lines to standard output. */
  auditLog: string | null;
  features: FeatureConfig;
  logLevel: string;
}

export const DEFAULT_CODEHOST_API_URL = 'https://api.github.com';
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Parse the broker's environment once. Throws ConfigError listing every problem. */
export function loadConfig(env: Env = process.env): BrokerConfig {
  const r = new EnvReader(env);

  const refText = r.optional('AUTH_BROKER_CODEHOST_CREDENTIAL_REF');
  let credential: CredentialRef | null = null;
  if (refText !== undefined) {
    const parsed = parseCredentialRef(refText);
    if (typeof parsed === 'string') r.fail(`AUTH_BROKER_CODEHOST_CREDENTIAL_REF ${parsed}`);
    else credential = parsed;
  }
  // An operator switch: false disables the code host even with a reference mounted.
  const configuredFlag = r.bool('AUTH_BROKER_CODEHOST_CONFIGURED', refText !== undefined);
  if (configuredFlag && refText === undefined)
    r.fail('AUTH_BROKER_CODEHOST_CONFIGURED=true needs AUTH_BROKER_CODEHOST_CREDENTIAL_REF');

  const allowedRepos: RepoRef[] = [];
  for (const item of r.list('AUTH_BROKER_ALLOWED_REPOS', [])) {
    const repo = parseRepo(item);
    if (repo) allowedRepos.push(repo);
    else r.fail(`AUTH_BROKER_ALLOWED_REPOS: ${JSON.stringify(item)} is not <owner>/<repo>`);
  }

  const trustedCidrs: Cidr[] = [];
  for (const item of r.list('AUTH_BROKER_TRUSTED_CIDRS', [])) {
    const cidr = parseCidr(item);
    if (typeof cidr === 'string') r.fail(`AUTH_BROKER_TRUSTED_CIDRS: ${cidr}`);
    else trustedCidrs.push(cidr);
  }

  const host = r.string('AUTH_BROKER_HOST', '127.0.0.1');
  const allowedHosts: string[] = [];
  for (const item of r.list('AUTH_BROKER_ALLOWED_HOSTS', [])) {
    if (/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i.test(item))
      allowedHosts.push(item.toLowerCase());
    else r.fail(`AUTH_BROKER_ALLOWED_HOSTS: ${JSON.stringify(item)} is not a host name`);
  }
  // A specific listen name or address is the broker's own; a wildcard is no name at all.
  if (!['0.0.0.0', '::', '[::]'].includes(host)) allowedHosts.push(host.toLowerCase());

  const config: BrokerConfig = {
    host,
    port: r.int('AUTH_BROKER_PORT', 8081, { min: 0, max: 65535 }),
    codehost: {
      enabled: configuredFlag && credential !== null,
      credential,
      apiUrl: apiUrl(r),
      timeoutMs: r.int('AUTH_BROKER_UPSTREAM_TIMEOUT_MS', 10_000, { min: 100, max: 120_000 }),
      retries: r.int('AUTH_BROKER_UPSTREAM_RETRIES', 1, { min: 0, max: 5 }),
    },
    allowedRepos,
    trustedCidrs,
    allowedHosts,
    auditLog: auditLog(r),
    features: features(r),
    logLevel: r.oneOf('AUTH_BROKER_LOG_LEVEL', LOG_LEVELS, 'info'),
  };
  r.done();
  return config;
}

function apiUrl(r: EnvReader): string {
  const raw = r.url('AUTH_BROKER_CODEHOST_API_URL', DEFAULT_CODEHOST_API_URL);
  if (raw === undefined) return DEFAULT_CODEHOST_API_URL;
  const url = new URL(raw);
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    r.fail('AUTH_BROKER_CODEHOST_API_URL must be an http(s) URL');
  if (url.username || url.password)
    r.fail('AUTH_BROKER_CODEHOST_API_URL must not carry credentials; use the credential reference');
  if (url.search || url.hash) r.fail('AUTH_BROKER_CODEHOST_API_URL must not have a query');
  return url.href.replace(/\/+$/, '');
}

/** The audit file must be appendable at start: a broker that cannot audit must not serve. */
function auditLog(r: EnvReader): string | null {
  const raw = r.optional('AUTH_BROKER_AUDIT_LOG');
  if (raw === undefined) return null;
  const path = resolve(raw);
  try {
    closeSync(openSync(path, 'a', 0o600));
  } catch (error) {
    r.fail(
      `AUTH_BROKER_AUDIT_LOG ${path} cannot be opened for append (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
  return path;
}

function features(r: EnvReader): FeatureConfig {
  const path = r.optional('AUTH_BROKER_FEATURE_CONFIG');
  if (path === undefined) return {};
  try {
    return loadFeatureConfig(resolve(path));
  } catch (error) {
    if (!(error instanceof FeatureConfigError)) throw error;
    for (const problem of error.problems) r.fail(`AUTH_BROKER_FEATURE_CONFIG ${path}: ${problem}`);
    return {};
  }
}
