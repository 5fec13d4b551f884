import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ServiceError } from '@svc/contracts';
import {
  DEFAULT_BASE_TOOLS,
  checkAssembledPath,
  checkWorkReady,
  detectWorkReady,
} from '../src/assembly/index.js';
import { parseVersion } from '@svc/contracts/work-ready';
import { REPO_TOOLS_DIR, removeDir, tempDir, writeFiles } from './assembly-helpers.js';

let root: string;
let bin: string;

before(async () => {
  root = await tempDir('ready');
  bin = join(root, 'bin');
  writeFiles(bin, {
    'fake-cli': { content: '#!/bin/sh\necho "fake-cli version 4.5.6 (build 7)"\n', mode: 0o755 },
    'fake-ssh': {
      content: '#!/bin/sh\necho "OpenSSH_9.2p1 Debian-2, OpenSSL 3.0.15" >&2\n',
      mode: 0o755,
    },
    'not-executable': { content: '#!/bin/sh\necho 1.0\n', mode: 0o644 },
  });
});
after(() => removeDir(root));

describe('work-ready summary', () => {
  it('lists tools with versions and paths, the dependency policy and valuesPrinted=false', async () => {
    const gitDir = dirname(
      execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim(),
    );
    const summary = await detectWorkReady({
      tools: [
        { name: 'git', versionArgs: ['--version'], required: true },
        { name: 'node', versionArgs: ['--version'], required: true },
        { name: 'fake-cli', versionArgs: ['--version'], required: true },
        { name: 'fake-ssh', versionArgs: ['-V'], required: false },
        { name: 'not-executable', versionArgs: ['--version'], required: false },
      ],
      // The running node first: the directory holding git may hold another node.
      pathEnv: `${bin}:${dirname(process.execPath)}:${gitDir}`,
    });
    assert.equal(summary.dependencyPolicy, 'preinstalled-image-only');
    assert.equal(summary.valuesPrinted, false);
    const byName = new Map(summary.tools.map((t) => [t.name, t]));
    assert.match(byName.get('git')?.version ?? '', /^\d+\.\d+/);
    assert.equal(byName.get('node')?.version, process.versions.node);
    assert.deepEqual(byName.get('fake-cli'), {
      name: 'fake-cli',
      version: '4.5.6',
      path: join(bin, 'fake-cli'),
      required: true,
      present: true,
    });
    assert.equal(byName.get('fake-ssh')?.version, '9.2p1');
    assert.equal(byName.get('not-executable')?.present, false);
    checkWorkReady(summary);
  });

  it('fails fast as infra-failed naming every missing required tool', async () => {
    const summary = await detectWorkReady({
      tools: [
        { name: 'fake-cli', versionArgs: ['--version'], required: true },
        { name: 'missing-one', versionArgs: ['--version'], required: true },
        { name: 'missing-two', versionArgs: ['--version'], required: true },
        { name: 'missing-optional', versionArgs: ['--version'], required: false },
      ],
      pathEnv: bin,
    });
    assert.throws(
      () => checkWorkReady(summary),
      (e: unknown) =>
        e instanceof ServiceError &&
        e.failureKind === 'infra-failed' &&
        /missing-one, missing-two/.test(e.message) &&
        JSON.stringify(e.details?.['missing']) === '["missing-one","missing-two"]',
    );
  });

  it('checks that tran, trans and apply_patch resolve on the assembled PATH', async () => {
    const found = await checkAssembledPath([REPO_TOOLS_DIR], '/usr/bin:/bin');
    assert.deepEqual(
      found.map((f) => [f.name, f.path]),
      ['tran', 'trans', 'apply_patch'].map((name) => [name, join(REPO_TOOLS_DIR, name)]),
    );
    await assert.rejects(
      checkAssembledPath([bin], '/nonexistent'),
      (e: unknown) =>
        e instanceof ServiceError &&
        e.failureKind === 'infra-failed' &&
        /tran, trans, apply_patch/.test(e.message),
    );
  });

  it('covers the base tools the spec names, all required by default', () => {
    assert.deepEqual(
      DEFAULT_BASE_TOOLS.map((t) => t.name),
      ['git', 'node', 'npm', 'ssh', 'curl', 'rg', 'kubectl', 'gh', 'jq', 'python3'],
    );
    assert.ok(DEFAULT_BASE_TOOLS.every((t) => t.required));
    assert.equal(parseVersion('Client Version: v1.31.2\nKustomize Version: v5.4.2'), '1.31.2');
    assert.equal(parseVersion('jq-1.6'), '1.6');
    assert.equal(parseVersion('no digits'), null);
  });
  it('probes a tool once per host while its file is unchanged, again once it changes', async () => {
    const dir = join(root, 'cached');
    const counter = join(root, 'cached-runs');
    writeFiles(dir, {
      'counted-cli': {
        content: `#!/bin/sh\necho run >> ${counter}\necho "counted-cli 1.2.3"\n`,
        mode: 0o755,
      },
    });
    const cacheFile = join(root, 'cache', 'work-ready.json');
    const tools = [{ name: 'counted-cli', versionArgs: ['--version'], required: true }];
    const runs = () => readFileSync(counter, 'utf8').trim().split('\n').length;
    const first = await detectWorkReady({ tools, pathEnv: dir, cacheFile });
    const second = await detectWorkReady({ tools, pathEnv: dir, cacheFile });
    assert.equal(first.tools[0]!.version, '1.2.3');
    assert.deepEqual(second.tools, first.tools, 'the same facts from the cache');
    assert.equal(runs(), 1, 'the second detection ran nothing');
    // A new build of the tool (another size and time) is probed afresh.
    writeFiles(dir, {
      'counted-cli': {
        content: `#!/bin/sh\necho run >> ${counter}\necho "counted-cli 2.0.0 (rebuilt)"\n`,
        mode: 0o755,
      },
    });
    const third = await detectWorkReady({ tools, pathEnv: dir, cacheFile });
    assert.equal(third.tools[0]!.version, '2.0.0');
    assert.equal(runs(), 2);
    // Without a cache file every detection probes.
    await detectWorkReady({ tools, pathEnv: dir });
    assert.equal(runs(), 3);
  });
});
