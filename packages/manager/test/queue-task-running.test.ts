import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { TestRunner } from './helpers.js';
import { dispatch, finish, show, startQueueRig, submit, type QueueRig } from './queue-helpers.js';

/**
 * A task reads `running` from the moment a runner acknowledges its attempt's turn until the
 * outcome: the acknowledgement moves the attempt and the task in its own transaction, and the
 * queue's counters (stats, commander) count them there. No refresh is involved.
 */
let rig: QueueRig;
before(async () => {
  rig = await startQueueRig();
});
after(() => rig.close());

const api = (method: string, url: string, body?: unknown) => rig.t.api(method, url, body);

async function stats(queue: string) {
  const response = await api('GET', `/api/v1/queue/stats?queue=${queue}`);
  assert.equal(response.status, 200, response.raw);
  return response.body;
}

describe('a task follows its attempt into running', () => {
  it('dispatched until the runner acknowledges, running from the ack to the outcome', async () => {
    const queue = 'follow-ack';
    const task = await submit(rig.t, { queue });
    const d = await dispatch(rig.t, task.taskId);
    let shown = await show(rig.t, task.taskId);
    assert.equal(shown.state, 'dispatched');
    assert.equal(shown.latestAttempt.state, 'dispatched');
    assert.equal((await stats(queue)).tasks.byState.dispatched, 1);

    const runner = new TestRunner(rig.t, d.attempt.runner.runnerId, d.run.runId);
    assert.equal((await runner.claim()).status, 200);
    assert.equal((await runner.poll()).status, 200);
    // Claimed and delivered, not yet acknowledged: nobody works on it yet.
    assert.equal((await show(rig.t, task.taskId)).state, 'dispatched');
    const versionBefore = (await show(rig.t, task.taskId)).version;

    const acked = await runner.ack(d.command.commandId);
    assert.equal(acked.status, 200, acked.raw);
    assert.equal(acked.body.state, 'confirmed');
    shown = await show(rig.t, task.taskId);
    assert.equal(shown.state, 'running');
    assert.equal(shown.latestAttempt.state, 'running');
    assert.equal(shown.latestAttempt.startedAt, acked.body.confirmedAt);
    assert.ok(shown.version > versionBefore, 'a poller sees the change');
    const s = await stats(queue);
    assert.equal(s.tasks.byState.running, 1);
    assert.equal(s.tasks.byState.dispatched, 0);
    assert.equal(s.attempts.byState.running, 1);
    const commander = await api('GET', `/api/v1/queue/commander?queue=${queue}`);
    assert.deepEqual(
      commander.body.items.map((i: any) => [i.reason, i.task.taskId, i.task.state]),
      [['running', task.taskId, 'running']],
    );
    const changed = await api(
      'GET',
      `/api/v1/queue/tasks?queue=${queue}&updatedAfter=${task.changeSeq}`,
    );
    assert.deepEqual(
      changed.body.tasks.map((t: any) => [t.taskId, t.state]),
      [[task.taskId, 'running']],
    );

    // A repeated ack changes nothing more.
    assert.equal((await runner.ack(d.command.commandId)).status, 200);
    assert.equal((await show(rig.t, task.taskId)).version, shown.version);

    const done = await runner.finish(d.command.commandId, 'completed');
    assert.equal(done.status, 200, done.raw);
    shown = await show(rig.t, task.taskId);
    assert.equal(shown.state, 'completed');
    const after = await stats(queue);
    assert.equal(after.tasks.byState.running, 0);
    assert.equal(after.tasks.byState.completed, 1);
  });

  it('a failed turn ends running as failed; acks of plain runs touch no task', async () => {
    const queue = 'follow-fail';
    const task = await submit(rig.t, { queue, maxAttempts: 1 });
    const d = await dispatch(rig.t, task.taskId);
    await finish(rig.t, d, 'failed', { failureKind: 'provider-auth-failed' });
    const shown = await show(rig.t, task.taskId);
    assert.equal(shown.state, 'failed');
    assert.equal(shown.latestAttempt.failureKind, 'provider-auth-failed');
    assert.ok(shown.latestAttempt.startedAt, 'the attempt started at its ack');
    assert.equal((await stats(queue)).tasks.byState.running, 0);

    // A run of no task: the ack is the one statement it always was, and answers the same.
    const run = await api('POST', '/api/v1/runs', {
      tenantId: 'tenant-a',
      projectId: 'proj-1',
      workspaceRef: { kind: 'opaque' },
      providerId: 'openai',
      backendProfile: 'builtin-a',
      traceSink: null,
    });
    const command = await api('POST', `/api/v1/runs/${run.body.runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'plain' },
    });
    const plain = new TestRunner(rig.t, 'rnr-plainack1', run.body.runId);
    assert.equal((await plain.claim()).status, 200);
    const acked = await plain.ack(command.body.commandId);
    assert.equal(acked.status, 200, acked.raw);
    assert.equal(acked.body.state, 'confirmed');
  });

  it('concurrent acks of one attempt move its task once', async () => {
    const queue = 'follow-race';
    const task = await submit(rig.t, { queue });
    const d = await dispatch(rig.t, task.taskId);
    const runner = new TestRunner(rig.t, d.attempt.runner.runnerId, d.run.runId);
    assert.equal((await runner.claim()).status, 200);
    const versionBefore = (await show(rig.t, task.taskId)).version;
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => runner.ack(d.command.commandId)),
    );
    for (const a of answers) assert.equal(a.status, 200, a.raw);
    const shown = await show(rig.t, task.taskId);
    assert.equal(shown.state, 'running');
    assert.equal(shown.version, versionBefore + 1, 'one change, not six');
    assert.equal((await stats(queue)).tasks.byState.running, 1);
  });
});
