import { readdir } from 'node:fs/promises';
import { ServiceError } from '@svc/contracts';
import type { GitCredential, GitRunner } from './git-exec.js';
import { resolveFetchTarget, type FetchTarget, type MirrorConfig } from './mirror.js';
import { infra, isMissing } from './paths.js';
import { classifyGitFailure } from './git-errors.js';
import type { RepositoryFact } from './summary.js';

/**
 * Materialize one repository at one commit into an empty directory with the real `git`:
 * `ls-remote` resolves the ref (or proves a pinned commit is a tip), then a shallow fetch of just
 * that ref; a pinned commit that is no tip needs history to prove it reachable, so it takes a
 * full fetch. The materialized commit is the content identity and is verified, never assumed.
 */

export type RefSource =
  'resourceBundleRef.ref' | 'workspaceRef.branch' | 'bundle.ref' | 'inherited' | 'remote-head';

export interface CheckoutRequest {
  repoUrl: string;
  /** The requested ref; undefined means the remote HEAD. */
  ref?: string | undefined;
  refSource: RefSource;
  /** Full commit id pin. */
  commitId?: string | undefined;
  /** Empty or absent directory to check out into. */
  dir: string;
  /** Used only for this repository's fetch; undefined for a public repository. */
  credential?: GitCredential | undefined;
}

export interface GitBundleContext {
  git: GitRunner;
  mirror?: MirrorConfig | null | undefined;
  fetchTimeoutMs: number;
  commandTimeoutMs: number;
}

/** What a checkout asked for and what it produced; the assembly summary carries these too. */
export interface CheckoutFacts {
  requestedRef: string | null;
  refSource: RefSource;
  requestedCommit: string | null;
  /** The remote ref the content came from (`refs/heads/main`, `HEAD`), null for a pinned non-tip. */
  resolvedRef: string | null;
  /** The content identity of the run. */
  materializedCommit: string;
  checkoutTree: string;
  fetchMode: 'shallow' | 'full';
  objectFormat: 'sha1' | 'sha256';
}

export interface CheckoutResult extends RepositoryFact, CheckoutFacts {
  credentialUsed: boolean;
}

interface RemoteRef {
  name: string;
  /** Commit the ref points at (annotated tags peeled). */
  commit: string;
}

export async function materializeCheckout(
  request: CheckoutRequest,
  ctx: GitBundleContext,
): Promise<CheckoutResult> {
  const target = resolveFetchTarget(request.repoUrl, ctx.mirror);
  if (request.ref !== undefined) checkRefName(request.ref);
  await assertEmptyDir(request.dir);
  const credential = request.credential;
  const remote = await listRemote(target, credential, ctx);
  const objectFormat = remote.some((r) => r.commit.length === 64) ? 'sha256' : 'sha1';
  await run(
    ctx,
    target,
    ['init', '-q', '--template=', `--object-format=${objectFormat}`, '--', request.dir],
    {},
  );

  let commit: string;
  let resolvedRef: string | null;
  let fetchMode: 'shallow' | 'full';
  if (request.commitId !== undefined) {
    const pinned = request.commitId.toLowerCase();
    const tip = pickTip(remote, pinned, request.ref);
    if (tip) {
      fetchMode = await fetchRef(ctx, target, request.dir, tip.name, credential);
      resolvedRef = tip.name;
    } else {
      await fetchForReachability(ctx, target, request.dir, pinned, request.ref, remote, credential);
      fetchMode = 'full';
      resolvedRef = null;
    }
    commit = await revParse(ctx, target, request.dir, resolvedRef ? 'FETCH_HEAD' : pinned);
    if (commit !== pinned) {
      throw new ServiceError(
        'schema-invalid',
        `pinned commit ${pinned} was not materialized from ${target.fetchRepoUrl} (got ${commit})`,
        { repoUrl: target.fetchRepoUrl, commitId: pinned },
      );
    }
  } else {
    const ref = resolveRemoteRef(remote, request.ref, target);
    fetchMode = await fetchRef(ctx, target, request.dir, ref.name, credential);
    resolvedRef = ref.name;
    commit = await revParse(ctx, target, request.dir, 'FETCH_HEAD');
  }

  const branch = resolvedRef?.startsWith('refs/heads/') ? resolvedRef.slice(11) : undefined;
  const checkoutArgs = branch
    ? ['checkout', '-q', '--force', '-B', branch, commit, '--']
    : ['checkout', '-q', '--force', '--detach', commit, '--'];
  await run(ctx, target, checkoutArgs, { cwd: request.dir });
  const head = await revParse(ctx, target, request.dir, 'HEAD');
  if (head !== commit) {
    throw new ServiceError('infra-failed', `checkout left HEAD at ${head}, expected ${commit}`);
  }
  const checkoutTree = (
    await run(ctx, target, ['rev-parse', '--verify', `${commit}^{tree}`], { cwd: request.dir })
  ).stdout.trim();
  // The agent sees where its code came from: the declared address, never the mirror.
  await run(ctx, target, ['remote', 'add', 'origin', request.repoUrl], { cwd: request.dir });

  return {
    repoUrl: target.repoUrl,
    fetchRepoUrl: target.fetchRepoUrl,
    mirrorUsed: target.mirrorUsed,
    mirrorBaseUrl: target.mirrorBaseUrl,
    requestedRef: request.ref ?? null,
    refSource: request.refSource,
    requestedCommit: request.commitId ?? null,
    resolvedRef,
    materializedCommit: commit,
    checkoutTree,
    fetchMode,
    objectFormat,
    credentialUsed: credential !== undefined,
  };
}

