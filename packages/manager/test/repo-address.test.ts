import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../src/index.js';
import { taskBody } from './queue-helpers.js';
import { runBody, SESSION_RUN_BASE, startTestManager, type TestManager } from './helpers.js';

/**
 * What a caller may name as a repository or a path in one, tried as an attacker would: local
 * schemes and paths, git transport helpers, option-looking addresses, credentials, `.git`
 * targets in every spelling, Dockerfiles outside the build context. Every refusal is
 * `schema-invalid` on every route that accepts the field.
 */
const MIRROR = 'file:///srv/git-mirror/';

const REFUSED_REPOS = [
  'file:///etc',
  'file:///srv/git-mirror/../../etc/x.git', // not canonical: the WHATWG and git readings differ
  'file:///srv/git-mirror/%2e%2e/%2e%2e/etc',
  'FILE:///etc/passwd',
  'file://localhost/etc/passwd',
  ' file:///etc',
  '/srv/repos/private.git',
  './relative.git',
  '../up.git',
  '~/repo.git',
  'C:\\repos\\x.git',
  'ext::sh -c touch% /tmp/pwned',
  'ext::sh',
  'fd::17',
  'transport::https://git.example/r.git',
  '--upload-pack=touch /tmp/pwned',
  '-oProxyCommand=x',
  'git@host:-oProxyCommand=x',
  'ftp://git.example/r.git',
  'javascript:alert(1)',
  'data:text/plain,x',
  'https://user:secret@git.example/r.git',
  'https://ghp_0123456789abcdef0123@github.com/acme/r.git',
  'https://@git.example/r.git',
  'ssh://git:pw@git.example/r.git',
  'https:///r.git',
  'https://git.example/r.git\n',
  'https://git.example/r\u0000.git',
  'https://git .example/r.git',
];
const ACCEPTED_REPOS = [
  'https://git.example/org/repo.git',
  'ssh://git.example/org/repo.git',
  'http://127.0.0.1:9418/org/repo.git',
  'git://git.example/org/repo.git',
  'git@github.com:acme/repo.git',
  `${MIRROR}acme/repo.git`,
];

const REFUSED_TARGETS = [
  '.git',
  '.git/hooks',
  '.git/hooks/pre-commit',
  './.git/config',
  'a/../.git/hooks',
  'sub/.git/hooks',
  '.GIT/hooks',
  '.Git/config',
  '.git./hooks',
  '.git /hooks',
  'git~1/hooks',
  '/etc/cron.d',
  '../outside',
  'a/../../outside',
  'C:\\x',
  'a\\..\\..\\x',
  'tools\u0000x',
  'tools\nx',
  'tools\u007f',
  '',
];
const REFUSED_DOCKERFILES = [
  '/etc/Dockerfile',
  '../Dockerfile',
  'images/../../Dockerfile',
  '.git/Dockerfile',
  '.',
  './',
  'images/',
  'C:\\Dockerfile',
  'images\\Dockerfile',
  'Dockerfile\u0000',
  '',
];

let t: TestManager;
let dir: string;
const catalogSource = {
  kind: 'env-image-dockerfile',
  repoUrl: 'https://git.example/env.git',
  commitId: 'a'.repeat(40),
  dockerfilePath: 'images/runner/Dockerfile',
};
const IMAGE = `registry.internal/svc-runner@sha256:${'c'.repeat(64)}`;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'svc-repo-address-'));
  await writeFile(
    join(dir, 'catalog.json'),
    JSON.stringify({ images: [{ source: catalogSource, image: IMAGE }] }),
  );
  await writeFile(join(dir, 'runner.mjs'), 'setInterval(() => {}, 1000);');
  t = await startTestManager({
    env: {
      SVC_REPO_URL_ALLOW_PREFIXES: MIRROR,
      SVC_IMAGE_CATALOG: join(dir, 'catalog.json'),
      SVC_RUNNER_ENTRY: join(dir, 'runner.mjs'),
    },
  });
  await t.configureProfile('builtin-a');
});
after(async () => {
  await t?.close();
  await rm(dir, { recursive: true, force: true });
});

const bundle = (extra: Record<string, unknown> = {}) => ({
  kind: 'gitbundle',
  repoUrl: 'https://git.example/org/bundle.git',
  ...extra,
});

/** Every place a repository address enters through the API. */
const REPO_PLACES: Array<[string, (url: string) => Record<string, unknown>]> = [
  ['workspaceRef.repoUrl', (url) => ({ workspaceRef: { kind: 'git', repoUrl: url } })],
  ['resourceBundleRef.repoUrl', (url) => ({ resourceBundleRef: bundle({ repoUrl: url }) })],
  [
    'resourceBundleRef.bundles[0].repoUrl',
    (url) => ({
      resourceBundleRef: bundle({ bundles: [{ repoUrl: url, subpath: 'a', target_path: 'a' }] }),
    }),
  ],
];

