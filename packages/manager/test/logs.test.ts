import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  createTestStore,
  ensureTestTag,
  freePort,
  realPostgresAvailable,
  waitForHttp,
  waitForNoTaggedProcesses,
  type TestStore,
} from '@svc/testkit';
import { LocalSecretStore } from '../src/index.js';
import { managerTemplate, runBody } from './helpers.js';
import { call } from './http-call.js';

const skip = (await realPostgresAvailable()) ? false : 'needs a PostgreSQL server';
const SERVER = join(import.meta.dirname, '../dist/server.js');
const RUNNER = join(import.meta.dirname, '../../runner/bin/runner.js');
const tag = ensureTestTag();

interface Process {
  url: string;
  /** Everything the process wrote to stdout, once it has exited. */
  stopped(): Promise<string>;
}

/** A program with its stdout captured through a pipe, as a log collector reads it. */
function start(
  script: string,
  env: NodeJS.ProcessEnv,
): { output: () => string; exited: Promise<number | null>; stop: () => void } {
  const child = spawn(process.execPath, [script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => setImmediate(() => resolve(code))),
  );
  processes.push(child);
  return { output: () => output, exited, stop: () => child.kill('SIGINT') };
}
const processes: ReturnType<typeof spawn>[] = [];

/** Keys named `msg` at any depth of one raw JSON line (JSON.parse would keep only the last). */
function msgKeyCount(line: string): number {
  return line.match(/(?<!\\)"msg":/g)?.length ?? 0;
}

