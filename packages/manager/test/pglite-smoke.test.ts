import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { PGlite } from '@electric-sql/pglite';
import {
  ensureTestTag,
  freePort,
  waitForHttp,
  waitForNoTaggedProcesses,
  type TestStore,
} from '@svc/testkit';
import { LocalSecretStore } from '../src/index.js';
import { runBody, startTestManager, TestRunner } from './helpers.js';
import { createSession, sendToSession, startE2E, waitForCommand } from './e2e-helpers.js';

const tag = ensureTestTag();

/** The embedded default store (PGlite under the data dir), as `npm start` uses it. */
describe('embedded PGlite store', () => {
  const dirs: string[] = [];
  after(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
    assert.deepEqual(await waitForNoTaggedProcesses(tag), []);
  });

  it('serves a whole turn and keeps it across a restart on the same data dir', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'svc-pglite-smoke-'));
    dirs.push(dataDir);
    const store: TestStore = { kind: 'pglite', dataDir, drop: () => Promise.resolve() };
    let t = await startTestManager({ store, dataDir });
    await t.configureProfile('builtin-a');
    const run = await t.api('POST', '/api/v1/runs', runBody());
    assert.equal(run.status, 201, run.raw);
    const runId = run.body.runId;
    const command = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'hi' },
      idempotencyKey: 'k1',
    });
    const runner = new TestRunner(t, 'rnr-pglite01', runId);
    assert.equal((await runner.claim()).status, 200);
    assert.equal((await runner.poll()).body.commands[0].state, 'delivered');
    await runner.ack(command.body.commandId);
    await runner.append([
      {
        key: 'm',
        commandId: command.body.commandId,
        category: 'assistant_message',
        data: { text: 'hello from pglite', final: true, replyAuthority: true },
      },
    ]);
    await runner.finish(command.body.commandId, 'completed');
    const health = await t.api('GET', '/health');
    assert.equal(health.body.store.kind, 'pglite');
    assert.equal(health.body.migrations.upToDate, true);
    await t.close();

    t = await startTestManager({ store, dataDir });
    try {
      const result = await t.api('GET', `/api/v1/runs/${runId}/result`);
      assert.equal(result.body.completed, true);
      assert.equal(result.body.reply, 'hello from pglite');
      const again = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
        type: 'turn',
        payload: { prompt: 'hi' },
        idempotencyKey: 'k1',
      });
      assert.equal(
        again.body.commandId,
        command.body.commandId,
        'idempotency survives the restart',
      );
    } finally {
      await t.close();
    }
  });

  it('runs a session send and a queue dispatch with the real runner and agent on the embedded store', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'svc-pglite-e2e-'));
    dirs.push(dataDir);
    const store: TestStore = { kind: 'pglite', dataDir, drop: () => Promise.resolve() };
    const e = await startE2E({ store, dataDir });
    try {
      e.provider.enqueue(
        { kind: 'text', text: 'embedded store answer' },
        { kind: 'text', text: 'queue task answer' },
      );
      const session = await createSession(e.t);
      const sent = await sendToSession(e.t, session.sessionId, { prompt: 'hello' });
      assert.equal(
        (await waitForCommand(e.t, sent.run.runId, sent.command.commandId)).state,
        'completed',
      );
      assert.equal(
        (await e.t.api('GET', `/api/v1/runs/${sent.run.runId}/result`)).body.reply,
        'embedded store answer',
      );

      const task = await e.t.api('POST', '/api/v1/queue/tasks', {
        tenantId: 'tenant-a',
        projectId: 'proj-1',
        queue: 'smoke',
        title: 'one task',
        backendProfile: 'builtin-a',
        providerId: 'openai',
        workspaceRef: { kind: 'opaque' },
        payload: { prompt: 'do the task' },
      });
      assert.equal(task.status, 201, task.raw);
      const dispatched = await e.t.api(
        'POST',
        `/api/v1/queue/tasks/${task.body.taskId}/dispatch`,
        {},
      );
      assert.equal(dispatched.status, 201, dispatched.raw);
      const { runId, commandId } = dispatched.body.attempt;
      assert.equal((await waitForCommand(e.t, runId, commandId)).state, 'completed');
      const refreshed = await e.t.api(
        'POST',
        `/api/v1/queue/tasks/${task.body.taskId}/refresh`,
        {},
      );
      assert.equal(refreshed.body.state, 'completed', refreshed.raw);
      // The commander's page is one call of a PL/pgSQL function: the embedded store runs it too.
      const view = await e.t.api('GET', '/api/v1/queue/commander?queue=smoke&readerId=smoke');
      assert.equal(view.status, 200, view.raw);
      assert.deepEqual(
        view.body.items.map((item: any) => [item.reason, item.task.taskId]),
        [['unread', task.body.taskId]],
      );
      assert.equal(view.body.items[0].task.latestAttempt.state, 'completed');
    } finally {
      await e.close();
    }
  });

  it('schedules submitted tasks by itself on the embedded store, as configured by default', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'svc-pglite-sched-'));
    dirs.push(dataDir);
    const store: TestStore = { kind: 'pglite', dataDir, drop: () => Promise.resolve() };
    const e = await startE2E({
      store,
      dataDir,
      env: { SVC_SCHEDULER: 'on', SVC_SCHEDULER_SCAN_MS: '1000' },
    });
    try {
      e.provider.enqueue(
        { kind: 'text', text: 'first scheduled answer' },
        { kind: 'text', text: 'second scheduled answer' },
      );
      const ids: string[] = [];
      for (const title of ['first', 'second']) {
        const task = await e.t.api('POST', '/api/v1/queue/tasks', {
          tenantId: 'tenant-a',
          projectId: 'proj-1',
          queue: 'smoke',
          title,
          backendProfile: 'builtin-a',
          providerId: 'openai',
          workspaceRef: { kind: 'opaque' },
          payload: { prompt: `do the ${title} task` },
        });
        assert.equal(task.status, 201, task.raw);
        ids.push(task.body.taskId as string);
      }
      // No dispatch and no refresh: the scheduler claims, launches and settles both.
      const deadline = Date.now() + 60_000;
      let states: string[] = [];
      while (Date.now() < deadline) {
        states = await Promise.all(
          ids.map(async (id) => (await e.t.api('GET', `/api/v1/queue/tasks/${id}`)).body.state),
        );
        if (states.every((state) => state === 'completed')) break;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      assert.deepEqual(states, ['completed', 'completed']);
      for (const id of ids) {
        const task = (await e.t.api('GET', `/api/v1/queue/tasks/${id}`)).body;
        assert.equal(task.counters.attempts, 1, JSON.stringify(task.counters));
      }
    } finally {
      await e.close();
    }
  });

  it('starts the built server with no configuration but a data dir (what npm start does)', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'svc-npm-start-'));
    dirs.push(dataDir);
    await new LocalSecretStore(join(dataDir, 'secrets')).put('svc-v01-provider-builtin-a', {
      'auth.json': Buffer.from('{}'),
      'config.toml': Buffer.from(''),
    });
    const port = await freePort();
    const env = {
      PATH: process.env.PATH ?? '',
      SVC_TEST_TAG: tag,
      SVC_DATA_DIR: dataDir,
      PORT: String(port),
    };
    const child = spawn(process.execPath, [join(import.meta.dirname, '../dist/server.js')], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    try {
      await waitForHttp(`http://127.0.0.1:${port}/health/readiness`, 60_000);
      const created = await fetch(`http://127.0.0.1:${port}/api/v1/runs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(runBody()),
      });
      assert.equal(created.status, 201);
      assert.match(output, /run manager listening/);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  });

  it('stops with a clear message when a migration fails, and serves nothing', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'svc-bad-migration-'));
    dirs.push(dataDir);
    // A table in the way makes the first migration fail.
    const pglite = new PGlite(join(dataDir, 'pglite'));
    await pglite.exec('CREATE TABLE runs (unexpected integer)');
    await pglite.close();
    const port = await freePort();
    const child = spawn(process.execPath, [join(import.meta.dirname, '../dist/server.js')], {
      env: {
        PATH: process.env.PATH ?? '',
        SVC_TEST_TAG: tag,
        SVC_DATA_DIR: dataDir,
        PORT: String(port),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise((r) => child.once('exit', r));
    assert.equal(code, 3);
    assert.match(
      stderr,
      /schema migration 0001-core failed: .*runs.*already exists.*did not start/,
    );
    await assert.rejects(fetch(`http://127.0.0.1:${port}/health`));
  });

  it('refuses to start, with a clear message, when the configuration is invalid', async () => {
    const child = spawn(process.execPath, [join(import.meta.dirname, '../dist/server.js')], {
      env: {
        PATH: process.env.PATH ?? '',
        SVC_TEST_TAG: tag,
        PORT: 'nope',
        SVC_DEPLOYMENT_MODE: 'cloud',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise((r) => child.once('exit', r));
    assert.equal(code, 2);
    assert.match(stderr, /PORT must be an integer/);
    assert.match(stderr, /SVC_DEPLOYMENT_MODE must be one of local, runtime/);
  });
});
