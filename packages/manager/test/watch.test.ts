import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freePort, realPostgresAvailable, waitForHttp } from '@svc/testkit';
import { runBody, startTestManager, TestRunner, type TestManager } from './helpers.js';
import { openStream } from './sse-client.js';

let t: TestManager;
before(async () => {
  t = await startTestManager({
    listen: true,
    env: { SVC_STREAM_HEARTBEAT_MS: '200', SVC_MAX_WATCHES: '3', SVC_CLIENT_WAIT_MAX_MS: '5000' },
  });
  await t.configureProfile('builtin-a');
});
after(() => t.close());

const ev = (key: string) => ({ key, category: 'backend_status', name: 'test', data: { key } });

async function claimedRun(runnerId: string) {
  const run = await t.api('POST', '/api/v1/runs', runBody());
  const runner = new TestRunner(t, runnerId, run.body.runId);
  assert.equal((await runner.claim()).status, 200);
  const lastSeq: number = (await t.api('GET', `/api/v1/runs/${run.body.runId}`)).body.lastSeq;
  return { runId: run.body.runId as string, runner, lastSeq };
}

const later = (ms: number, fn: () => Promise<unknown>) =>
  new Promise((r) => setTimeout(r, ms)).then(fn);

describe('events long-poll', () => {
  it('returns as soon as an event past afterSeq is appended', async () => {
    const { runId, runner, lastSeq } = await claimedRun('rnr-lpoll001');
    const started = Date.now();
    const [page] = await Promise.all([
      t.api('GET', `/api/v1/runs/${runId}/events?afterSeq=${lastSeq}&waitMs=8000`),
      later(300, () => runner.append([ev('late')])),
    ]);
    const elapsed = Date.now() - started;
    assert.equal(page.status, 200, page.raw);
    assert.deepEqual(
      page.body.events.map((e: any) => e.data.key),
      ['late'],
    );
    assert.ok(elapsed >= 250 && elapsed < 6000, `woke after ${elapsed} ms (wait was 8000)`);
  });

  it('answers at once when events exist, and empty when the wait ends', async () => {
    const { runId, lastSeq } = await claimedRun('rnr-lpoll002');
    let started = Date.now();
    const existing = await t.api('GET', `/api/v1/runs/${runId}/events?afterSeq=0&waitMs=8000`);
    assert.ok(existing.body.events.length > 0);
    assert.ok(Date.now() - started < 1000);
    started = Date.now();
    const empty = await t.api('GET', `/api/v1/runs/${runId}/events?afterSeq=${lastSeq}&waitMs=400`);
    const elapsed = Date.now() - started;
    assert.equal(empty.status, 200);
    assert.deepEqual(empty.body.events, []);
    assert.ok(elapsed >= 350, `waited ${elapsed} ms`);
  });

  it('does not wait on a terminal run, whose log is complete', async () => {
    const run = await t.api('POST', '/api/v1/runs', runBody());
    await t.api('POST', `/api/v1/runs/${run.body.runId}/cancel`, {});
    const lastSeq = (await t.api('GET', `/api/v1/runs/${run.body.runId}`)).body.lastSeq;
    const started = Date.now();
    const page = await t.api(
      'GET',
      `/api/v1/runs/${run.body.runId}/events?afterSeq=${lastSeq}&waitMs=8000`,
    );
    assert.equal(page.status, 200);
    assert.deepEqual(page.body.events, []);
    assert.ok(Date.now() - started < 1000);
  });

  it('refuses a wait that is not a bounded non-negative integer', async () => {
    const { runId } = await claimedRun('rnr-lpoll003');
    for (const waitMs of ['-1', 'soon', '300001', '1.5']) {
      const page = await t.api('GET', `/api/v1/runs/${runId}/events?waitMs=${waitMs}`);
      assert.equal(page.status, 400, `${waitMs}: ${page.raw}`);
      assert.equal(page.body.failureKind, 'schema-invalid');
    }
    const missing = await t.api('GET', '/api/v1/runs/run-doesnotexist00/events?waitMs=1000');
    assert.equal(missing.status, 404);
  });
});

