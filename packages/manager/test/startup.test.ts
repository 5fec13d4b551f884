import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  createTestStore,
  ensureTestTag,
  freePort,
  waitForNoTaggedProcesses,
  type TestStore,
} from '@svc/testkit';
import { managerTemplate } from './helpers.js';

/**
 * `run-manager` started as a person would: on a terminal it says each slow step and where the
 * API and the console are; without one its output stays JSON log lines; a taken port fails at
 * once, before the store is opened, with a hint about PORT.
 */
const SERVER = join(import.meta.dirname, '../dist/server.js');
const tag = ensureTestTag();
let store: TestStore;
let dataDir: string;

before(async () => {
  store = await createTestStore(managerTemplate);
  dataDir = await mkdtemp(join(tmpdir(), 'svc-startup-'));
});
after(async () => {
  await store?.drop();
  await rm(dataDir, { recursive: true, force: true });
  assert.deepEqual(await waitForNoTaggedProcesses(tag), []);
});

interface Started {
  output: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
  stop(): Promise<number | null>;
}

const quote = (arg: string) => `'${arg.replaceAll("'", `'\\''`)}'`;

/** The built manager; `tty` runs it under util-linux `script` (a real terminal). */
function start(env: Record<string, string>, tty: boolean): Started {
  const fullEnv = {
    PATH: process.env['PATH'] ?? '',
    SVC_TEST_TAG: tag,
    HOST: '127.0.0.1',
    SVC_DATA_DIR: dataDir,
    SVC_SCHEDULER: 'off',
    ...env,
  };
  const argv = [process.execPath, SERVER];
  const child = tty
    ? spawn('script', ['-qec', argv.map(quote).join(' '), '/dev/null'], {
        env: fullEnv,
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      })
    : spawn(argv[0]!, argv.slice(1), {
        env: fullEnv,
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
  const killer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), 120_000);
  void exited.then(() => clearTimeout(killer));
  return {
    output: () => stdout.replaceAll('\r\n', '\n'),
    stderr: () => stderr,
    exited,
    async stop() {
      if (child.exitCode === null) process.kill(-child.pid!, 'SIGINT');
      return exited;
    },
  };
}

async function until(what: string, check: () => boolean, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const storeEnv = (): Record<string, string> =>
  store.kind === 'postgres' ? { DATABASE_URL: store.url } : { SVC_DATA_DIR: store.dataDir };

describe('run-manager start-up as a person sees it', () => {
  it('on a terminal: the store, the migrations, the address and the console URL', async () => {
    const port = await freePort();
    const manager = start({ ...storeEnv(), PORT: String(port) }, true);
    const url = `http://127.0.0.1:${port}`;
    await until('the console line', () => manager.output().includes('web console:'));
    const lines = manager.output().split('\n');
    const progress = lines.filter((l) => l.startsWith('run-manager: '));
    assert.match(progress[0] ?? '', /^run-manager: opening (PostgreSQL|the embedded store)/);
    assert.ok(
      progress.some((l) => /schema (up to date|migrations)/.test(l)),
      progress.join('\n'),
    );
    assert.ok(progress.includes(`run-manager: listening on ${url}`), progress.join('\n'));
    assert.ok(progress.includes(`run-manager: web console: ${url}/`), progress.join('\n'));
    assert.equal((await fetch(`${url}/health/live`)).status, 200);
    assert.equal(await manager.stop(), 0);
  });

  it('without a terminal: JSON log lines only, listening said in the log', async () => {
    const port = await freePort();
    const manager = start({ ...storeEnv(), PORT: String(port) }, false);
    await until('the listening log line', () => manager.output().includes('run manager listening'));
    const lines = manager.output().trim().split('\n');
    for (const line of lines) assert.doesNotThrow(() => JSON.parse(line), line);
    assert.equal(manager.stderr(), '');
    assert.equal(await manager.stop(), 0);
  });

  it('a port in use fails at once, before the store opens, and names PORT', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as { port: number }).port;
    const embedded = join(dataDir, 'embedded');
    try {
      const started = Date.now();
      const manager = start({ SVC_DATA_DIR: embedded, PORT: String(port) }, false);
      const code = await manager.exited;
      assert.equal(code, 5, manager.stderr());
      assert.ok(Date.now() - started < 15_000, 'it did not wait for the store');
      assert.match(manager.stderr(), new RegExp(`127\\.0\\.0\\.1:${port} is already in use`));
      assert.match(manager.stderr(), /PORT=\d+/);
      // Nothing was created: the embedded store was never opened.
      assert.ok(!existsSync(embedded) || readdirSync(embedded).length === 0);
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });
});
