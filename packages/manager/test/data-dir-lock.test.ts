import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ensureTestTag, freePort, waitForHttp, waitForNoTaggedProcesses } from '@svc/testkit';
import { DataDirLockedError, lockDataDir } from '../src/store/data-dir-lock.js';

const SERVER = join(import.meta.dirname, '../dist/server.js');
const tag = ensureTestTag();

interface Exited {
  code: number | null;
  stderr: string;
  ms: number;
}

const children: ChildProcess[] = [];

/** `npm start` on the embedded store under `dataDir`, on a free port. */
async function startEmbedded(dataDir: string) {
  const port = await freePort();
  const env: NodeJS.ProcessEnv = { ...process.env, SVC_DATA_DIR: dataDir, PORT: String(port) };
  delete env['DATABASE_URL'];
  delete env['SVC_API_KEY'];
  const started = Date.now();
  const child = spawn(process.execPath, [SERVER], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(child);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<Exited>((resolve) =>
    child.once('exit', (code) => resolve({ code, stderr, ms: Date.now() - started })),
  );
  return { child, exited, url: `http://127.0.0.1:${port}` };
}

const stop = async (child: ChildProcess, exited: Promise<Exited>, signal: NodeJS.Signals) => {
  if (child.exitCode === null) child.kill(signal);
  return exited;
};

describe('embedded data directory lock', () => {
  const dirs: string[] = [];
  after(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
    assert.deepEqual(await waitForNoTaggedProcesses(tag), []);
  });

  it('lets one manager hold the directory; a second exits at once naming it and the holder', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'svc-lock-'));
    dirs.push(dataDir);
    const first = await startEmbedded(dataDir);
    await waitForHttp(`${first.url}/health/readiness`, 180_000);
    const second = await startEmbedded(dataDir);
    const refused = await Promise.race([
      second.exited,
      new Promise<null>((r) => setTimeout(() => r(null), 30_000)),
    ]);
    if (!refused) await stop(second.child, second.exited, 'SIGKILL');
    assert.ok(refused, 'the second manager did not exit');
    assert.equal(refused.code, 4, refused.stderr);
    assert.match(refused.stderr, new RegExp(`${join(dataDir, 'pglite')} is in use`));
    assert.match(refused.stderr, new RegExp(`pid ${first.child.pid} on host `));
    // It never listened, and the holder is untouched.
    const health = await fetch(`${first.url}/health/readiness`);
    assert.equal(health.status, 200);

    // A holder killed outright leaves its lock behind; the next manager takes it over.
    const killed = await stop(first.child, first.exited, 'SIGKILL');
    assert.equal(killed.code, null);
    assert.ok(existsSync(join(dataDir, 'pglite.lock')));
    const third = await startEmbedded(dataDir);
    await waitForHttp(`${third.url}/health/readiness`, 180_000);
    const lock = JSON.parse(readFileSync(join(dataDir, 'pglite.lock'), 'utf8'));
    assert.equal(lock.pid, third.child.pid);
    const done = await stop(third.child, third.exited, 'SIGTERM');
    assert.equal(done.code, 0, done.stderr);
    assert.equal(existsSync(join(dataDir, 'pglite.lock')), false, 'released on shutdown');
  });

  it('trusts a lock from another host while it is refreshed, and takes it over once stale', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'svc-lock-remote-'));
    dirs.push(dir);
    const dataDir = join(dir, 'pglite');
    const foreign = { pid: 1, host: 'other-node-7', startedAt: '2026-01-01T00:00:00Z' };
    await writeFile(`${dataDir}.lock`, JSON.stringify(foreign));
    await assert.rejects(lockDataDir(dataDir), (error: unknown) => {
      assert.ok(error instanceof DataDirLockedError);
      assert.match(error.message, /pid 1 on host other-node-7/);
      assert.match(error.message, new RegExp(`${dataDir} is in use`));
      return true;
    });
    const old = new Date(Date.now() - 120_000);
    await utimes(`${dataDir}.lock`, old, old);
    const lock = await lockDataDir(dataDir);
    assert.equal(JSON.parse(readFileSync(lock.file, 'utf8')).pid, process.pid);
    // A live lock refuses a second claim, even from the same process.
    await assert.rejects(lockDataDir(dataDir), DataDirLockedError);
    await lock.release();
    assert.equal(existsSync(lock.file), false);
  });

  it('takes over a lock whose pid is gone or was reused by another process', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'svc-lock-dead-'));
    dirs.push(dir);
    const dataDir = join(dir, 'pglite');
    const child = spawn(process.execPath, ['-e', '0']);
    await new Promise((r) => child.once('exit', r));
    const { hostname } = await import('node:os');
    await writeFile(
      `${dataDir}.lock`,
      JSON.stringify({ pid: child.pid, host: hostname(), startedAt: 'x', processStart: '1' }),
    );
    await (await lockDataDir(dataDir)).release();
    // A live pid with another start time is a recycled pid, not the holder.
    await writeFile(
      `${dataDir}.lock`,
      JSON.stringify({ pid: process.ppid, host: hostname(), startedAt: 'x', processStart: '1' }),
    );
    const lock = await lockDataDir(dataDir);
    await lock.release();
  });
});
