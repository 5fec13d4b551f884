import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { assertBuilt } from './cli-helpers.js';

/**
 * `--help` lists every environment variable the program reads: the names its configuration
 * sources read (string literals and `env.NAME` reads) each appear in what `--help` prints.
 * A variable added to a config.ts without its line in the help fails here.
 */
const ROOT = join(import.meta.dirname, '..', '..', '..');

const PROGRAMS: { name: string; bin: string; sources: string[]; only?: RegExp }[] = [
  {
    name: 'run-manager',
    bin: 'packages/manager/bin/run-manager.js',
    sources: ['packages/manager/src/config.ts'],
  },
  {
    name: 'runner',
    bin: 'packages/runner/bin/runner.js',
    sources: ['packages/runner/src/config.ts'],
  },
  {
    name: 'auth-broker',
    bin: 'packages/auth-broker/bin/auth-broker.js',
    sources: [
      'packages/auth-broker/src/config.ts',
      'packages/auth-broker/src/adapter/environment.ts',
    ],
  },
  ...['queue', 'sessions', 'runs'].map((name) => ({
    name,
    bin: `packages/cli/bin/${name}.js`,
    sources: ['packages/cli/src/config.ts', 'packages/cli/src/colour.ts'],
  })),
  ...['tran', 'trans'].map((name) => ({
    name,
    bin: `tools/${name}`,
    sources: ['tools/lib/platform-ssh.mjs'],
    // Its other upper-case literals are error codes (ETIMEDOUT), not variables.
    only: /^PLATFORM_/,
  })),
];

/** Names a source reads: quoted UPPER_CASE literals and `env.NAME` property reads. */
function variablesOf(sources: string[], only = /./): string[] {
  const names = new Set<string>();
  for (const source of sources) {
    const text = readFileSync(join(ROOT, source), 'utf8');
    for (const m of text.matchAll(/['"`]([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)['"`]/g))
      if (m[1]!.length > 2) names.add(m[1]!);
    for (const m of text.matchAll(/\benv\.([A-Z][A-Z0-9_]{2,})/g)) names.add(m[1]!);
  }
  return [...names].filter((name) => only.test(name)).sort();
}

function help(bin: string): Promise<{ code: number | null; stdout: string }> {
  const child = spawn(process.execPath, [join(ROOT, bin), '--help'], {
    env: { PATH: process.env['PATH'] ?? '' },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  let stdout = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout })));
}

describe('--help lists every variable the program reads', () => {
  for (const program of PROGRAMS)
    it(program.name, async () => {
      assertBuilt();
      const wanted = variablesOf(program.sources, program.only);
      assert.ok(wanted.length > 0, `found the variables of ${program.name}`);
      const { code, stdout } = await help(program.bin);
      assert.equal(code, 0);
      const listed = new Set(stdout.match(/[A-Z][A-Z0-9_]{2,}/g) ?? []);
      const missing = wanted.filter((name) => !listed.has(name));
      assert.deepEqual(missing, [], `${program.name} --help does not list ${missing.join(', ')}`);
    });

  it('run-manager names both ways of giving the API key', async () => {
    const { stdout } = await help('packages/manager/bin/run-manager.js');
    assert.match(stdout, /SVC_API_KEY\s/);
    assert.match(stdout, /SVC_API_KEY_FILE/);
  });
});