async function expectInvalid(
  method: string,
  url: string,
  body: unknown,
  what: string,
): Promise<void> {
  const res = await t.api(method, url, body);
  assert.equal(res.status, 400, `${what}: ${res.raw}`);
  assert.equal(res.body.failureKind, 'schema-invalid', `${what}: ${res.raw}`);
}

/** A run, a session and a queue task carrying the same run fields. */
async function everyRunRoute(fields: Record<string, unknown>, what: string, ok: boolean) {
  const attempts: Array<[string, unknown]> = [
    ['/api/v1/runs', runBody(fields)],
    [
      '/api/v1/sessions',
      { backendProfile: 'builtin-a', runBase: { ...SESSION_RUN_BASE, ...fields } },
    ],
    ['/api/v1/queue/tasks', taskBody(fields)],
  ];
  for (const [url, body] of attempts) {
    if (!ok) await expectInvalid('POST', url, body, `${url} ${what}`);
    else {
      const res = await t.api('POST', url, body);
      assert.equal(res.status, 201, `${url} ${what}: ${res.raw}`);
    }
  }
}

describe('repository addresses and paths a caller may name', () => {
  it('refuses local, helper, option-like and credentialed repository addresses everywhere', async () => {
    for (const [place, fields] of REPO_PLACES)
      for (const url of REFUSED_REPOS)
        await everyRunRoute(fields(url), `${place}=${JSON.stringify(url)}`, false);
  });

  it('accepts network addresses and the operator-configured mirror', async () => {
    for (const [place, fields] of REPO_PLACES)
      for (const url of ACCEPTED_REPOS) await everyRunRoute(fields(url), `${place}=${url}`, true);
  });

  it('refuses a bundle target, source or prompt path in .git or outside its root', async () => {
    for (const path of REFUSED_TARGETS) {
      const what = JSON.stringify(path);
      await everyRunRoute(
        { resourceBundleRef: bundle({ bundles: [{ subpath: 'tools', target_path: path }] }) },
        `target_path ${what}`,
        false,
      );
      await everyRunRoute(
        { resourceBundleRef: bundle({ bundles: [{ subpath: path, target_path: 'x' }] }) },
        `subpath ${what}`,
        false,
      );
      await everyRunRoute(
        {
          resourceBundleRef: bundle({
            promptRefs: [{ name: 'p', path, inject: 'thread-start', required: true }],
          }),
        },
        `prompt path ${what}`,
        false,
      );
    }
    // Names that merely contain "git" are fine.
    await everyRunRoute(
      {
        resourceBundleRef: bundle({
          bundles: [
            { subpath: '.github', target_path: '.github' },
            { subpath: 'tools', target_path: 'gitx/.gitkeep-dir' },
            { subpath: '.', target_path: '.' },
          ],
        }),
      },
      'git-like names',
      true,
    );
  });

  it('refuses a backendImageRef outside its build context as schema-invalid, not build-required', async () => {
    const run = await t.api('POST', '/api/v1/runs', runBody());
    assert.equal(run.status, 201, run.raw);
    const command = await t.api('POST', `/api/v1/runs/${run.body.runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'x' },
    });
    const jobs = `/api/v1/runs/${run.body.runId}/runner-jobs`;
    const job = (source: Record<string, unknown>) => ({
      commandId: command.body.commandId,
      dryRun: true,
      backendImageRef: { source: { ...catalogSource, ...source } },
    });
    for (const dockerfilePath of REFUSED_DOCKERFILES)
      await expectInvalid(
        'POST',
        jobs,
        job({ dockerfilePath }),
        `dockerfilePath ${JSON.stringify(dockerfilePath)}`,
      );
    for (const repoUrl of REFUSED_REPOS)
      await expectInvalid(
        'POST',
        jobs,
        job({ repoUrl }),
        `backendImageRef repoUrl ${JSON.stringify(repoUrl)}`,
      );
    // Inside the context but not catalogued: the build question, not a shape question.
    const miss = await t.api('POST', jobs, job({ dockerfilePath: './other/Dockerfile' }));
    assert.equal(miss.body.failureKind, 'build-required', miss.raw);
    const hit = await t.api('POST', jobs, job({ dockerfilePath: './images/runner/Dockerfile' }));
    assert.equal(hit.status, 200, hit.raw);
    assert.equal(hit.body.image.ref, IMAGE);
  });

  it('takes only canonical URL prefixes ending in / as operator mirrors', () => {
    for (const bad of [
      'file:///srv/git',
      'file:///srv/../git/',
      'not a url',
      'file:///srv/%2e%2e/',
    ])
      assert.throws(
        () => loadConfig({ SVC_REPO_URL_ALLOW_PREFIXES: bad }),
        /SVC_REPO_URL_ALLOW_PREFIXES/,
        bad,
      );
    assert.deepEqual(loadConfig({ SVC_REPO_URL_ALLOW_PREFIXES: MIRROR }).repoUrlPrefixes, [MIRROR]);
  });
});
