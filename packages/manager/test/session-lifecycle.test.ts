import assert from 'node:assert/strict';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  createSession,
  runBody,
  startTestManager,
  TestRunner,
  type TestManager,
} from './helpers.js';
import { fingerprint } from './queue-helpers.js';

let t: TestManager;
before(async () => {
  t = await startTestManager();
  await t.configureProfile('builtin-a');
  await t.configureProfile('builtin-c');
});
after(() => t.close());

let counter = 0;
const send = (id: string, body: Record<string, unknown>) =>
  t.api('POST', `/api/v1/sessions/${id}/send`, { runnerJob: false, ...body });
const storageKind = async (id: string) =>
  (await t.api('GET', `/api/v1/sessions/${id}/storage`)).body.storage_kind;
const removeVolume = (id: string) =>
  rm(join(t.dataDir, 'sessions', id), { recursive: true, force: true });

/** A session whose active turn is acknowledged by a live runner. */
async function activeTurn() {
  const session = await createSession(t);
  const sent = (await send(session.sessionId, { prompt: 'first' })).body;
  const runner = new TestRunner(t, `rnr-life${String(++counter).padStart(4, '0')}`, sent.run.runId);
  assert.equal((await runner.claim()).status, 200);
  await runner.poll();
  assert.equal((await runner.ack(sent.command.commandId)).status, 200);
  return { session, sent, runner };
}

function assertEvicted(res: { status: number; body: any; raw: string }, what: string) {
  assert.equal(res.status, 410, `${what}: ${res.raw}`);
  assert.equal(res.body.failureKind, 'session-store-evicted', what);
}

describe('a session volume removed outside the API', () => {
  it('is recorded as evicted by the first refused send, and stays so for every later request', async () => {
    const { session, sent } = await activeTurn();
    await removeVolume(session.sessionId);
    const before = await fingerprint(t);
    assertEvicted(await send(session.sessionId, { prompt: 'more' }), 'send without a job');
    assert.equal(await storageKind(session.sessionId), 'evicted', 'the eviction is durable');
    const after = await fingerprint(t);
    assert.equal(after['runs'], before['runs'], 'no run was created');
    assert.equal(after['commands'], before['commands'], 'no command was created');

    // The directory coming back does not revive the session: the record decides.
    await mkdir(join(t.dataDir, 'sessions', session.sessionId), { recursive: true });
    const runId = sent.run.runId;
    const refusals: Array<[string, Promise<any>]> = [
      ['send again', send(session.sessionId, { prompt: 'again' })],
      ['send with a job', send(session.sessionId, { prompt: 'again', runnerJob: {} })],
      ['send dry run', send(session.sessionId, { prompt: 'again', dryRun: true })],
      [
        'turn',
        t.api('POST', `/api/v1/runs/${runId}/commands`, {
          type: 'turn',
          payload: { prompt: 'x' },
        }),
      ],
      [
        'steer',
        t.api('POST', `/api/v1/runs/${runId}/commands`, {
          type: 'steer',
          payload: { prompt: 'x', targetCommandId: sent.command.commandId },
        }),
      ],
      ['interrupt', t.api('POST', `/api/v1/runs/${runId}/commands`, { type: 'interrupt' })],
      [
        'resume',
        t.api('POST', `/api/v1/runs/${runId}/commands`, {
          type: 'resume',
          payload: { prompt: 'x' },
        }),
      ],
      [
        'runner job',
        t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, { commandId: sent.command.commandId }),
      ],
      [
        'new run naming the session',
        t.api('POST', '/api/v1/runs', runBody({ sessionRef: { sessionId: session.sessionId } })),
      ],
    ];
    for (const [what, request] of refusals) assertEvicted(await request, what);
    assert.equal(await storageKind(session.sessionId), 'evicted');
  });

  it('found by a runner Job request first: the eviction survives that refusal too', async () => {
    const session = await createSession(t);
    const sent = (await send(session.sessionId, { prompt: 'first' })).body;
    await removeVolume(session.sessionId);
    assertEvicted(
      await t.api('POST', `/api/v1/runs/${sent.run.runId}/runner-jobs`, {
        commandId: sent.command.commandId,
      }),
      'runner job',
    );
    assert.equal(await storageKind(session.sessionId), 'evicted');
    assertEvicted(await send(session.sessionId, { prompt: 'next' }), 'send without a job');
  });

  it('found by a queue dispatch: refused before an attempt, the session marked', async () => {
    const session = await createSession(t);
    const task = await t.api('POST', '/api/v1/queue/tasks', {
      tenantId: 'tenant-a',
      projectId: 'proj-1',
      queue: 'evict',
      title: 'on a session',
      payload: { prompt: 'go' },
      sessionRef: { sessionId: session.sessionId },
    });
    assert.equal(task.status, 201, task.raw);
    await removeVolume(session.sessionId);
    for (const dryRun of [true, false])
      assertEvicted(
        await t.api('POST', `/api/v1/queue/tasks/${task.body.taskId}/dispatch`, { dryRun }),
        `dispatch dryRun=${dryRun}`,
      );
    const shown = (await t.api('GET', `/api/v1/queue/tasks/${task.body.taskId}`)).body;
    assert.equal(shown.counters.attempts, 0);
    assert.equal(shown.state, 'queued');
    assert.equal(await storageKind(session.sessionId), 'evicted');
  });
});

