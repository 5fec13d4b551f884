import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { assertBuilt } from './cli-helpers.js';

/**
 * Every program of the repository (each `bin` of each package.json, and tools/) answers
 * `--help` and `--version` at once, exit 0, without starting anything: no port opened, no
 * request sent, no store created. Run as a user would: the built binaries, a bare environment
 * whose URLs all point at a loopback listener that counts what reaches it.
 */
const ROOT = join(import.meta.dirname, '..', '..', '..');

interface Program {
  name: string;
  path: string;
  version: string;
}

function programs(): Program[] {
  const found: Program[] = [];
  const rootVersion = (
    JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }
  ).version;
  for (const dir of readdirSync(join(ROOT, 'packages'))) {
    const file = join(ROOT, 'packages', dir, 'package.json');
    let pkg: { version: string; bin?: Record<string, string> };
    try {
      pkg = JSON.parse(readFileSync(file, 'utf8'));
    } catch {
      continue;
    }
    for (const [name, path] of Object.entries(pkg.bin ?? {}))
      found.push({ name, path: join(ROOT, 'packages', dir, path), version: pkg.version });
  }
  for (const name of readdirSync(join(ROOT, 'tools'))) {
    const path = join(ROOT, 'tools', name);
    if (statSync(path).isFile() && (statSync(path).mode & 0o111) !== 0)
      found.push({ name, path, version: rootVersion });
  }
  return found;
}

let listener: Server;
let requests = 0;
let port: number;
let dataDir: string;

before(async () => {
  assertBuilt();
  listener = createServer((_req, res) => {
    requests += 1;
    res.end('{}');
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  port = (listener.address() as AddressInfo).port;
  dataDir = mkdtempSync(join(tmpdir(), 'svc-program-flags-'));
});
after(async () => {
  await new Promise((resolve) => listener.close(resolve));
  rmSync(dataDir, { recursive: true, force: true });
});

/** A free loopback port, given to each program as PORT: it must never accept a connection. */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const free = (probe.address() as AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));
  return free;
}

const accepts = (p: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(p, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

async function runFlag(program: Program, flag: string) {
  const own = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, [program.path, flag], {
    cwd: dataDir,
    env: {
      PATH: process.env['PATH'] ?? '',
      HOST: '127.0.0.1',
      PORT: String(own),
      SVC_DATA_DIR: join(dataDir, 'store'),
      SVC_MANAGER_URL: url,
      AUTH_BROKER_URL: url,
      SVC_AUTH_BROKER_URL: url,
      SVC_RUN_ID: 'run-program-flags',
      SVC_API_KEY: 'svc-canary-program-flags-key-77a1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  let listened = false;
  const started = Date.now();
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
  const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  let done = false;
  void exited.then(() => (done = true));
  while (!done) {
    if (await accepts(own)) listened = true;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  clearTimeout(killer);
  return { code: await exited, stdout, stderr, listened, ms: Date.now() - started };
}

describe('every program answers --help and --version without starting anything', () => {
  const all = programs();
  it('finds the programs', () => {
    const names = all.map((p) => p.name).sort();
    for (const expected of [
      'apply_patch',
      'auth-broker',
      'queue',
      'run-manager',
      'runner',
      'runs',
      'sessions',
      'tran',
      'trans',
    ])
      assert.ok(names.includes(expected), `${expected} in ${names.join(', ')}`);
  });

  for (const program of all) {
    it(program.name, async () => {
      const help = await runFlag(program, '--help');
      assert.equal(help.code, 0, `${program.name} --help: ${help.stderr}`);
      assert.ok(help.stdout.includes(program.name), `${program.name} --help names it`);
      assert.match(help.stdout, /usage|Usage|"usage"/);
      assert.equal(help.listened, false, `${program.name} --help opened its port`);

      const version = await runFlag(program, '--version');
      assert.equal(version.code, 0, `${program.name} --version: ${version.stderr}`);
      // One format for every program: its name, a space, its version.
      assert.equal(version.stdout, `${program.name} ${program.version}\n`);
      assert.equal(version.listened, false, `${program.name} --version opened its port`);

      assert.equal(requests, 0, 'no request reached a manager or broker');
      assert.deepEqual(readdirSync(dataDir), [], 'no store or file created');
    });
  }
});

describe('a service or client program refuses an argument it does not take', () => {
  const services = programs().filter((p) =>
    ['run-manager', 'runner', 'auth-broker', 'queue', 'runs', 'sessions'].includes(p.name),
  );
  it('finds them', () => assert.equal(services.length, 6));
  for (const program of services)
    for (const flag of ['-v', '--port=9000', 'serve-now'])
      it(`${program.name} ${flag}: exit 2, says which argument, starts nothing`, async () => {
        const before = requests;
        const result = await runFlag(program, flag);
        assert.equal(result.code, 2, `${program.name} ${flag}: ${result.stdout}${result.stderr}`);
        assert.ok(
          (result.stderr + result.stdout).includes(flag.split('=')[0]!),
          `${program.name} names ${flag}: ${result.stderr}${result.stdout}`,
        );
        assert.equal(result.listened, false, `${program.name} ${flag} opened its port`);
        assert.equal(requests, before, 'no request reached a manager or broker');
      });
});
