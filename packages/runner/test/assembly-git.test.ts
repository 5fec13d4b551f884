import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ServiceError } from '@svc/contracts';
import {
  GitRunner,
  materializeCheckout,
  resolveFetchTarget,
  type GitBundleContext,
} from '../src/assembly/index.js';
import {
  bareCopy,
  git,
  makeLabRepo,
  removeDir,
  serviceFailure,
  tempDir,
  type LabRepo,
} from './assembly-helpers.js';

let root: string;
let lab: LabRepo;
let n = 0;
const argvSeen: string[][] = [];

function ctx(extra: Partial<GitBundleContext> = {}): GitBundleContext {
  return {
    git: new GitRunner({ observer: { onSpawn: (info) => argvSeen.push([...info.argv]) } }),
    fetchTimeoutMs: 60_000,
    commandTimeoutMs: 30_000,
    ...extra,
  };
}

const nextDir = () => join(root, `ws-${++n}`);

async function rejectsWith(promise: Promise<unknown>, kind: string, pattern?: RegExp) {
  const error = await serviceFailure(promise, kind);
  if (pattern) assert.match(error.message, pattern);
}

before(async () => {
  root = await tempDir('git');
  lab = makeLabRepo(root);
});
after(() => removeDir(root));

describe('gitbundle materialization with the real git', () => {
  it('checks out the remote HEAD when neither ref nor branch is given', async () => {
    const dir = nextDir();
    const result = await materializeCheckout(
      { repoUrl: lab.url, refSource: 'remote-head', dir },
      ctx(),
    );
    assert.equal(result.materializedCommit, lab.c3);
    assert.equal(result.resolvedRef, 'HEAD');
    assert.equal(result.fetchMode, 'shallow');
    assert.equal(result.checkoutTree, git(lab.bare, 'rev-parse', `${lab.c3}^{tree}`));
    assert.equal(readFileSync(join(dir, 'README.md'), 'utf8'), 'lab v3\n');
    assert.equal(git(dir, 'rev-parse', 'HEAD'), lab.c3);
    // Shallow: only the one commit came over.
    assert.equal(git(dir, 'rev-list', '--count', 'HEAD'), '1');
    assert.equal(git(dir, 'remote', 'get-url', 'origin'), lab.url);
  });

  it('resolves a branch, checks it out as a local branch and records the request', async () => {
    const dir = nextDir();
    const result = await materializeCheckout(
      { repoUrl: lab.url, ref: 'feature', refSource: 'workspaceRef.branch', dir },
      ctx(),
    );
    assert.equal(result.materializedCommit, lab.f1);
    assert.equal(result.resolvedRef, 'refs/heads/feature');
    assert.equal(result.requestedRef, 'feature');
    assert.equal(result.refSource, 'workspaceRef.branch');
    assert.equal(git(dir, 'symbolic-ref', '--short', 'HEAD'), 'feature');
    assert.ok(existsSync(join(dir, 'FEATURE.md')));
  });

  it('peels an annotated tag to its commit', async () => {
    const dir = nextDir();
    const result = await materializeCheckout(
      { repoUrl: lab.url, ref: 'v1', refSource: 'resourceBundleRef.ref', dir },
      ctx(),
    );
    assert.equal(result.materializedCommit, lab.c2);
    assert.equal(result.resolvedRef, 'refs/tags/v1');
    assert.equal(readFileSync(join(dir, 'README.md'), 'utf8'), 'lab v2\n');
  });

  it('pins a commit at a tip with a shallow fetch', async () => {
    const dir = nextDir();
    const result = await materializeCheckout(
      { repoUrl: lab.url, commitId: lab.f1, refSource: 'remote-head', dir },
      ctx(),
    );
    assert.equal(result.materializedCommit, lab.f1);
    assert.equal(result.requestedCommit, lab.f1);
    assert.equal(result.fetchMode, 'shallow');
    assert.equal(result.resolvedRef, 'refs/heads/feature');
  });

  it('pins a commit that is no tip with a full fetch and verifies it', async () => {
    const dir = nextDir();
    const result = await materializeCheckout(
      { repoUrl: lab.url, ref: 'main', commitId: lab.c1, refSource: 'resourceBundleRef.ref', dir },
      ctx(),
    );
    assert.equal(result.materializedCommit, lab.c1);
    assert.equal(result.fetchMode, 'full');
    assert.equal(result.resolvedRef, null);
    assert.equal(git(dir, 'rev-parse', 'HEAD'), lab.c1);
    assert.equal(readFileSync(join(dir, 'README.md'), 'utf8'), 'lab v1\n');
  });

  it('refuses a pinned commit no branch or tag reaches, even though the server has it', async () => {
    assert.equal(git(lab.bare, 'cat-file', '-t', lab.dangling), 'commit');
    const dir = nextDir();
    await rejectsWith(
      materializeCheckout(
        { repoUrl: lab.url, commitId: lab.dangling, refSource: 'remote-head', dir },
        ctx(),
      ),
      'schema-invalid',
      /not reachable/,
    );
    assert.ok(!existsSync(join(dir, 'SECRET-PLAN.md')));
  });

  it('refuses a ref the repository does not have, and a ref that looks like an option', async () => {
    await rejectsWith(
      materializeCheckout(
        {
          repoUrl: lab.url,
          ref: 'no-such-branch',
          refSource: 'resourceBundleRef.ref',
          dir: nextDir(),
        },
        ctx(),
      ),
      'schema-invalid',
      /ref no-such-branch not found/,
    );
    await rejectsWith(
      materializeCheckout(
        {
          repoUrl: lab.url,
          ref: '--upload-pack=touch /tmp/x',
          refSource: 'resourceBundleRef.ref',
          dir: nextDir(),
        },
        ctx(),
      ),
      'schema-invalid',
      /not a valid ref name/,
    );
  });

  it('fails a missing repository as schema-invalid and a non-empty checkout dir as infra-failed', async () => {
    await rejectsWith(
      materializeCheckout(
        { repoUrl: `file://${root}/missing.git`, refSource: 'remote-head', dir: nextDir() },
        ctx(),
      ),
      'schema-invalid',
      /does not appear to be a git repository/,
    );
    await rejectsWith(
      materializeCheckout({ repoUrl: lab.url, refSource: 'remote-head', dir: lab.work }, ctx()),
      'infra-failed',
      /not empty/,
    );
  });

  it('kills a git command that outlives its timeout', async () => {
    await rejectsWith(
      materializeCheckout(
        { repoUrl: lab.url, refSource: 'remote-head', dir: nextDir() },
        ctx({ fetchTimeoutMs: 1 }),
      ),
      'infra-failed',
      /timed out/,
    );
  });

  it('passes every git command as an argv array with no credential and no shell', () => {
    assert.ok(argvSeen.length > 10);
    for (const argv of argvSeen) {
      assert.equal(argv[0], 'git');
      assert.ok(!argv.some((a) => /sh -c|Authorization/i.test(a)), argv.join(' '));
    }
  });
});

