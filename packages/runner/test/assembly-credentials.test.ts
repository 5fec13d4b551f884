import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ServiceError } from '@svc/contracts';
import { canary, ensureTestTag, findCanaries, waitForNoTaggedProcesses } from '@svc/testkit';
import {
  GitRunner,
  assembleRuntime,
  gitCredentialFromSecret,
  materializeCheckout,
  type GitCredential,
} from '../src/assembly/index.js';
import {
  git,
  makeLabRepo,
  removeDir,
  startGitHttpServer,
  tempDir,
  type GitHttpServer,
  type LabRepo,
} from './assembly-helpers.js';

/**
 * A private repository served by `git http-backend` behind loopback HTTP that demands a
 * credential. The credential is a planted canary: it must reach the server and nothing else.
 */
const tag = ensureTestTag();
const TOKEN = canary('git-token');
const PASSWORD = canary('git-password');
let root: string;
let lab: LabRepo;
let bearerServer: GitHttpServer;
let basicServer: GitHttpServer;
let v0Server: GitHttpServer;
let dumbServer: GitHttpServer;
let n = 0;
const logs: string[] = [];
const argv: string[] = [];
const envNames = new Set<string>();

const logger = {
  info: (data: Record<string, unknown>, msg: string) => logs.push(`${msg} ${JSON.stringify(data)}`),
};
const observer = {
  onSpawn: (info: { argv: readonly string[]; envNames: readonly string[] }) => {
    argv.push(info.argv.join(' '));
    info.envNames.forEach((name) => envNames.add(name));
  },
};

function bundleRef(url: string, extra: Record<string, unknown> = {}) {
  return {
    kind: 'gitbundle',
    repoUrl: url,
    credentialRef: { name: 'svc-v01-tool-lab-repo', keys: ['token'] },
    ...extra,
  };
}

async function assemble(
  url: string,
  credential: GitCredential | null,
  extra: Record<string, unknown> = {},
) {
  return assembleRuntime({
    resourceBundleRef: bundleRef(url, extra),
    workspaceDir: join(root, `ws-${++n}`),
    credential,
    assembledPathTools: [],
    git: { observer },
    logger,
  });
}

/** Every file under the checkout's .git, as text. */
function gitDirText(dir: string): string {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (!p.includes('/objects/')) out.push(readFileSync(p, 'latin1'));
    }
  };
  walk(join(dir, '.git'));
  return out.join('\n');
}

before(async () => {
  root = await tempDir('cred');
  lab = makeLabRepo(root);
  bearerServer = await startGitHttpServer({ projectRoot: root, bearer: TOKEN });
  basicServer = await startGitHttpServer({
    projectRoot: root,
    basic: { username: 'svc-fetch', password: PASSWORD },
  });
  v0Server = await startGitHttpServer({ projectRoot: root, bearer: TOKEN, protocolV2: false });
  git(lab.bare, 'update-server-info');
  dumbServer = await startGitHttpServer({ projectRoot: root, bearer: TOKEN, dumb: true });
});

after(async () => {
  await Promise.all([
    bearerServer.close(),
    basicServer.close(),
    v0Server.close(),
    dumbServer.close(),
  ]);
  await removeDir(root);
});

