import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_TOOLS_DIR, removeDir, tempDir, writeFiles } from './assembly-helpers.js';

/** The repository's own tools/apply_patch, run as the agent runs it: a child process. */
const TOOL = join(REPO_TOOLS_DIR, 'apply_patch');
let root: string;
let n = 0;

function dir(files: Parameters<typeof writeFiles>[1] = {}): string {
  const d = join(root, `case-${++n}`);
  mkdirSync(d, { recursive: true });
  writeFiles(d, files);
  return d;
}

function applyPatch(cwd: string, patch: string, via: 'argv' | 'stdin' = 'argv') {
  const result = spawnSync(TOOL, via === 'argv' ? [patch] : [], {
    cwd,
    input: via === 'stdin' ? patch : '',
    encoding: 'utf8',
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

const wrap = (body: string) => `*** Begin Patch\n${body}\n*** End Patch\n`;
const read = (d: string, p: string) => readFileSync(join(d, p), 'utf8');

before(async () => {
  root = await tempDir('patch');
});
after(() => removeDir(root));

describe('apply_patch', () => {
  it('adds, updates, moves and deletes files in one patch', () => {
    const d = dir({
      'src/app.py': 'def greet():\n    print("Hi")\n',
      'obsolete.txt': 'old\n',
      'keep.txt': 'a\nb\nc\n',
    });
    const { code, stdout, stderr } = applyPatch(
      d,
      wrap(
        [
          '*** Add File: hello/new.txt',
          '+Hello',
          '+world',
          '*** Update File: src/app.py',
          '*** Move to: src/main.py',
          '@@ def greet():',
          '-    print("Hi")',
          '+    print("Hello, world!")',
          '*** Delete File: obsolete.txt',
          '*** Update File: keep.txt',
          '@@',
          ' a',
          '-b',
          '+B',
          ' c',
        ].join('\n'),
      ),
    );
    assert.equal(code, 0, stderr);
    assert.equal(
      stdout,
      'Success. Updated the following files:\nA hello/new.txt\nM src/main.py\nM keep.txt\nD obsolete.txt\n',
    );
    assert.equal(read(d, 'hello/new.txt'), 'Hello\nworld\n');
    assert.equal(read(d, 'src/main.py'), 'def greet():\n    print("Hello, world!")\n');
    assert.ok(!existsSync(join(d, 'src/app.py')));
    assert.ok(!existsSync(join(d, 'obsolete.txt')));
    assert.equal(read(d, 'keep.txt'), 'a\nB\nc\n');
  });

  it('applies several chunks in order, anchors End of File, and inserts after a context line', () => {
    const d = dir({ 'f.txt': 'header\nx = 1\nmiddle\nx = 1\nlast\n' });
    const { code, stderr } = applyPatch(
      d,
      wrap(
        [
          '*** Update File: f.txt',
          '@@ header',
          '-x = 1',
          '+x = 2',
          '@@ middle',
          '+inserted after middle',
          '@@',
          '-x = 1',
          '-last',
          '+x = 3',
          '+final',
          '*** End of File',
        ].join('\n'),
      ),
    );
    assert.equal(code, 0, stderr);
    assert.equal(read(d, 'f.txt'), 'header\nx = 2\nmiddle\ninserted after middle\nx = 3\nfinal\n');
  });

  it('matches context leniently on whitespace and keeps CRLF line endings and file modes', () => {
    const d = dir({
      'crlf.txt': 'one\r\ntwo  \r\nthree\r\n',
      'run.sh': { content: '#!/bin/sh\necho old\n', mode: 0o755 },
    });
    const { code, stderr } = applyPatch(
      d,
      wrap(
        [
          '*** Update File: crlf.txt',
          '@@',
          ' one',
          '-two',
          '+TWO',
          '*** Update File: run.sh',
          '@@',
          '-echo old',
          '+echo new',
        ].join('\n'),
      ),
    );
    assert.equal(code, 0, stderr);
    assert.equal(read(d, 'crlf.txt'), 'one\r\nTWO\r\nthree\r\n');
    assert.equal(read(d, 'run.sh'), '#!/bin/sh\necho new\n');
    assert.equal(statSync(join(d, 'run.sh')).mode & 0o777, 0o755);
  });

  it('reads the patch from standard input, also wrapped in a heredoc', () => {
    const d = dir();
    assert.equal(applyPatch(d, wrap('*** Add File: a.txt\n+a'), 'stdin').code, 0);
    const heredoc = `<<'EOF'\n${wrap('*** Add File: b.txt\n+b')}EOF\n`;
    assert.equal(applyPatch(d, heredoc, 'stdin').code, 0);
    assert.deepEqual(readdirSync(d).sort(), ['a.txt', 'b.txt']);
  });

  it('refuses a hunk that does not apply, names the file, and changes nothing', () => {
    const d = dir({ 'a.txt': 'alpha\nbeta\n' });
    const { code, stderr } = applyPatch(
      d,
      wrap(
        [
          '*** Add File: created.txt',
          '+should not appear',
          '*** Update File: a.txt',
          '@@',
          '-gamma',
          '+delta',
        ].join('\n'),
      ),
    );
    assert.equal(code, 1);
    assert.match(stderr, /hunk does not apply to a\.txt/);
    assert.match(stderr, /gamma/);
    assert.equal(read(d, 'a.txt'), 'alpha\nbeta\n');
    assert.ok(!existsSync(join(d, 'created.txt')));
    const missingContext = applyPatch(
      d,
      wrap(['*** Update File: a.txt', '@@ no such context', '-beta', '+b'].join('\n')),
    );
    assert.equal(missingContext.code, 1);
    assert.match(missingContext.stderr, /cannot find context 'no such context' in a\.txt/);
  });

  it('refuses paths that escape the working directory, also through symlinks and moves', () => {
    const outside = dir({ 'target.txt': 'outside\n' });
    const d = dir({ 'a.txt': 'a\n', link: { symlink: outside } });
    const attempts = [
      ['../escape.txt', wrap('*** Add File: ../escape.txt\n+x')],
      ['/tmp/abs.txt', wrap('*** Add File: /tmp/abs.txt\n+x')],
      ['link/target.txt', wrap('*** Update File: link/target.txt\n@@\n-outside\n+pwned')],
      ['../moved.txt', wrap('*** Update File: a.txt\n*** Move to: ../moved.txt\n@@\n-a\n+b')],
    ];
    for (const [path, patch] of attempts) {
      const { code, stderr } = applyPatch(d, patch!);
      assert.equal(code, 1, path);
      assert.ok(stderr.includes(path!), stderr);
      assert.match(stderr, /escapes|relative/);
    }
    assert.equal(read(outside, 'target.txt'), 'outside\n');
    assert.equal(read(d, 'a.txt'), 'a\n');
    assert.ok(!existsSync(join(root, 'escape.txt')));
  });

  it('Add File never overwrites an existing file, and refuses control characters in names', () => {
    const d = dir({ 'keep.txt': 'original\n', 'old.txt': 'old\n' });
    const over = applyPatch(d, wrap('*** Add File: keep.txt\n+replaced'));
    assert.equal(over.code, 1);
    assert.match(over.stderr, /cannot add keep\.txt: the file exists/);
    assert.equal(read(d, 'keep.txt'), 'original\n', 'the file is untouched');
    for (const name of ['evil\tname.txt', 'bell\u0007.txt', 'esc\u001b[31m.txt', 'del\u007f.txt']) {
      const res = applyPatch(d, wrap(`*** Add File: ${name}\n+x`));
      assert.equal(res.code, 1, JSON.stringify(name));
      assert.match(res.stderr, /control character/);
      assert.ok(!existsSync(join(d, name)));
    }
    const moved = applyPatch(
      d,
      wrap('*** Update File: old.txt\n*** Move to: new\u0001.txt\n@@\n-old\n+new'),
    );
    assert.equal(moved.code, 1);
    assert.equal(read(d, 'old.txt'), 'old\n');
    // Deleting first, then adding in the same patch, is a deliberate replacement.
    const replaced = applyPatch(
      d,
      wrap('*** Delete File: keep.txt\n*** Add File: keep.txt\n+fresh'),
    );
    assert.equal(replaced.code, 0, replaced.stderr);
    assert.equal(read(d, 'keep.txt'), 'fresh\n');
  });

  it('explains malformed patches with the line, and usage errors with exit 2', () => {
    const d = dir({ 'a.txt': 'a\n' });
    const noBegin = applyPatch(d, '*** Add File: x\n+x\n*** End Patch');
    assert.equal(noBegin.code, 1);
    assert.match(noBegin.stderr, /first line must be '\*\*\* Begin Patch'/);
    const noEnd = applyPatch(d, '*** Begin Patch\n*** Add File: x\n+x');
    assert.match(noEnd.stderr, /last line must be '\*\*\* End Patch'/);
    const badHeader = applyPatch(d, wrap('*** Frobnicate File: a.txt'));
    assert.match(
      badHeader.stderr,
      /line 2: '\*\*\* Frobnicate File: a\.txt' is not a valid file operation/,
    );
    const badLine = applyPatch(d, wrap('*** Update File: a.txt\n@@\n-a\n+b\n@@\n!oops'));
    assert.equal(badLine.code, 1);
    assert.match(badLine.stderr, /unexpected line '!oops'/);
    const emptyUpdate = applyPatch(d, wrap('*** Update File: a.txt'));
    assert.match(emptyUpdate.stderr, /update of 'a\.txt' has no hunks/);
    const deleteMissing = applyPatch(d, wrap('*** Delete File: nope.txt'));
    assert.match(deleteMissing.stderr, /cannot delete nope\.txt: no such file/);
    const usage = spawnSync(TOOL, ['one', 'two'], { cwd: d, encoding: 'utf8' });
    assert.equal(usage.status, 2);
    assert.equal(read(d, 'a.txt'), 'a\n');
  });
});
