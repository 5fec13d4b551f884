import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ServiceError } from '@svc/contracts';
import {
  assembleRuntime,
  assembledPath,
  composeTurnPrompt,
  type AssembleOptions,
} from '../src/assembly/index.js';
import {
  bareCopy,
  commit,
  fileUrl,
  git,
  makeLabRepo,
  removeDir,
  serviceFailure,
  tempDir,
  type LabRepo,
} from './assembly-helpers.js';

let root: string;
let lab: LabRepo;
let bigPromptUrl: string;
let n = 0;

const promptRefs = [
  { name: 'base', path: 'prompts/base.md', inject: 'thread-start', required: true },
  { name: 'style', path: 'prompts/style.md', inject: 'thread-start', required: true },
  { name: 'optional', path: 'prompts/not-there.md', inject: 'thread-start', required: false },
];

function options(
  bundle: Record<string, unknown>,
  extra: Partial<AssembleOptions> = {},
): AssembleOptions {
  return {
    resourceBundleRef: { kind: 'gitbundle', repoUrl: lab.url, ...bundle },
    workspaceDir: join(root, `ws-${++n}`),
    basePath: '/usr/bin:/bin',
    ...extra,
  };
}

async function failsAt(opts: AssembleOptions, kind: string, step: string): Promise<ServiceError> {
  const error = await serviceFailure(assembleRuntime(opts), kind);
  assert.equal(error.details?.['assemblyStep'], step);
  return error;
}

before(async () => {
  root = await tempDir('assemble');
  lab = makeLabRepo(root);
  git(lab.work, 'checkout', '-q', '-b', 'big-prompt', lab.c3);
  commit(lab.work, { 'prompts/base.md': 'p'.repeat(64 * 1024 + 10) }, 'oversized prompt');
  git(lab.work, 'checkout', '-q', 'main');
  bigPromptUrl = fileUrl(bareCopy(lab.work, join(root, 'big.git')));
});
after(() => removeDir(root));

