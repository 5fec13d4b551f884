import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import type { ServiceError } from '@svc/contracts';
import { assembleRuntime, type AssembleOptions } from '../src/assembly/index.js';
import {
  commit,
  bareCopy,
  fileUrl,
  initRepo,
  makeExtraRepo,
  makeLabRepo,
  removeDir,
  serviceFailure,
  tempDir,
  type LabRepo,
} from './assembly-helpers.js';

let root: string;
let lab: LabRepo;
let extra: { url: string; commit: string };
let hostileUrl: string;
let forbidden: string;
let n = 0;

function options(
  bundleRef: Record<string, unknown>,
  extraOptions: Partial<AssembleOptions> = {},
): AssembleOptions {
  return {
    resourceBundleRef: { kind: 'gitbundle', ...bundleRef },
    workspaceDir: join(root, `ws-${++n}`),
    forbiddenRoots: [forbidden],
    assembledPathTools: [],
    ...extraOptions,
  };
}

async function refused(
  opts: AssembleOptions,
  kind: string,
  pattern: RegExp,
): Promise<ServiceError> {
  const error = await serviceFailure(assembleRuntime(opts), kind);
  assert.match(error.message, pattern);
  return error;
}

before(async () => {
  root = await tempDir('bundles');
  lab = makeLabRepo(root);
  extra = makeExtraRepo(root);
  forbidden = join(root, 'secret-projection');
  mkdirSync(forbidden);
  writeFileSync(join(forbidden, 'token'), 'projected\n');
  const hostile = initRepo(join(root, 'hostile-work'));
  commit(
    hostile,
    {
      'shared/ok.txt': 'ok\n',
      'shared/passwd': { symlink: '/etc/passwd' },
      'docs/guide.md': 'guide\n',
      'docs-link': { symlink: 'docs' },
      'prompts/escape.md': { symlink: '/etc/hostname' },
      'app-link': { symlink: forbidden },
      'etc-link': { symlink: '/etc' },
      'gitlinks/hooks': { symlink: '../.git/hooks' },
      'gitlinks/repo': { symlink: '../.git' },
    },
    'hostile',
  );
  hostileUrl = fileUrl(bareCopy(hostile, join(root, 'hostile.git')));
});
after(() => removeDir(root));