describe('private repository over HTTP', () => {
  it('fetches with a bearer token passed only through the git environment', async () => {
    const { summary } = await assemble(`${bearerServer.url}/lab.git`, {
      token: TOKEN,
      scheme: 'bearer',
    });
    assert.equal(summary.materializedCommit, lab.c3);
    assert.equal(summary.repository.credentialUsed, true);
    assert.deepEqual(summary.repository.credentialRef, {
      name: 'svc-v01-tool-lab-repo',
      namespace: null,
      keys: ['token'],
      valuesPrinted: false,
    });
    assert.ok(bearerServer.requests.some((r) => r.authorized));
    assert.ok(envNames.has('GIT_CONFIG_COUNT'));
    assert.ok(envNames.has('GIT_TERMINAL_PROMPT'));
    assert.deepEqual(findCanaries(JSON.stringify(summary), [TOKEN]), []);
    assert.deepEqual(findCanaries(gitDirText(summary.workspace.root), [TOKEN]), []);
  });

  it('fetches with username and password as HTTP Basic', async () => {
    const secret = gitCredentialFromSecret(
      { username: 'svc-fetch', password: PASSWORD },
      'svc-v01-tool-lab-repo',
    );
    const { summary } = await assemble(`${basicServer.url}/lab.git`, secret, { ref: 'feature' });
    assert.equal(summary.materializedCommit, lab.f1);
    assert.deepEqual(findCanaries(JSON.stringify(summary), [PASSWORD]), []);
  });

  it('fails typed and sanitized without a credential, and with a wrong one', async () => {
    const noCredential = assembleRuntime({
      resourceBundleRef: { kind: 'gitbundle', repoUrl: `${bearerServer.url}/lab.git` },
      workspaceDir: join(root, `ws-${++n}`),
      assembledPathTools: [],
      git: { observer },
      logger,
    });
    await assert.rejects(noCredential, (error: unknown) => {
      assert.ok(error instanceof ServiceError);
      assert.equal(error.failureKind, 'secret-unavailable');
      assert.equal(error.details?.['reason'], 'authentication-required');
      assert.equal(error.details?.['assemblyStep'], 'materialize');
      return true;
    });
    const wrong = canary('wrong-token');
    await assert.rejects(
      assemble(`${bearerServer.url}/lab.git`, { token: wrong, scheme: 'bearer' }),
      (error: unknown) => {
        assert.ok(error instanceof ServiceError);
        assert.equal(error.failureKind, 'secret-unavailable');
        assert.equal(error.details?.['reason'], 'authentication-failed');
        assert.deepEqual(
          findCanaries(`${error.message} ${JSON.stringify(error.details)}`, [wrong, TOKEN]),
          [],
        );
        return true;
      },
    );
  });

  it('refuses before fetching when the credentialRef Secret was not projected', async () => {
    const before = bearerServer.requests.length;
    await assert.rejects(assemble(`${bearerServer.url}/lab.git`, null), (error: unknown) => {
      assert.ok(error instanceof ServiceError);
      assert.equal(error.failureKind, 'secret-unavailable');
      assert.match(error.message, /svc-v01-tool-lab-repo/);
      return true;
    });
    assert.equal(bearerServer.requests.length, before);
    assert.throws(
      () => gitCredentialFromSecret({ unrelated: 'x' }, 'svc-v01-tool-lab-repo'),
      (e: unknown) => e instanceof ServiceError && e.failureKind === 'secret-unavailable',
    );
  });

  it('falls back to a full fetch for a pinned non-tip commit on a server without protocol v2', async () => {
    const dir = join(root, `ws-${++n}`);
    const runner = new GitRunner({ observer });
    const credential = { token: TOKEN, scheme: 'bearer' as const };
    runner.registerCredential(credential);
    const result = await materializeCheckout(
      {
        repoUrl: `${v0Server.url}/lab.git`,
        commitId: lab.c1,
        refSource: 'remote-head',
        dir,
        credential,
      },
      { git: runner, fetchTimeoutMs: 60_000, commandTimeoutMs: 30_000 },
    );
    assert.equal(result.materializedCommit, lab.c1);
    assert.equal(result.fetchMode, 'full');
    assert.equal(git(dir, 'rev-parse', 'HEAD'), lab.c1);
  });

  it('falls back to one full fetch when the transport cannot go shallow (dumb HTTP)', async () => {
    const { summary } = await assemble(
      `${dumbServer.url}/lab.git`,
      { token: TOKEN, scheme: 'bearer' },
      { ref: 'feature' },
    );
    assert.equal(summary.materializedCommit, lab.f1);
    assert.equal(summary.fetchMode, 'full');
    assert.ok(dumbServer.requests.some((r) => r.path.endsWith('/info/refs') && r.authorized));
  });

  it('leaves the planted credentials in no argv, log line or leftover process', async () => {
    assert.ok(argv.length > 0 && logs.length > 0);
    assert.deepEqual(findCanaries(argv.join('\n'), [TOKEN, PASSWORD]), []);
    assert.deepEqual(findCanaries(logs.join('\n'), [TOKEN, PASSWORD]), []);
    assert.deepEqual(await waitForNoTaggedProcesses(tag), []);
  });
});

describe('git stderr redaction', () => {
  it('redacts registered values and URL credentials from what it surfaces', () => {
    const runner = new GitRunner();
    runner.registerCredential({ token: TOKEN });
    const text = runner.clean(`fatal: bad header ${TOKEN} for https://user:${TOKEN}@host/x.git`);
    assert.deepEqual(findCanaries(text, [TOKEN]), []);
    assert.match(text, /\[redacted\]/);
  });
});
