import { EnvReader, type Env } from '@svc/contracts';

/** The one configuration of the `queue` and `sessions` clients. */
export interface CliConfig {
  /** The manager's base URL, without user info (the token travels as a bearer header). */
  url: string;
  token: string | null;
  /** The URL's password, if one was written into it: redacted from every line printed. */
  urlPassword: string | null;
  /** JSON on standard output (asked for, or standard output is not a terminal). */
  json: boolean;
}

export interface GlobalFlags {
  url?: string;
  token?: string;
  json?: boolean;
}

export const DEFAULT_MANAGER_URL = 'http://127.0.0.1:8080';

/**
 * Flags win over the environment (SVC_MANAGER_URL, SVC_API_KEY). Throws ConfigError listing
 * every problem; a problem never echoes a value (a URL may hold a password).
 */
export function loadCliConfig(
  flags: GlobalFlags,
  env: Env = process.env,
  stdoutIsTTY: boolean = process.stdout.isTTY === true,
): CliConfig {
  const r = new EnvReader({
    ...env,
    ...(flags.url !== undefined ? { SVC_MANAGER_URL: flags.url } : {}),
  });
  const raw = r.url('SVC_MANAGER_URL', DEFAULT_MANAGER_URL) ?? DEFAULT_MANAGER_URL;
  const parsed = new URL(raw);
  if (!['http:', 'https:'].includes(parsed.protocol))
    r.fail('the manager URL (--url or SVC_MANAGER_URL) must be http or https');
  const urlPassword = parsed.password ? decodeURIComponent(parsed.password) : null;
  parsed.username = '';
  parsed.password = '';
  const token = flags.token?.trim() || r.optional('SVC_API_KEY') || null;
  r.done();
  return {
    url: parsed.toString().replace(/\/+$/, ''),
    token,
    urlPassword,
    json: flags.json === true || !stdoutIsTTY,
  };
}