describe('bundle copy', () => {
  it('applies the default lab bundles: tools in place, skills whole into .agents/skills', async () => {
    const { summary } = await assembleRuntime(options({ repoUrl: lab.url }));
    const ws = summary.workspace.root;
    assert.deepEqual(
      summary.bundles.map((b) => [b.name, b.subpath, b.target_path, b.defaulted, b.inPlace]),
      [
        ['tools', 'tools', 'tools', true, true],
        ['skills', 'skills', '.agents/skills', true, false],
      ],
    );
    assert.equal(
      readFileSync(join(ws, '.agents/skills/alpha/scripts/run.sh'), 'utf8'),
      '#!/bin/sh\necho alpha\n',
    );
    assert.ok(existsSync(join(ws, '.agents/skills/alpha/reference.md')));
    assert.equal(summary.bundles[1]?.files, 4);
    // The exec bit of a copied script survives.
    assert.ok((lstatSync(join(ws, '.agents/skills/alpha/scripts/run.sh')).mode & 0o100) !== 0);
  });

  it('applies only the default bundles whose subpath exists', async () => {
    const { summary } = await assembleRuntime(options({ repoUrl: extra.url }));
    assert.deepEqual(
      summary.bundles.map((b) => b.name),
      ['skills'],
    );
    const none = await assembleRuntime(options({ repoUrl: lab.url, bundles: [] }));
    assert.deepEqual(none.summary.bundles, []);
    assert.ok(!existsSync(join(none.summary.workspace.root, '.agents')));
  });

  it('copies items from a second repository, another ref and a pinned commit via scratch checkouts', async () => {
    const scratchDir = join(root, 'scratch');
    const { summary } = await assembleRuntime(
      options(
        {
          repoUrl: lab.url,
          bundles: [
            {
              name: 'gamma',
              repoUrl: extra.url,
              subpath: 'skills/gamma',
              target_path: '.agents/skills/gamma',
            },
            {
              name: 'settings',
              repoUrl: extra.url,
              ref: 'stable',
              subpath: 'config/settings.json',
              target_path: 'config/extra.json',
            },
            {
              name: 'feature-notes',
              ref: 'feature',
              subpath: 'FEATURE.md',
              target_path: 'notes/feature.md',
            },
            {
              name: 'old-readme',
              commitId: lab.c1,
              subpath: 'README.md',
              target_path: 'notes/readme-v1.md',
            },
            { name: 'alpha', subpath: 'skills/alpha', target_path: '.agents/skills/alpha' },
          ],
        },
        { scratchDir },
      ),
    );
    const ws = summary.workspace.root;
    const byName = new Map(summary.bundles.map((b) => [b.name, b]));
    assert.equal(byName.get('gamma')?.source, 'scratch');
    assert.equal(byName.get('gamma')?.materializedCommit, extra.commit);
    assert.equal(byName.get('gamma')?.kind, 'directory');
    assert.equal(byName.get('settings')?.kind, 'file');
    assert.equal(byName.get('settings')?.requestedRef, 'stable');
    assert.equal(readFileSync(join(ws, 'config/extra.json'), 'utf8'), '{"extra":"stable"}\n');
    assert.equal(byName.get('feature-notes')?.materializedCommit, lab.f1);
    assert.equal(readFileSync(join(ws, 'notes/feature.md'), 'utf8'), 'feature\n');
    assert.equal(byName.get('old-readme')?.materializedCommit, lab.c1);
    assert.equal(readFileSync(join(ws, 'notes/readme-v1.md'), 'utf8'), 'lab v1\n');
    assert.equal(byName.get('alpha')?.source, 'checkout');
    assert.equal(summary.materializedCommit, lab.c3);
    assert.ok(existsSync(join(ws, '.agents/skills/gamma/scripts/go.sh')));
    assert.deepEqual(
      summary.skills.skills.map((s) => [s.name, s.sourceBundle]),
      [
        ['alpha', 'alpha'],
        ['gamma', 'gamma'],
      ],
    );
    // Scratch checkouts are gone once assembly ends.
    assert.deepEqual(readdirSync(scratchDir), []);
  });

  it('follows a symlink that stays inside the checkout and copies its content', async () => {
    const { summary } = await assembleRuntime(
      options({
        repoUrl: hostileUrl,
        bundles: [{ subpath: 'docs-link', target_path: 'copied-docs' }],
      }),
    );
    const copied = join(summary.workspace.root, 'copied-docs/guide.md');
    assert.equal(readFileSync(copied, 'utf8'), 'guide\n');
    assert.ok(!lstatSync(join(summary.workspace.root, 'copied-docs')).isSymbolicLink());
  });
});