describe('assembleRuntime', () => {
  it('runs every step in order and returns a bounded, secret-free summary, prompts and PATH entries', async () => {
    const bin = join(root, 'resource-bin');
    const result = await assembleRuntime(
      options(
        { promptRefs, requiredSkills: [{ name: 'alpha' }] },
        { workspaceRef: { kind: 'git', branch: 'main' }, resourceBinPath: bin },
      ),
    );
    const { summary } = result;
    assert.equal(summary.refSource, 'workspaceRef.branch');
    assert.equal(summary.requestedRef, 'main');
    assert.equal(summary.materializedCommit, lab.c3);
    assert.equal(summary.checkoutTree, git(lab.bare, 'rev-parse', `${lab.c3}^{tree}`));
    assert.deepEqual(
      summary.timings.map((t) => t.step),
      [
        'validate',
        'materialize',
        'copy-bundles',
        'prepare-tools',
        'discover-skills',
        'check-required-skills',
        'read-prompts',
        'check-assembled-path',
        'summarize',
      ],
    );
    assert.deepEqual(
      summary.tools.tools.map((t) => t.name),
      ['apply_patch', 'hello', 'tran', 'trans'],
    );
    assert.deepEqual(readdirSync(bin).sort(), ['apply_patch', 'hello', 'tran', 'trans']);
    assert.deepEqual(result.pathEntries, [join(summary.workspace.root, 'tools'), bin]);
    assert.deepEqual(
      summary.assembledPathTools.map((t) => t.path),
      ['tran', 'trans', 'apply_patch'].map((name) => join(summary.workspace.root, 'tools', name)),
    );
    assert.deepEqual(summary.requiredSkills.required, ['alpha']);
    assert.equal(summary.requiredSkills.found[0]?.sha256, summary.skills.skills[0]?.sha256);
    assert.deepEqual(
      summary.prompts.facts.map((f) => [f.name, f.status]),
      [
        ['base', 'loaded'],
        ['style', 'loaded'],
        ['optional', 'skipped'],
      ],
    );
    assert.deepEqual(summary.workspace.escapingSymlinks, ['etc-link']);
    assert.equal(summary.valuesPrinted, false);
    const json = JSON.stringify(summary);
    assert.ok(json.length < 32 * 1024, `summary is ${json.length} bytes`);
    assert.ok(
      !json.includes('Always use the standard entry points'),
      'prompt text leaked into the summary',
    );
    assert.deepEqual(
      result.prompts.map((p) => p.name),
      ['base', 'style'],
    );

    // The shims run the workspace tools, which find their support modules beside them.
    const help = JSON.parse(execFileSync(join(bin, 'tran'), ['--help'], { encoding: 'utf8' }));
    assert.equal(help.tool, 'tran');
    const env = {
      PATH: assembledPath(result.pathEntries, `/usr/bin:/bin:${join(process.execPath, '..')}`),
    };
    const out = execFileSync(
      'apply_patch',
      ['*** Begin Patch\n*** Add File: made-by-patch.txt\n+ok\n*** End Patch\n'],
      {
        cwd: summary.workspace.root,
        env,
        encoding: 'utf8',
      },
    );
    assert.match(out, /A made-by-patch.txt/);
    assert.equal(readFileSync(join(summary.workspace.root, 'made-by-patch.txt'), 'utf8'), 'ok\n');

    const turn = composeTurnPrompt({
      userPrompt: 'Do the task.',
      prompts: result.prompts,
      skills: summary.skills.skills,
      promptFacts: summary.prompts.facts,
    });
    assert.ok(turn.text.includes('Always use the standard entry points.'));
    assert.deepEqual(turn.injectedPromptNames, ['base', 'style']);
    assert.deepEqual(
      turn.promptFacts.map((f) => f.injected),
      [true, true, false],
    );
  });

  it('fails infra-failed when the assembled PATH lacks tran, trans, apply_patch', async () => {
    const error = await failsAt(
      options({ commitId: lab.c1 }),
      'infra-failed',
      'check-assembled-path',
    );
    assert.deepEqual(error.details?.['missing'], ['tran', 'trans', 'apply_patch']);
  });

  it('blocks on a missing required skill with required, missing and available names', async () => {
    const error = await failsAt(
      options({ requiredSkills: [{ name: 'alpha' }, { name: 'omega' }] }),
      'required-skill-unavailable',
      'check-required-skills',
    );
    assert.deepEqual(error.details?.['missing'], ['omega']);
    assert.deepEqual(error.details?.['available'], ['alpha', 'beta']);
  });

  it('blocks on a missing required prompt and on an oversized one', async () => {
    await failsAt(
      options({
        promptRefs: [
          { name: 'gone', path: 'prompts/gone.md', inject: 'thread-start', required: true },
        ],
      }),
      'prompt-unavailable',
      'read-prompts',
    );
    const error = await failsAt(
      options({ repoUrl: bigPromptUrl, ref: 'big-prompt', promptRefs }),
      'prompt-too-large',
      'read-prompts',
    );
    assert.equal(error.details?.['name'], 'base');
  });

  it('reads prompts from a separate checkout dir when one is given', async () => {
    const result = await assembleRuntime(
      options(
        {
          promptRefs: promptRefs.slice(0, 1),
          bundles: [{ subpath: 'tools', target_path: 'tools' }],
        },
        {
          checkoutDir: join(root, `checkout-${n}`),
        },
      ),
    );
    assert.notEqual(result.summary.workspace.checkoutDir, result.summary.workspace.root);
    assert.equal(result.summary.bundles[0]?.inPlace, false);
    assert.equal(result.prompts[0]?.text, 'Always use the standard entry points.\n');
    assert.deepEqual(readdirSync(result.summary.workspace.root).sort(), ['tools']);
  });
});
