/**
 * Repository names and the allowlist. The broker only ever sends the allowlist's own spelling
 * upstream, never the caller's string, so a caller cannot steer a path segment.
 */
export interface RepoRef {
  owner: string;
  name: string;
  /** `<owner>/<repo>` as configured. */
  fullName: string;
}

const OWNER = /^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$/;
const NAME = /^[A-Za-z0-9._-]{1,100}$/;

/** Parse `<owner>/<repo>`; null when it is not exactly that. */
export function parseRepo(value: string): RepoRef | null {
  const parts = value.split('/');
  if (parts.length !== 2) return null;
  const [owner, name] = parts as [string, string];
  if (!OWNER.test(owner) || !NAME.test(name) || name === '.' || name === '..') return null;
  return { owner, name, fullName: `${owner}/${name}` };
}

export class RepoAllowlist {
  readonly #byKey = new Map<string, RepoRef>();

  constructor(repos: readonly RepoRef[]) {
    // Code-host names are case-insensitive; the configured spelling wins.
    for (const repo of repos) this.#byKey.set(repo.fullName.toLowerCase(), repo);
  }

  /** The configured repository for a caller string, or null when it is not allowed. */
  lookup(value: string): RepoRef | null {
    if (value.length > 200) return null;
    return this.#byKey.get(value.toLowerCase()) ?? null;
  }

  get names(): string[] {
    return [...this.#byKey.values()].map((r) => r.fullName);
  }
}