/** Git's own ref name rules, plus nothing that could be read as an option. */
export function checkRefName(ref: string): void {
  const bad =
    ref.length === 0 ||
    ref.length > 255 ||
    ref.startsWith('-') ||
    ref.startsWith('/') ||
    ref.endsWith('/') ||
    ref.endsWith('.') ||
    ref.endsWith('.lock') ||
    ref.includes('..') ||
    ref.includes('//') ||
    ref.includes('@{') ||
    hasControlOrSpace(ref) ||
    /[~^:?*[\\]/.test(ref);
  if (bad) {
    throw new ServiceError('schema-invalid', `ref ${JSON.stringify(ref)} is not a valid ref name`, {
      field: 'ref',
    });
  }
}

function hasControlOrSpace(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code <= 0x20 || code === 0x7f) return true;
  }
  return false;
}

async function assertEmptyDir(dir: string): Promise<void> {
  try {
    const entries = await readdir(dir);
    if (entries.length > 0) {
      throw new ServiceError('infra-failed', `checkout directory ${dir} is not empty`, {
        path: dir,
      });
    }
  } catch (error) {
    if (error instanceof ServiceError) throw error;
    if (!isMissing(error)) throw infra(`checkout directory ${dir} is not accessible`, error);
  }
}

async function listRemote(
  target: FetchTarget,
  credential: GitCredential | undefined,
  ctx: GitBundleContext,
): Promise<RemoteRef[]> {
  const { stdout } = await run(ctx, target, ['ls-remote', '--', target.fetchUrl], {
    credential,
    fetch: true,
  });
  const direct = new Map<string, string>();
  const peeled = new Map<string, string>();
  for (const line of stdout.split('\n')) {
    const [oid, name] = line.split('\t');
    if (!oid || !name || !/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(oid)) continue;
    if (name.endsWith('^{}')) peeled.set(name.slice(0, -3), oid);
    else direct.set(name, oid);
  }
  if (direct.size === 0) {
    throw new ServiceError('schema-invalid', `repository ${target.fetchRepoUrl} has no refs`, {
      repoUrl: target.fetchRepoUrl,
    });
  }
  return [...direct].map(([name, oid]) => ({ name, commit: peeled.get(name) ?? oid }));
}

/** A ref whose tip is the pinned commit; the requested ref first, then HEAD, branches, tags. */
function pickTip(
  remote: RemoteRef[],
  commit: string,
  ref: string | undefined,
): RemoteRef | undefined {
  const tips = remote.filter((r) => r.commit === commit);
  if (ref !== undefined) {
    const wanted = dwimCandidates(ref);
    const match = tips.find((r) => wanted.includes(r.name));
    if (match) return match;
  }
  return (
    tips.find((r) => r.name === 'HEAD') ??
    tips.find((r) => r.name.startsWith('refs/heads/')) ??
    tips[0]
  );
}

/** The full names git tries for a short ref, in git's own order. */
function dwimCandidates(ref: string): string[] {
  if (ref === 'HEAD' || ref.startsWith('refs/')) return [ref];
  return [`refs/${ref}`, `refs/tags/${ref}`, `refs/heads/${ref}`, `refs/remotes/${ref}`];
}

