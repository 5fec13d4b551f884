import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { lstatSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ServiceError, sha256Hex } from '@svc/contracts';
import { prepareToolsDir } from '../src/assembly/index.js';
import { interpreterOf } from '../src/assembly/tools-dir.js';
import { removeDir, tempDir, writeFiles } from './assembly-helpers.js';

let root: string;
let n = 0;

function workspace(files: Parameters<typeof writeFiles>[1]): string {
  const dir = join(root, `ws-${++n}`);
  writeFiles(dir, files);
  return dir;
}

before(async () => {
  root = await tempDir('tools');
});
after(() => removeDir(root));

describe('workspace tools/', () => {
  it('makes top-level shebang files executable tools and leaves the rest as support files', async () => {
    const ws = workspace({
      'tools/hello': { content: '#!/bin/sh\necho "hello $1"\n', mode: 0o644 },
      'tools/pytool': { content: '#!/usr/bin/env -S python3 -u\nprint(1)\n', mode: 0o600 },
      'tools/notes.txt': 'not a tool\n',
      'tools/lib/helper.sh': '#!/bin/sh\n# nested: a support file, not a tool\n',
      'tools/.hidden': '#!/bin/sh\n',
    });
    const { summary, pathEntries } = await prepareToolsDir({
      workspaceRoot: ws,
      forbiddenRoots: [],
    });
    assert.deepEqual(
      summary.tools.map((t) => [t.name, t.path, t.interpreter]),
      [
        ['hello', 'tools/hello', 'sh'],
        ['pytool', 'tools/pytool', 'python3'],
      ],
    );
    const hello = summary.tools[0]!;
    assert.equal(hello.sha256, sha256Hex(readFileSync(join(ws, 'tools/hello'))));
    assert.equal(hello.bytes, statSync(join(ws, 'tools/hello')).size);
    assert.ok((statSync(join(ws, 'tools/hello')).mode & 0o111) !== 0);
    assert.ok((statSync(join(ws, 'tools/notes.txt')).mode & 0o111) === 0);
    assert.deepEqual(summary.supportFiles, {
      count: 3,
      bytes: summary.supportFiles.bytes,
      names: ['.hidden', 'lib', 'notes.txt'],
    });
    assert.deepEqual(pathEntries, [join(ws, 'tools')]);
    assert.equal(summary.shims, 0);
    // The tool runs from the search path entry.
    const out = execFileSync('hello', ['lab'], {
      env: { PATH: `${pathEntries.join(':')}:/usr/bin:/bin` },
      encoding: 'utf8',
    });
    assert.equal(out, 'hello lab\n');
  });

  it('writes only shims to the resource bin path, never copies, and removes stale shims', async () => {
    // A quote in the workspace path must survive the shim's quoting.
    const ws = join(root, "it's a workspace");
    writeFiles(ws, {
      'tools/hello': { content: '#!/bin/sh\necho "hi from $(basename "$0")" "$@"\n', mode: 0o755 },
      'tools/bad name': { content: '#!/bin/sh\necho unsafe\n', mode: 0o755 },
      'tools/data.json': '{}\n',
    });
    const bin = join(root, `bin-${n}`);
    writeFiles(bin, {
      stale:
        '#!/bin/sh\n# svc-resource-shim: runs the workspace tool, never a copy of it\nexec /gone "$@"\n',
      'image-tool': '#!/bin/sh\necho from the image\n',
    });
    const { summary, pathEntries } = await prepareToolsDir({
      workspaceRoot: ws,
      resourceBinPath: bin,
      forbiddenRoots: [],
    });
    assert.deepEqual(readdirSync(bin).sort(), ['hello', 'image-tool']);
    assert.deepEqual(summary.skipped, [{ name: 'bad name', reason: 'unsafe-name' }]);
    const shim = readFileSync(join(bin, 'hello'), 'utf8');
    assert.match(shim, /^#!\/bin\/sh\n/);
    assert.ok(shim.includes(`exec '${join(ws, 'tools/hello').replace("'", "'\\''")}' "$@"`));
    assert.notEqual(shim, readFileSync(join(ws, 'tools/hello'), 'utf8'));
    assert.ok(!readdirSync(bin).includes('data.json'));
    assert.equal(summary.shims, 1);
    assert.equal(summary.tools[0]?.shimPath, join(bin, 'hello'));
    assert.deepEqual(pathEntries, [join(ws, 'tools'), bin]);
    // Through the shim the original tool runs, with its arguments.
    assert.equal(
      execFileSync(join(bin, 'hello'), ['a b'], { encoding: 'utf8' }),
      'hi from hello a b\n',
    );
  });

  it('refuses a tool symlink that resolves outside the workspace, and a bin path on a forbidden root', async () => {
    const ws = workspace({ 'tools/evil': { symlink: '/bin/sh' } });
    await assert.rejects(
      prepareToolsDir({ workspaceRoot: ws, forbiddenRoots: [] }),
      (e: unknown) => {
        assert.ok(e instanceof ServiceError);
        assert.equal(e.failureKind, 'schema-invalid');
        assert.match(e.message, /tools\/evil/);
        return true;
      },
    );
    assert.ok(!lstatSync('/bin/sh').isDirectory());
    const ok = workspace({ 'tools/hello': '#!/bin/sh\n' });
    const secret = join(root, 'secret');
    await assert.rejects(
      prepareToolsDir({
        workspaceRoot: ok,
        resourceBinPath: join(secret, 'bin'),
        forbiddenRoots: [secret],
      }),
      (e: unknown) =>
        e instanceof ServiceError &&
        e.failureKind === 'schema-invalid' &&
        /forbidden root/.test(e.message),
    );
  });

  it('reports no tools and no path entry when tools/ is absent', async () => {
    const ws = workspace({ 'README.md': 'x\n' });
    const { summary, pathEntries } = await prepareToolsDir({
      workspaceRoot: ws,
      forbiddenRoots: [],
    });
    assert.equal(summary.present, false);
    assert.deepEqual(pathEntries, []);
  });

  it('names the interpreter of common shebang forms', () => {
    assert.equal(interpreterOf('#!/usr/bin/env node'), 'node');
    assert.equal(interpreterOf('#!/usr/bin/env -S deno run -A'), 'deno');
    assert.equal(interpreterOf('#!/usr/bin/env LANG=C bash'), 'bash');
    assert.equal(interpreterOf('#!/bin/bash -e'), 'bash');
    assert.equal(interpreterOf('#!'), 'unknown');
  });
});
