import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sha256Hex, type PromptRef } from '@svc/contracts';
import {
  checkRequiredSkills,
  composeTurnPrompt,
  discoverSkills,
  readPrompts,
  type SkillFact,
} from '../src/assembly/index.js';
import { frontMatter } from '../src/assembly/skills.js';
import { removeDir, serviceFailure, tempDir, writeFiles } from './assembly-helpers.js';

let root: string;
let n = 0;

function workspace(files: Parameters<typeof writeFiles>[1]): string {
  const dir = join(root, `ws-${++n}`);
  writeFiles(dir, files);
  return dir;
}

const prompt = (name: string, path: string, required = true): PromptRef => ({
  name,
  path,
  inject: 'thread-start',
  required,
});

before(async () => {
  root = await tempDir('skills');
});
after(() => removeDir(root));

describe('skills', () => {
  it('discovers .agents/skills/<name>/SKILL.md with bounded facts', async () => {
    const long = 'x'.repeat(500);
    const ws = workspace({
      '.agents/skills/alpha/SKILL.md':
        '---\nname: alpha\ndescription: "Alpha does one thing."\n---\nbody\n',
      '.agents/skills/alpha/scripts/a.sh': 'a\n',
      '.agents/skills/alpha/notes.md': 'n\n',
      '.agents/skills/long/SKILL.md': `---\ndescription: ${long}\n---\n`,
      '.agents/skills/renamed/SKILL.md':
        '---\nname: other-name\n---\n# Title\n\nFirst body line.\n',
      '.agents/skills/no-manifest/README.md': 'not a skill\n',
      '.agents/skills/stray.md': 'a file, not a skill dir\n',
    });
    const skills = await discoverSkills({ workspaceRoot: ws, sourceOf: () => 'skills' });
    assert.deepEqual(
      skills.skills.map((s) => s.name),
      ['alpha', 'long', 'renamed'],
    );
    const alpha = skills.skills[0]!;
    const manifest = readFileSync(join(ws, '.agents/skills/alpha/SKILL.md'));
    assert.deepEqual(alpha, {
      name: 'alpha',
      manifestPath: '.agents/skills/alpha/SKILL.md',
      sha256: sha256Hex(manifest),
      bytes: manifest.length,
      summary: 'Alpha does one thing.',
      fileCount: 3,
      sourceBundle: 'skills',
    });
    assert.equal(skills.skills[1]?.summary.length, 200);
    assert.equal(skills.skills[2]?.summary, 'First body line.');
    assert.equal(skills.skills[2]?.declaredName, 'other-name');
  });

  it('passes required skills with their hash and bytes, and blocks a missing one with details', async () => {
    const ws = workspace({
      '.agents/skills/alpha/SKILL.md': 'alpha\n',
      '.agents/skills/beta/SKILL.md': 'beta\n',
    });
    const skills = await discoverSkills({ workspaceRoot: ws });
    const ok = checkRequiredSkills([{ name: 'beta' }], skills);
    assert.deepEqual(ok, {
      required: ['beta'],
      found: [{ name: 'beta', sha256: sha256Hex('beta\n'), bytes: 5 }],
    });
    const error = await serviceFailure(() =>
      checkRequiredSkills([{ name: 'alpha' }, { name: 'gamma' }, { name: 'delta' }], skills),
    );
    assert.equal(error.failureKind, 'required-skill-unavailable');
    assert.deepEqual(error.details, {
      required: ['alpha', 'gamma', 'delta'],
      missing: ['gamma', 'delta'],
      available: ['alpha', 'beta'],
    });
  });

  it('refuses a skill directory that is a symlink out of the workspace', async () => {
    const ws = workspace({ '.agents/skills/evil': { symlink: '/etc' } });
    const error = await serviceFailure(() => discoverSkills({ workspaceRoot: ws }));
    assert.equal(error.failureKind, 'schema-invalid');
    assert.match(error.message, /\.agents\/skills\/evil/);
  });

  it('reads YAML-ish front matter, including folded blocks', () => {
    assert.deepEqual(frontMatter('---\nname: a\ndescription: >\n  one\n  two\n---\nrest'), {
      name: 'a',
      description: 'one two',
      body: 'rest',
    });
    assert.deepEqual(frontMatter('no front matter'), { body: 'no front matter' });
  });
});