describe('result waitMs', () => {
  it('returns when the command becomes terminal, on both result routes', async () => {
    const { runId, runner } = await claimedRun('rnr-result01');
    const command = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'hello' },
    });
    const commandId = command.body.commandId;
    await runner.poll();
    assert.equal((await runner.ack(commandId)).status, 200);
    const notYet = await t.api('GET', `/api/v1/runs/${runId}/result?waitMs=300`);
    assert.equal(notYet.body.terminalStatus, null);
    const started = Date.now();
    const [runResult, commandResult] = await Promise.all([
      t.api('GET', `/api/v1/runs/${runId}/result?commandId=${commandId}&waitMs=8000`),
      t.api('GET', `/api/v1/runs/${runId}/commands/${commandId}/result?waitMs=8000`),
      later(300, async () => {
        await runner.append([
          {
            key: 'reply',
            commandId,
            category: 'assistant_message',
            data: { text: 'hi', final: true, replyAuthority: true },
          },
        ]);
        assert.equal((await runner.finish(commandId, 'completed')).status, 200);
      }),
    ]);
    const elapsed = Date.now() - started;
    for (const result of [runResult, commandResult]) {
      assert.equal(result.status, 200, result.raw);
      assert.equal(result.body.terminalStatus, 'completed');
      assert.equal(result.body.reply, 'hi');
    }
    assert.ok(elapsed >= 250 && elapsed < 6000, `woke after ${elapsed} ms`);
  });
});

describe('Server-Sent Events stream', () => {
  it('streams existing and new events with id = seq, heartbeats, and ends on terminal', async () => {
    const { runId, runner } = await claimedRun('rnr-stream01');
    const stream = await openStream(`${t.manager.url}/api/v1/runs/${runId}/events/stream`);
    try {
      assert.equal(stream.status, 200);
      assert.match(stream.contentType, /^text\/event-stream/);
      const first = await stream.next((m) => m.event === 'message');
      assert.equal(first.id, '1');
      assert.equal(JSON.parse(first.data).seq, 1);
      await runner.append([ev('streamed')]);
      const streamed = await stream.next((m) => m.data.includes('"streamed"'));
      assert.equal(String(JSON.parse(streamed.data).seq), streamed.id);
      await stream.nextComment();
      await t.api('POST', `/api/v1/runs/${runId}/cancel`, {});
      const end = await stream.next((m) => m.event === 'end');
      assert.equal(JSON.parse(end.data).state, 'cancelled');
      await stream.closed;
      const ids = stream.messages.filter((m) => m.event === 'message').map((m) => Number(m.id));
      assert.deepEqual(
        ids,
        ids.map((_, i) => i + 1),
        'every seq once, in order',
      );
    } finally {
      stream.close();
    }
  });

  it('says what the run is doing: activity and the last turn, at the start and on every change', async () => {
    const { runId, runner } = await claimedRun('rnr-stream04');
    const stream = await openStream(`${t.manager.url}/api/v1/runs/${runId}/events/stream`);
    const runFrames = () =>
      stream.messages.filter((m) => m.event === 'run').map((m) => JSON.parse(m.data));
    try {
      const opened = JSON.parse((await stream.next((m) => m.event === 'run')).data);
      assert.deepEqual(opened, { runId, state: 'claimed', activity: 'idle', lastCommand: null });
      const command = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
        type: 'turn',
        payload: { prompt: 'hello' },
      });
      const commandId: string = command.body.commandId;
      await stream.next((m) => m.event === 'run' && JSON.parse(m.data).lastCommand !== null);
      await runner.poll();
      assert.equal((await runner.ack(commandId)).status, 200);
      await runner.append([{ ...ev('working'), commandId }]);
      await stream.next((m) => m.event === 'run' && m.data.includes('"turn-active"'));
      const failed = await runner.finish(commandId, 'failed', {
        failureKind: 'backend-failed',
        message: 'provider answered 401',
      });
      assert.equal(failed.status, 200, failed.raw);
      const after = JSON.parse(
        (await stream.next((m) => m.event === 'run' && m.data.includes('"failed"'))).data,
      );
      assert.equal(after.activity, 'idle');
      assert.equal(after.lastCommand.commandId, commandId);
      assert.equal(after.lastCommand.failureKind, 'backend-failed');
      assert.equal(after.lastCommand.message, 'provider answered 401');
      // The frame comes after the events it describes: the turn's terminal_status is before it.
      const at = stream.messages.findIndex((m) => m.event === 'run' && m.data.includes('"failed"'));
      assert.ok(
        stream.messages.slice(0, at).some((m) => m.data.includes('"terminal_status"')),
        'the terminal_status event precedes the run frame that reports it',
      );
      const frames = runFrames();
      for (let i = 1; i < frames.length; i++)
        assert.notDeepEqual(frames[i], frames[i - 1], 'a run frame only when something changed');
      await t.api('POST', `/api/v1/runs/${runId}/cancel`, {});
      const end = JSON.parse((await stream.next((m) => m.event === 'end')).data);
      assert.equal(end.activity, 'closed');
      assert.equal(end.lastCommand.commandId, commandId);
    } finally {
      stream.close();
    }
  });

  it('resumes after Last-Event-ID', async () => {
    const { runId, runner, lastSeq } = await claimedRun('rnr-stream02');
    await runner.append([ev('a'), ev('b'), ev('c')]);
    const stream = await openStream(`${t.manager.url}/api/v1/runs/${runId}/events/stream`, {
      'last-event-id': String(lastSeq + 1),
    });
    try {
      const first = await stream.next((m) => m.event === 'message');
      assert.equal(Number(first.id), lastSeq + 2);
      assert.equal(JSON.parse(first.data).data.key, 'b');
    } finally {
      stream.close();
    }
    const bad = await fetch(`${t.manager.url}/api/v1/runs/${runId}/events/stream`, {
      headers: { 'last-event-id': 'seven' },
    });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as any).failureKind, 'schema-invalid');
    const missing = await fetch(`${t.manager.url}/api/v1/runs/run-doesnotexist00/events/stream`);
    assert.equal(missing.status, 404);
    assert.equal(((await missing.json()) as any).failureKind, 'not-found');
  });

  it('bounds the open streams of a process', async () => {
    const { runId } = await claimedRun('rnr-stream03');
    const url = `${t.manager.url}/api/v1/runs/${runId}/events/stream`;
    const streams = await Promise.all([openStream(url), openStream(url), openStream(url)]);
    try {
      const refused = await fetch(url);
      assert.equal(refused.status, 429);
      assert.equal(refused.headers.get('retry-after'), '2');
      assert.equal(((await refused.json()) as any).failureKind, 'capacity-exceeded');
    } finally {
      for (const s of streams) s.close();
    }
    // A closed stream frees its place.
    for (let i = 0; i < 50; i++) {
      const again = await openStream(url);
      again.close();
      if (again.status === 200) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail('closed streams did not free their places');
  });
});

