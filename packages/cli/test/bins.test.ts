import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

/**
 * Every bin a workspace package declares is one `npm ci` links: the lock file names it (npm ci
 * installs from the lock alone), the installed tree has it, and `npx <bin> --version` from the
 * repository's root answers as a user pasting the README would see it.
 */
const ROOT = join(import.meta.dirname, '..', '..', '..');

interface Manifest {
  name: string;
  version: string;
  bin?: Record<string, string>;
}

const readJson = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8')) as T;
/** `./bin/x.js` and `bin/x.js` name the same file. */
const normal = (bins: Record<string, string> | undefined) =>
  Object.fromEntries(
    Object.entries(bins ?? {})
      .map(([name, path]) => [name, path.replace(/^\.\//, '')])
      .sort(([a], [b]) => a!.localeCompare(b!)),
  );

const root = readJson<{ workspaces: string[] }>(join(ROOT, 'package.json'));
const lock = readJson<{ packages: Record<string, { bin?: Record<string, string> }> }>(
  join(ROOT, 'package-lock.json'),
);
const workspaces = root.workspaces.map((dir) => ({
  dir,
  manifest: readJson<Manifest>(join(ROOT, dir, 'package.json')),
}));
const bins = workspaces.flatMap(({ manifest }) =>
  Object.keys(manifest.bin ?? {}).map((name) => ({ name, version: manifest.version })),
);

function npx(args: string[]) {
  const child = spawn('npx', ['--no-install', ...args], {
    cwd: ROOT,
    env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? ROOT },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    }),
  );
}

describe('every declared bin is installed by npm ci and runs through npx', () => {
  it('declares the programs the README uses', () => {
    const names = bins.map((b) => b.name).sort();
    for (const expected of ['auth-broker', 'queue', 'run-manager', 'runner', 'runs', 'sessions'])
      assert.ok(names.includes(expected), `${expected} in ${names.join(', ')}`);
  });

  for (const { dir, manifest } of workspaces)
    it(`${manifest.name}: the lock file lists exactly its bins`, () => {
      assert.deepEqual(
        normal(lock.packages[dir]?.bin),
        normal(manifest.bin),
        `package-lock.json is out of date for ${dir}: run npm install and commit the lock`,
      );
    });

  for (const { name, version } of bins)
    it(`npx ${name} --version`, async () => {
      assert.ok(
        existsSync(join(ROOT, 'node_modules', '.bin', name)),
        `node_modules/.bin/${name} is missing: npm ci did not link it`,
      );
      const result = await npx([name, '--version']);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout, `${name} ${version}\n`);
    });
});