describe('path refusals', () => {
  const cases: Array<[string, Record<string, string>, RegExp]> = [
    ['subpath with ../', { subpath: '../lab-work', target_path: 'x' }, /subpath.*\.\./],
    ['absolute subpath', { subpath: '/etc', target_path: 'x' }, /subpath.*"\/etc"/],
    [
      'target_path with ../',
      { subpath: 'shared/ok.txt', target_path: 'a/../../outside' },
      /target_path/,
    ],
    [
      'absolute target_path',
      { subpath: 'shared/ok.txt', target_path: '/tmp/evil' },
      /target_path.*\/tmp\/evil/,
    ],
    [
      'subpath that is a symlink to /etc',
      { subpath: 'etc-link', target_path: 'x' },
      /"etc-link".*symlink escape/,
    ],
    [
      'subpath through a symlink to /etc',
      { subpath: 'etc-link/hostname', target_path: 'x' },
      /etc-link\/hostname/,
    ],
    [
      'directory holding an escaping symlink',
      { subpath: 'shared', target_path: 'x' },
      /shared\/passwd.*outside/,
    ],
    [
      'target through a symlink onto a forbidden root',
      { subpath: 'shared/ok.txt', target_path: 'app-link/token' },
      /forbidden root|outside/,
    ],
    [
      'target through a symlink to /etc',
      { subpath: 'shared/ok.txt', target_path: 'etc-link/evil' },
      /etc-link\/evil.*symlink escape/,
    ],
    ['source and target overlapping', { subpath: '.', target_path: 'nested/copy' }, /overlap/],
    [
      'target_path into .git',
      { subpath: 'shared/ok.txt', target_path: '.git/hooks/pre-commit' },
      /target_path.*\.git/,
    ],
    [
      'target_path into .git spelled in capitals',
      { subpath: 'shared/ok.txt', target_path: 'x/../.GIT/config' },
      /target_path/,
    ],
    [
      'target through a committed symlink into .git/hooks',
      { subpath: 'shared/ok.txt', target_path: 'gitlinks/hooks/pre-commit' },
      /gitlinks\/hooks\/pre-commit.*\.git/,
    ],
    [
      'target through a committed symlink onto .git',
      { subpath: 'shared', target_path: 'gitlinks/repo/info' },
      /gitlinks\/repo\/info.*\.git/,
    ],
    ['missing subpath', { subpath: 'no/such/thing', target_path: 'x' }, /does not exist/],
  ];
  for (const [label, item, pattern] of cases) {
    it(`refuses ${label}`, async () => {
      const error = await refused(
        options({ repoUrl: hostileUrl, bundles: [item] }),
        'schema-invalid',
        pattern,
      );
      assert.equal(error.details?.['assemblyStep'], pathStep(item));
      assert.equal(readFileSync(join(forbidden, 'token'), 'utf8'), 'projected\n');
      assert.deepEqual(readdirSync(forbidden), ['token']);
    });
  }

  it('refuses a workspace that is, lies inside or contains a forbidden root, or leaves the prefix', async () => {
    const bundle = { repoUrl: lab.url };
    await refused(options(bundle, { workspaceDir: forbidden }), 'schema-invalid', /forbidden root/);
    await refused(
      options(bundle, { workspaceDir: join(forbidden, 'ws') }),
      'schema-invalid',
      /forbidden root/,
    );
    await refused(options(bundle, { workspaceDir: root }), 'schema-invalid', /forbidden root/);
    await refused(options(bundle, { workspaceDir: '/app/workspace' }), 'schema-invalid', /\/app/);
    await refused(
      options(bundle, { workspacePrefix: join(root, 'allowed') }),
      'schema-invalid',
      /not under the allowed workspace prefix/,
    );
    await refused(
      options(bundle, { checkoutDir: join(forbidden, 'checkout') }),
      'schema-invalid',
      /checkout .* forbidden root/,
    );
    assert.ok(!existsSync(join(forbidden, 'ws')));
  });

  it('refuses legacy and mirror fields in the bundle reference', async () => {
    for (const field of [
      'gitMirror',
      'toolAliases',
      'skillRefs',
      'workspaceFiles',
      'subdir',
      'sparsePaths',
    ]) {
      await refused(
        options({ repoUrl: lab.url, [field]: 'x' }),
        'schema-invalid',
        new RegExp(field),
      );
    }
    await refused(
      options({
        repoUrl: lab.url,
        bundles: [{ subpath: 'tools', target_path: 'tools', sparse: true }],
      }),
      'schema-invalid',
      /bundles\[0\]\.sparse/,
    );
  });
});

/** Lexical refusals happen while the reference is re-checked; the rest while copying. */
function pathStep(item: Record<string, string>): string {
  const lexical = [item['subpath'], item['target_path']].some(
    (p) =>
      p?.startsWith('/') ||
      p?.split('/').some((part) => part === '..' || part.toLowerCase() === '.git'),
  );
  return lexical ? 'validate' : 'copy-bundles';
}