describe('prompts', () => {
  it('reads prompts in order with facts and no text in the facts', async () => {
    const ws = workspace({ 'prompts/a.md': 'Prompt A\n', 'prompts/b.md': 'Prompt B\n' });
    const read = await readPrompts(ws, [
      prompt('b', 'prompts/b.md'),
      prompt('a', 'prompts/a.md', false),
    ]);
    assert.deepEqual(
      read.prompts.map((p) => p.name),
      ['b', 'a'],
    );
    assert.equal(read.totalBytes, 18);
    assert.deepEqual(read.facts[0], {
      name: 'b',
      path: 'prompts/b.md',
      sha256: sha256Hex('Prompt B\n'),
      bytes: 9,
      inject: 'thread-start',
      required: true,
      injected: false,
      status: 'loaded',
    });
    assert.ok(!JSON.stringify(read.facts).includes('Prompt B'));
  });

  it('blocks a missing required prompt and skips a missing optional one', async () => {
    const ws = workspace({ 'prompts/a.md': 'A\n' });
    const skipped = await readPrompts(ws, [
      prompt('a', 'prompts/a.md'),
      prompt('opt', 'prompts/none.md', false),
    ]);
    assert.equal(skipped.facts[1]?.status, 'skipped');
    assert.equal(skipped.facts[1]?.skipReason, 'missing');
    assert.equal(skipped.prompts.length, 1);
    const error = await serviceFailure(() => readPrompts(ws, [prompt('req', 'prompts/none.md')]));
    assert.equal(error.failureKind, 'prompt-unavailable');
    assert.deepEqual(error.details, { name: 'req', path: 'prompts/none.md' });
  });

  it('refuses a prompt over 64 KiB and an assembled total over 256 KiB, never truncating', async () => {
    const ws = workspace({
      'big.md': 'x'.repeat(64 * 1024 + 1),
      'exact.md': 'y'.repeat(64 * 1024),
      ...Object.fromEntries([1, 2, 3, 4].map((i) => [`p${i}.md`, 'z'.repeat(64 * 1024)])),
    });
    const single = await serviceFailure(() => readPrompts(ws, [prompt('big', 'big.md', false)]));
    assert.equal(single.failureKind, 'prompt-too-large');
    assert.equal(single.details?.['bytes'], 64 * 1024 + 1);
    assert.equal(single.details?.['capBytes'], 64 * 1024);
    const four = await readPrompts(
      ws,
      [1, 2, 3, 4].map((i) => prompt(`p${i}`, `p${i}.md`)),
    );
    assert.equal(four.totalBytes, 256 * 1024);
    const total = await serviceFailure(() =>
      readPrompts(ws, [
        ...[1, 2, 3, 4].map((i) => prompt(`p${i}`, `p${i}.md`)),
        prompt('exact', 'exact.md'),
      ]),
    );
    assert.equal(total.failureKind, 'prompt-too-large');
    assert.equal(total.details?.['scope'], 'assembled');
  });

  it('refuses prompt paths that escape: ../, absolute, and a symlink out of the checkout', async () => {
    const ws = workspace({ 'prompts/escape.md': { symlink: '/etc/hostname' }, 'ok.md': 'ok\n' });
    for (const path of ['../ok.md', '/etc/hostname', 'prompts/escape.md']) {
      const error = await serviceFailure(() => readPrompts(ws, [prompt('p', path)]));
      assert.equal(error.failureKind, 'schema-invalid', path);
      assert.ok(error.message.includes(path), error.message);
    }
  });
});

describe('initial prompt composition', () => {
  const skills: SkillFact[] = [
    {
      name: 'alpha',
      manifestPath: '.agents/skills/alpha/SKILL.md',
      sha256: 'a'.repeat(64),
      bytes: 86,
      summary: 'Alpha does one thing.',
      fileCount: 3,
      sourceBundle: 'skills',
    },
  ];
  const prompts = [
    {
      name: 'base',
      path: 'prompts/base.md',
      text: 'Use the standard entry points.',
      sha256: 'b'.repeat(64),
      bytes: 30,
    },
    {
      name: 'style',
      path: 'prompts/style.md',
      text: 'Never touch forbidden paths.\n',
      sha256: 'c'.repeat(64),
      bytes: 29,
    },
  ];
  const promptFacts = prompts.map((p) => ({
    name: p.name,
    path: p.path,
    sha256: p.sha256,
    bytes: p.bytes,
    inject: 'thread-start' as const,
    required: true,
    injected: false,
    status: 'loaded' as const,
  }));

  it('injects prompts in order, skill facts, then the user prompt, for a new thread', () => {
    const turn = composeTurnPrompt({
      userPrompt: 'Fix the bug.',
      threadId: null,
      prompts,
      skills,
      promptFacts,
    });
    assert.equal(turn.initialPromptInjected, true);
    assert.deepEqual(turn.injectedPromptNames, ['base', 'style']);
    assert.deepEqual(turn.injectedSkillNames, ['alpha']);
    const text = turn.text;
    const order = [
      'BEGIN DOMAIN PROMPT 1/2 "base"',
      'Use the standard entry points.',
      'BEGIN DOMAIN PROMPT 2/2 "style"',
      '.agents/skills/alpha/SKILL.md',
      'BEGIN USER PROMPT',
      'Fix the bug.',
      'END USER PROMPT',
    ];
    let at = -1;
    for (const piece of order) {
      const next = text.indexOf(piece);
      assert.ok(next > at, `${piece} out of order in:\n${text}`);
      at = next;
    }
    assert.match(
      text,
      /alpha: .*sha256 aaaaaaaaaaaa, 86 bytes, 3 files, source skills — Alpha does one thing\./,
    );
    assert.deepEqual(
      turn.promptFacts.map((f) => f.injected),
      [true, true],
    );
  });

  it('sends only the user prompt on a resume turn', () => {
    const turn = composeTurnPrompt({
      userPrompt: 'Continue.',
      threadId: 'thread-1',
      prompts,
      skills,
      promptFacts,
    });
    assert.equal(turn.text, 'Continue.');
    assert.equal(turn.initialPromptInjected, false);
    assert.deepEqual(turn.injectedPromptNames, []);
    assert.deepEqual(
      turn.promptFacts.map((f) => f.injected),
      [false, false],
    );
  });

  it('leaves a new thread without prompts or skills untouched', () => {
    const turn = composeTurnPrompt({ userPrompt: 'Hello.', prompts: [], skills: [] });
    assert.equal(turn.text, 'Hello.');
    assert.equal(turn.initialPromptInjected, false);
  });
});
