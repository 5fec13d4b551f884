import { ServiceError } from './errors.js';

/**
 * What a caller may name as a repository or a path inside one. A caller names network
 * repositories only (https, http, ssh, git): a `file://` URL, a bare local path or a git
 * transport helper (`ext::…`) would let a request read any repository on the runner host. A
 * local mirror is operator configuration: URL prefixes the operator lists are accepted as they
 * are. Paths are relative, stay inside their root, never touch `.git` (hooks, config) and hold
 * no control characters.
 */

/** URL schemes a caller may use; everything else needs an operator-listed prefix. */
export const NETWORK_REPO_SCHEMES: readonly string[] = [
  'https:',
  'http:',
  'ssh:',
  'git:',
  'git+ssh:',
  'ssh+git:',
];

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;
/** scp-like ssh address `user@host:path` (git treats `host:path` the same; we ask for a user). */
const SCP_LIKE = /^[A-Za-z0-9._~-]+@[A-Za-z0-9.-]+:(?!:)[^\s\\]*$/;

function invalid(field: string, message: string, extra: Record<string, unknown> = {}): never {
  throw new ServiceError('schema-invalid', `${field} ${message}`, { field, ...extra });
}

/**
 * Refuse a repository address a caller may not name. `operatorPrefixes` are URL prefixes the
 * operator configured (e.g. a local mirror `file:///srv/git/`); an address under one, written
 * in its canonical form (no `..`, no encoded dot segments), is accepted whatever its scheme.
 */
export function checkRepoAddress(
  raw: string,
  field: string,
  operatorPrefixes: readonly string[] = [],
): void {
  if (raw.length === 0 || CONTROL.test(raw) || /\s/.test(raw))
    invalid(field, 'must be a repository address without spaces or control characters');
  if (raw.startsWith('-')) invalid(field, 'must not start with "-"');
  if (underOperatorPrefix(raw, operatorPrefixes)) return;
  if (SCP_LIKE.test(raw)) {
    if (raw.slice(raw.indexOf(':') + 1).startsWith('-')) invalid(field, 'has a path starting "-"');
    return;
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return invalid(field, 'is not a repository URL (https, http, ssh or git)');
  }
  if (!NETWORK_REPO_SCHEMES.includes(url.protocol.toLowerCase()))
    invalid(
      field,
      `uses the scheme ${url.protocol} a caller may not name (https, http, ssh or git only; a local mirror is operator configuration)`,
      { scheme: url.protocol },
    );
  // An ssh login name is no secret (`ssh://git@host/…`); any other user info may be a token.
  const ssh = ['ssh:', 'git+ssh:', 'ssh+git:'].includes(url.protocol.toLowerCase());
  const userInfo = /^[^:]+:\/\/[^/?#]*@/.test(raw);
  if (url.password || (userInfo && !ssh))
    invalid(field, 'must not embed credentials; use resourceBundleRef.credentialRef');
  // `scheme://host/…` as written: URL parsing forgives `https:///x` and `https:\\x`, git may not.
  if (!url.hostname || !/^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#\\]/.test(raw))
    invalid(field, 'names no host');
}

/** True when `raw` is canonical and lies under one of the operator's prefixes. */
export function underOperatorPrefix(raw: string, prefixes: readonly string[]): boolean {
  if (prefixes.length === 0) return false;
  let canonical: string;
  try {
    canonical = new URL(raw).href;
  } catch {
    return false;
  }
  // A non-canonical spelling (`..`, `%2e`, `\`) could mean another path to git than to us.
  if (canonical !== raw || /%2e/i.test(raw)) return false;
  return prefixes.some((prefix) => raw.startsWith(prefix));
}

/** Parse an operator's prefix list entry: an absolute URL ending with `/`. */
export function parseOperatorPrefix(raw: string): string | null {
  try {
    const href = new URL(raw).href;
    return href === raw && raw.endsWith('/') ? raw : null;
  } catch {
    return null;
  }
}

/** `.git` in any case, with the trailing dots or spaces some file systems drop, or `git~1`. */
const GIT_DIR = /^(\.git[. ]*|git~\d+)$/i;

/**
 * Refuse a path that is not a plain relative path inside its root: absolute, drive-letter or
 * backslash forms, a `..` segment, a `.git` segment (in any case), or a control character.
 * `allowDot`: the root itself (`.`, `./`) is acceptable.
 */
export function checkRelativePath(
  path: string,
  field: string,
  options: { allowDot?: boolean } = {},
): void {
  const parts = path.split('/');
  const problem =
    path === ''
      ? 'is empty'
      : CONTROL.test(path)
        ? 'holds a control character'
        : path.startsWith('/') || /^[A-Za-z]:/.test(path) || path.includes('\\')
          ? 'must be a relative path'
          : parts.includes('..')
            ? "must not contain '..'"
            : parts.some((p) => GIT_DIR.test(p))
              ? 'must not reach into .git'
              : !options.allowDot && parts.every((p) => p === '' || p === '.')
                ? 'must name something inside its root'
                : null;
  if (problem)
    invalid(
      field,
      `${problem}: a relative path inside its root with no '..' or .git (got ${JSON.stringify(path)})`,
      { path },
    );
}

/** A real path relative to its root: true when one of its segments is a `.git` directory. */
export function reachesGitDir(relativePath: string): boolean {
  return relativePath.split(/[/\\]/).some((p) => GIT_DIR.test(p));
}

/** `dockerfilePath`: a file inside the build context (the repository), never outside it. */
export function checkDockerfilePath(path: string, field: string): void {
  checkRelativePath(path, field, { allowDot: false });
  if (path.endsWith('/')) invalid(field, 'must name a file inside the build context', { path });
}
