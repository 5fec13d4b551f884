import { ServiceError, sanitizeUrl } from '@svc/contracts';

/**
 * Git mirror rewrite (spec/3, resource bundle rule 2). The mirror is infrastructure: callers name
 * the original repository; the runner fetches a code-host repository from
 * `<mirrorBase>/<owner>/<repo>.git` and records both addresses.
 */
export interface MirrorConfig {
  /** Read URL of the mirror, without credentials, for example `https://git-mirror.internal`. */
  baseUrl: string;
  /** Code-host host names whose repositories the mirror serves, for example `github.com`. */
  codeHostHosts: readonly string[];
}

export interface FetchTarget {
  /** The repository as the caller declared it. */
  repoUrl: string;
  /** The URL git is given. Never holds credentials (the repoUrl and mirror base may not). */
  fetchUrl: string;
  /** `fetchUrl` as recorded in events and results. */
  fetchRepoUrl: string;
  mirrorUsed: boolean;
  mirrorBaseUrl: string | null;
}

interface ParsedRepo {
  host: string;
  path: string;
}

/** Host and path of an https, http, ssh, git or scp-like (`git@host:owner/repo`) address. */
export function parseRepoUrl(raw: string): ParsedRepo | undefined {
  const scp = /^(?:[\w.-]+@)?([\w.-]+):(?!\/\/)(.+)$/.exec(raw);
  if (scp && !hasScheme(raw)) {
    return { host: (scp[1] ?? '').toLowerCase(), path: scp[2] ?? '' };
  }
  try {
    const url = new URL(raw);
    return { host: url.hostname.toLowerCase(), path: decodeURIComponent(url.pathname) };
  } catch {
    return undefined;
  }
}

/** Comparable identity of a repository address: host and path without `.git` or slashes. */
export function repoIdentity(raw: string): string {
  const parsed = parseRepoUrl(raw);
  if (!parsed) return raw;
  const path = parsed.path.replace(/^\/+|\/+$/g, '').replace(/\.git$/, '');
  return `${parsed.host}/${path}`;
}

/** Origin (scheme, host, port) of an address, for scoping a credential; scp form maps to ssh. */
export function repoOrigin(raw: string): string {
  if (hasScheme(raw)) {
    try {
      const url = new URL(raw);
      return `${url.protocol}//${url.host}`;
    } catch {
      return raw;
    }
  }
  const parsed = parseRepoUrl(raw);
  return parsed ? `ssh://${parsed.host}` : raw;
}

export function checkMirrorConfig(mirror: MirrorConfig): void {
  let url: URL;
  try {
    url = new URL(mirror.baseUrl);
  } catch {
    throw new ServiceError('infra-failed', 'the git mirror base URL is not a URL');
  }
  if (url.username || url.password) {
    // A credential in the mirror URL would reach argv and events.
    throw new ServiceError('infra-failed', 'the git mirror base URL must not embed credentials');
  }
}

export function resolveFetchTarget(
  repoUrl: string,
  mirror: MirrorConfig | null | undefined,
): FetchTarget {
  if (repoUrl.startsWith('-')) {
    throw new ServiceError('schema-invalid', 'repository URL must not start with "-"', {
      field: 'repoUrl',
    });
  }
  const direct: FetchTarget = {
    repoUrl,
    fetchUrl: repoUrl,
    fetchRepoUrl: recordUrl(repoUrl),
    mirrorUsed: false,
    mirrorBaseUrl: mirror ? recordUrl(mirror.baseUrl) : null,
  };
  if (!mirror) return direct;
  checkMirrorConfig(mirror);
  const parsed = parseRepoUrl(repoUrl);
  const hosts = mirror.codeHostHosts.map((h) => h.toLowerCase());
  if (!parsed || !hosts.includes(parsed.host)) return direct;
  const segments = parsed.path
    .replace(/^\/+|\/+$/g, '')
    .replace(/\.git$/, '')
    .split('/');
  const [owner, repo] = segments;
  const safe = /^[A-Za-z0-9._-]+$/;
  if (segments.length !== 2 || !owner || !repo || !safe.test(owner) || !safe.test(repo)) {
    throw new ServiceError(
      'schema-invalid',
      `repository ${recordUrl(repoUrl)} on code host ${parsed.host} is not of the form <owner>/<repo>`,
      { field: 'repoUrl' },
    );
  }
  const fetchUrl = `${mirror.baseUrl.replace(/\/+$/, '')}/${owner}/${repo}.git`;
  return {
    repoUrl,
    fetchUrl,
    fetchRepoUrl: recordUrl(fetchUrl),
    mirrorUsed: true,
    mirrorBaseUrl: recordUrl(mirror.baseUrl),
  };
}

function hasScheme(raw: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(raw);
}

/** A URL as it may appear in events: credentials stripped; anything else kept as written. */
function recordUrl(raw: string): string {
  if (!hasScheme(raw)) return raw;
  const clean = sanitizeUrl(raw);
  try {
    const url = new URL(raw);
    return url.username || url.password || clean !== url.toString() ? clean : raw;
  } catch {
    return clean;
  }
}