describe('wake-ups across manager replicas', { skip: !(await realPostgresAvailable()) }, () => {
  let child: ChildProcess;
  let base: string;
  let dataDir: string;
  before(async () => {
    assert.equal(t.store.kind, 'postgres');
    dataDir = await mkdtemp(join(tmpdir(), 'svc-replica-'));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    child = spawn(process.execPath, [join(import.meta.dirname, '../dist/server.js')], {
      env: {
        ...process.env,
        DATABASE_URL: t.store.kind === 'postgres' ? t.store.url : '',
        PORT: String(port),
        HOST: '127.0.0.1',
        SVC_DATA_DIR: dataDir,
        LOG_LEVEL: 'warn',
        SVC_SCHEDULER: 'off',
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    // A loaded machine starts a manager process slowly (tool probes at start).
    await waitForHttp(`${base}/health/readiness`, 90_000);
  });
  after(async () => {
    child.kill('SIGTERM');
    if (child.exitCode === null) await new Promise((r) => child.once('exit', r));
    await rm(dataDir, { recursive: true, force: true });
  });

  it('an append on one replica wakes a long-poll and a stream on the other', async () => {
    const { runId, runner, lastSeq } = await claimedRun('rnr-replica1');
    const stream = await openStream(`${base}/api/v1/runs/${runId}/events/stream`, {
      'last-event-id': String(lastSeq),
    });
    try {
      const started = Date.now();
      const [response] = await Promise.all([
        fetch(`${base}/api/v1/runs/${runId}/events?afterSeq=${lastSeq}&waitMs=8000`),
        later(300, () => runner.append([ev('from-replica-a')])),
      ]);
      const page = (await response.json()) as any;
      const elapsed = Date.now() - started;
      assert.deepEqual(
        page.events.map((e: any) => e.data.key),
        ['from-replica-a'],
      );
      assert.ok(elapsed < 6000, `woke after ${elapsed} ms`);
      const streamed = await stream.next((m) => m.data.includes('from-replica-a'));
      assert.equal(Number(streamed.id), lastSeq + 1);
    } finally {
      stream.close();
    }
  });
});