function resolveRemoteRef(
  remote: RemoteRef[],
  ref: string | undefined,
  target: FetchTarget,
): RemoteRef {
  const wanted = ref ?? 'HEAD';
  for (const candidate of dwimCandidates(wanted)) {
    const found = remote.find((r) => r.name === candidate);
    if (found) return found;
  }
  throw new ServiceError(
    'schema-invalid',
    ref === undefined
      ? `repository ${target.fetchRepoUrl} has no HEAD; name a ref`
      : `ref ${ref} not found in repository ${target.fetchRepoUrl}`,
    { repoUrl: target.fetchRepoUrl, ref: wanted },
  );
}

/** Shallow fetch of one ref into FETCH_HEAD; a full fetch when the server cannot go shallow. */
async function fetchRef(
  ctx: GitBundleContext,
  target: FetchTarget,
  dir: string,
  refName: string,
  credential: GitCredential | undefined,
): Promise<'shallow' | 'full'> {
  const base = ['fetch', '-q', '--no-tags', '--no-recurse-submodules'];
  try {
    await run(ctx, target, [...base, '--depth=1', '--', target.fetchUrl, refName], {
      cwd: dir,
      credential,
      fetch: true,
    });
    return 'shallow';
  } catch (error) {
    // Auth, not-found and timeout failures would fail the same way again; a transport that
    // cannot go shallow (dumb HTTP, old servers) gets one full fetch.
    const failure = classifyGitFailure(error, 'fetch', target, credential !== undefined);
    if (failure.failureKind !== 'infra-failed' || failure.details?.['reason'] === 'timeout') {
      throw failure;
    }
  }
  await run(ctx, target, [...base, '--', target.fetchUrl, refName], {
    cwd: dir,
    credential,
    fetch: true,
  });
  return 'full';
}

/**
 * A pinned commit that is no tip: fetch history (the requested ref first, then every branch and
 * tag) until the commit is in a ref's ancestry. A commit the server has but no ref reaches is
 * refused: only reachable content is materialized.
 */
async function fetchForReachability(
  ctx: GitBundleContext,
  target: FetchTarget,
  dir: string,
  pinned: string,
  ref: string | undefined,
  remote: RemoteRef[],
  credential: GitCredential | undefined,
): Promise<void> {
  const fetch = (refspecs: string[]) =>
    run(
      ctx,
      target,
      ['fetch', '-q', '--no-tags', '--no-recurse-submodules', '--', target.fetchUrl, ...refspecs],
      { cwd: dir, credential, fetch: true },
    );
  const reaches = async () => {
    const args = ['for-each-ref', '--count=1', '--format=%(refname)', `--contains=${pinned}`];
    const { stdout } = await run(
      ctx,
      target,
      [...args, 'refs/svc/', 'refs/remotes/', 'refs/tags/'],
      {
        cwd: dir,
      },
    ).catch(() => ({ stdout: '' }));
    return stdout.trim().length > 0;
  };
  const named =
    ref === undefined ? undefined : remote.find((r) => dwimCandidates(ref).includes(r.name));
  if (named) {
    await fetch([`+${named.name}:refs/svc/requested`]);
    if (await reaches()) return;
  }
  await fetch(['+refs/heads/*:refs/remotes/origin/*', '+refs/tags/*:refs/tags/*']);
  if (await reaches()) return;
  throw new ServiceError(
    'schema-invalid',
    `pinned commit ${pinned} is not reachable from any branch or tag of ${target.fetchRepoUrl}`,
    { repoUrl: target.fetchRepoUrl, commitId: pinned },
  );
}

async function revParse(
  ctx: GitBundleContext,
  target: FetchTarget,
  dir: string,
  rev: string,
): Promise<string> {
  try {
    const { stdout } = await run(ctx, target, ['rev-parse', '--verify', '-q', `${rev}^{commit}`], {
      cwd: dir,
    });
    return stdout.trim();
  } catch {
    throw new ServiceError(
      'schema-invalid',
      `commit ${rev} is not reachable from any ref of ${target.fetchRepoUrl}`,
      { repoUrl: target.fetchRepoUrl, commitId: rev },
    );
  }
}

async function run(
  ctx: GitBundleContext,
  target: FetchTarget,
  args: string[],
  options: { cwd?: string; credential?: GitCredential | undefined; fetch?: boolean },
) {
  try {
    return await ctx.git.run(args, {
      cwd: options.cwd,
      credential: options.credential,
      timeoutMs: options.fetch ? ctx.fetchTimeoutMs : ctx.commandTimeoutMs,
    });
  } catch (error) {
    if (error instanceof ServiceError) throw error;
    throw classifyGitFailure(error, args[0] ?? 'git', target, options.credential !== undefined);
  }
}