describe('session send idempotency', () => {
  it('the same request replays; any other content under the key is idempotency-conflict', async () => {
    const session = await createSession(t);
    const id = session.sessionId;
    const first = await send(id, { prompt: 'alpha', idempotencyKey: 'key-1' });
    assert.equal(first.status, 201, first.raw);
    const again = await send(id, { prompt: 'alpha', idempotencyKey: 'key-1' });
    assert.equal(again.status, 200, again.raw);
    assert.equal(again.body.mutation, false);
    assert.equal(again.body.command.commandId, first.body.command.commandId);
    assert.equal(again.body.run.runId, first.body.run.runId);

    const before = await fingerprint(t);
    const variants: Array<[string, Record<string, unknown>]> = [
      ['another prompt', { prompt: 'beta' }],
      ['the prompt as payload plus another field', { payload: { prompt: 'alpha', extra: 1 } }],
      ['another profile', { prompt: 'alpha', backendProfile: 'builtin-c' }],
      ['another run base', { prompt: 'alpha', runBase: { metadata: { ticket: 'T-2' } } }],
      ['a runner job this time', { prompt: 'alpha', runnerJob: {} }],
      ['another prompt, dry run', { prompt: 'beta', dryRun: true }],
    ];
    for (const [what, body] of variants) {
      const res = await send(id, { ...body, idempotencyKey: 'key-1' });
      assert.equal(res.status, 409, `${what}: ${res.raw}`);
      assert.equal(res.body.failureKind, 'idempotency-conflict', what);
      assert.equal(res.raw.includes('alpha'), false, 'the stored prompt is not echoed');
    }
    assert.deepEqual(await fingerprint(t), before, 'a conflict writes nothing');
  });

  it('a replay after the turn ended answers the first run, never a second one', async () => {
    const { session, sent, runner } = await activeTurn();
    await runner.finish(sent.command.commandId, 'completed');
    const first = await send(session.sessionId, { prompt: 'second', idempotencyKey: 'key-2' });
    assert.equal(first.status, 201, first.raw);
    const again = await send(session.sessionId, { prompt: 'second', idempotencyKey: 'key-2' });
    assert.equal(again.status, 200);
    assert.equal(again.body.run.runId, first.body.run.runId);
    const other = await send(session.sessionId, { prompt: 'third', idempotencyKey: 'key-2' });
    assert.equal(other.status, 409);
  });

  it('a steer: replayed as that steer, a different prompt under its key refused', async () => {
    const { session, sent } = await activeTurn();
    const steer = await send(session.sessionId, { prompt: 'faster', idempotencyKey: 'key-3' });
    assert.equal(steer.status, 201, steer.raw);
    assert.equal(steer.body.decision, 'steer');
    const again = await send(session.sessionId, { prompt: 'faster', idempotencyKey: 'key-3' });
    assert.equal(again.status, 200, again.raw);
    assert.equal(again.body.decision, 'steer');
    assert.equal(again.body.command.commandId, steer.body.command.commandId);
    assert.equal(again.body.run.runId, sent.run.runId);
    const other = await send(session.sessionId, { prompt: 'slower', idempotencyKey: 'key-3' });
    assert.equal(other.status, 409, other.raw);
    assert.equal(other.body.failureKind, 'idempotency-conflict');
  });
});