describe('mirror rewrite', () => {
  const mirror = () => ({ baseUrl: `file://${root}/mirror`, codeHostHosts: ['github.com'] });

  before(() => {
    bareCopy(lab.work, join(root, 'mirror-tmp.git'));
    git(root, 'init', '-q', '--bare', join(root, 'mirror/acme/lab.git'));
    git(join(root, 'mirror-tmp.git'), 'push', '-q', '--mirror', join(root, 'mirror/acme/lab.git'));
  });

  it('fetches a code-host repository from the mirror and records both addresses', async () => {
    const dir = nextDir();
    const result = await materializeCheckout(
      {
        repoUrl: 'https://github.com/acme/lab.git',
        ref: 'main',
        refSource: 'resourceBundleRef.ref',
        dir,
      },
      ctx({ mirror: mirror() }),
    );
    assert.equal(result.repoUrl, 'https://github.com/acme/lab.git');
    assert.equal(result.fetchRepoUrl, `file://${root}/mirror/acme/lab.git`);
    assert.equal(result.mirrorUsed, true);
    assert.equal(result.mirrorBaseUrl, `file://${root}/mirror`);
    assert.equal(result.materializedCommit, lab.c3);
    // The agent sees the declared repository, not the mirror.
    assert.equal(git(dir, 'remote', 'get-url', 'origin'), 'https://github.com/acme/lab.git');
  });

  it('maps scp-like and ssh code-host addresses the same way', () => {
    for (const url of [
      'git@github.com:acme/lab.git',
      'ssh://git@github.com/acme/lab',
      'https://GitHub.com/acme/lab/',
    ]) {
      const target = resolveFetchTarget(url, mirror());
      assert.equal(target.mirrorUsed, true, url);
      assert.equal(target.fetchUrl, `file://${root}/mirror/acme/lab.git`);
    }
  });

  it('keeps a non-code-host address with mirrorUsed=false', async () => {
    const result = await materializeCheckout(
      { repoUrl: lab.url, refSource: 'remote-head', dir: nextDir() },
      ctx({ mirror: mirror() }),
    );
    assert.equal(result.mirrorUsed, false);
    assert.equal(result.fetchRepoUrl, lab.url);
    assert.equal(result.mirrorBaseUrl, `file://${root}/mirror`);
    const plain = resolveFetchTarget('https://git.example.org/team/repo.git', null);
    assert.deepEqual(
      {
        mirrorUsed: plain.mirrorUsed,
        mirrorBaseUrl: plain.mirrorBaseUrl,
        fetchRepoUrl: plain.fetchRepoUrl,
      },
      {
        mirrorUsed: false,
        mirrorBaseUrl: null,
        fetchRepoUrl: 'https://git.example.org/team/repo.git',
      },
    );
  });

  it('refuses unmappable code-host paths and a mirror base that embeds credentials', () => {
    assert.throws(
      () => resolveFetchTarget('https://github.com/acme/lab/tree/main', mirror()),
      (e: unknown) => e instanceof ServiceError && e.failureKind === 'schema-invalid',
    );
    assert.throws(
      () =>
        resolveFetchTarget('https://github.com/acme/lab', {
          baseUrl: 'https://user:pw@mirror.example',
          codeHostHosts: ['github.com'],
        }),
      (e: unknown) =>
        e instanceof ServiceError && e.failureKind === 'infra-failed' && !e.message.includes('pw'),
    );
  });
});