describe('logs people can read', { skip }, () => {
  let store: TestStore;
  let dir: string;

  async function startManager(env: Record<string, string>): Promise<Process> {
    const port = await freePort();
    const child = start(SERVER, {
      DATABASE_URL: store.kind === 'postgres' ? store.url : '',
      PORT: String(port),
      SVC_DATA_DIR: dir,
      SVC_SCHEDULER: 'off',
      SVC_API_KEY: '',
      ...env,
    });
    const url = `http://127.0.0.1:${port}`;
    await waitForHttp(`${url}/health/readiness`, 120_000);
    return {
      url,
      async stopped() {
        child.stop();
        await child.exited;
        return child.output();
      },
    };
  }

  before(async () => {
    store = await createTestStore(managerTemplate);
    dir = await mkdtemp(join(tmpdir(), 'svc-logs-'));
    await new LocalSecretStore(join(dir, 'secrets')).put('svc-v01-provider-builtin-a', {
      'auth.json': Buffer.from('{}'),
      'config.toml': Buffer.from(''),
    });
  });
  after(async () => {
    for (const p of processes) if (p.exitCode === null) p.kill('SIGKILL');
    await store.drop();
    await rm(dir, { recursive: true, force: true });
    assert.deepEqual(await waitForNoTaggedProcesses(tag), []);
  });

  it('logs runner polls and lease renewals at debug, one msg a line, a refusal with its reason; the runner logs in the same shape', async () => {
    const manager = await startManager({ LOG_LEVEL: 'debug' });
    const run = await call(manager.url, 'POST', '/api/v1/runs', runBody());
    assert.equal(run.status, 201, JSON.stringify(run.body));
    const runId = run.body.runId as string;
    const runnerId = 'rnr-logs-0001';
    const claim = await call(manager.url, 'POST', `/api/v1/runs/${runId}/claim`, {
      runnerId,
      mode: 'ordinary',
    });
    assert.equal(claim.status, 200, JSON.stringify(claim.body));
    const fenced = { 'x-lease-token': claim.body.leaseToken };
    const ROUNDS = 20;
    for (let i = 0; i < ROUNDS; i += 1) {
      const lease = await call(
        manager.url,
        'PATCH',
        `/api/v1/runs/${runId}/lease`,
        { runnerId },
        fenced,
      );
      assert.equal(lease.status, 200, JSON.stringify(lease.body));
      const poll = await call(
        manager.url,
        'GET',
        `/api/v1/runs/${runId}/commands?afterSeq=0&runnerId=${runnerId}&waitMs=0`,
        undefined,
        fenced,
      );
      assert.equal(poll.status, 200, JSON.stringify(poll.body));
    }
    // A refused request: the schema's reason must survive in the log line.
    const refused = await call(manager.url, 'POST', '/api/v1/runs', { tenantId: 'tenant-a' });
    assert.equal(refused.status, 400);

    // A real runner process on a run that has already ended: it registers, is refused the
    // claim, says so and exits 0.
    const ended = await call(manager.url, 'POST', '/api/v1/runs', runBody());
    assert.equal(ended.status, 201);
    const cancelled = await call(
      manager.url,
      'POST',
      `/api/v1/runs/${ended.body.runId}/cancel`,
      {},
    );
    assert.ok(cancelled.status < 300, JSON.stringify(cancelled.body));
    const jobDir = await mkdtemp(join(tmpdir(), 'svc-logs-job-'));
    const runner = start(RUNNER, {
      SVC_MANAGER_URL: manager.url,
      SVC_RUN_ID: ended.body.runId,
      SVC_RUNNER_ID: 'rnr-logs-0002',
      SVC_JOB_DIR: jobDir,
      LOG_LEVEL: 'info',
      LOG_FORMAT: '',
    });
    const exit = await Promise.race([
      runner.exited,
      new Promise<string>((r) => setTimeout(() => r('still running'), 60_000)),
    ]);
    assert.equal(exit, 0, runner.output());
    await rm(jobDir, { recursive: true, force: true });

    const output = await manager.stopped();
    const lines = output.split('\n').filter((l) => l.trim() !== '');
    assert.ok(lines.length > 4 * ROUNDS, `captured ${lines.length} lines`);
    const records = lines.map((line) => {
      assert.equal(msgKeyCount(line), 1, `one msg key: ${line}`);
      return JSON.parse(line) as Record<string, any>;
    });
    const routine = (r: Record<string, any>) =>
      /\/lease$|\/commands\?/.test(String(r['req']?.url ?? '')) ||
      (r['msg'] === 'request completed' &&
        records.some(
          (o) =>
            o['reqId'] === r['reqId'] && /\/lease$|\/commands\?/.test(String(o['req']?.url ?? '')),
        ));
    const routineLines = records.filter(routine);
    // Two request lines for each lease renewal and each poll, all at debug.
    assert.equal(routineLines.length, 4 * ROUNDS);
    assert.deepEqual([...new Set(routineLines.map((r) => r['level']))], [20]);
    const info = records.filter((r) => r['level'] === 30);
    const debug = records.filter((r) => r['level'] === 20);
    assert.ok(info.length < ROUNDS, `${info.length} info lines against ${debug.length} debug`);
    assert.ok(debug.length >= 4 * ROUNDS);
    // Other requests keep their info lines.
    assert.ok(info.some((r) => r['msg'] === 'request completed' && r['res']?.statusCode === 201));

    const refusal = records.find((r) => r['msg'] === 'request refused');
    assert.ok(refusal, 'the refusal is logged');
    assert.equal(refusal['level'], 40);
    assert.equal(refusal['failureKind'], 'schema-invalid');
    assert.match(String(refusal['reason']), /tenantId|required/);

    const runnerLines = runner
      .output()
      .split('\n')
      .filter((l) => l.trim() !== '');
    assert.ok(runnerLines.length >= 1, 'the runner logged');
    for (const line of runnerLines) {
      assert.equal(msgKeyCount(line), 1, line);
      const record = JSON.parse(line) as Record<string, unknown>;
      assert.equal(typeof record['level'], 'number', line);
      assert.equal(typeof record['time'], 'number', line);
      assert.equal(typeof record['msg'], 'string', line);
      assert.equal(record['runId'], ended.body.runId);
      assert.equal(record['runnerId'], 'rnr-logs-0002');
    }
    assert.ok(runnerLines.some((l) => JSON.parse(l).msg === 'not claiming the run'));
  });

  it('writes readable, coloured lines when asked for the pretty format', async () => {
    const manager = await startManager({
      LOG_LEVEL: 'info',
      LOG_FORMAT: 'pretty',
      FORCE_COLOR: '1',
    });
    const refused = await call(manager.url, 'GET', '/api/v1/runs/nope');
    assert.equal(refused.status, 400);
    const output = await manager.stopped();
    const lines = output.split('\n').filter((l) => l.trim() !== '');
    assert.ok(lines.length > 2);
    for (const line of lines) assert.ok(!line.startsWith('{'), `not JSON: ${line}`);
    assert.ok(output.includes('\u001b['), 'coloured');
    const refusal = lines.find((l) => l.includes('request refused'));
    assert.ok(refusal, output);
    assert.match(refusal, /WARN/);
    assert.match(refusal, /reason/);
    assert.ok(lines.some((l) => l.includes('run manager listening')));
  });
});
