import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import {
  acknowledge,
  dispatch,
  fingerprint,
  startQueueRig,
  submit,
  taskBody,
  type QueueRig,
} from './queue-helpers.js';
import { createSession } from './helpers.js';

let rig: QueueRig;
before(async () => {
  rig = await startQueueRig();
});
after(() => rig.close());

const api = (method: string, url: string, body?: unknown) => rig.t.api(method, url, body);

/** Run a dry-run request and prove it wrote nothing anywhere: every row of every table. */
async function dryRun(method: string, url: string, body: Record<string, unknown>) {
  const before = await fingerprint(rig.t);
  const res = await api(method, url, { ...body, dryRun: true });
  assert.equal(res.status, 200, res.raw);
  assert.equal(res.body.dryRun, true);
  assert.equal(res.body.mutation, false);
  assert.equal(res.body.valuesPrinted, false);
  assert.deepEqual(await fingerprint(rig.t), before, `${url} wrote nothing`);
  return res.body;
}

describe('queue dry runs write nothing', () => {
  it('submit: the task that would be stored', async () => {
    const plan = await dryRun('POST', '/api/v1/queue/tasks', taskBody({ priority: 3 }));
    assert.equal(plan.action, 'submit');
    assert.equal(plan.plan.storeTask.state, 'queued');
    assert.equal(plan.plan.storeTask.priority, 3);
    assert.equal(plan.plan.createsRun, false);
    const invalid = await api('POST', '/api/v1/queue/tasks', {
      ...taskBody({ tenantId: 'tenant-x' }),
      dryRun: true,
    });
    assert.equal(invalid.body.failureKind, 'tenant-policy-denied', 'a dry run checks every rule');
  });

  it('dispatch of a task without a session: no attempt, session, run, command or runner Job', async () => {
    const task = await submit(rig.t);
    const plan = await dryRun('POST', `/api/v1/queue/tasks/${task.taskId}/dispatch`, {
      runnerJob: { retention: 'keep' },
    });
    assert.equal(plan.action, 'dispatch');
    assert.deepEqual(plan.plan.taskState, { from: 'queued', to: 'dispatched' });
    assert.equal(plan.plan.attempt.retryIndex, 0);
    assert.equal(plan.plan.session.origin, 'bootstrapped');
    assert.equal(plan.plan.session.thread, 'start');
    assert.deepEqual(plan.plan.createRunnerJob.overrides, ['retention']);
  });

  it('dispatch of a task with a session: the session decision, nothing written', async () => {
    const session = await createSession(rig.t);
    const task = await submit(rig.t, { sessionRef: { sessionId: session.sessionId } });
    const plan = await dryRun('POST', `/api/v1/queue/tasks/${task.taskId}/dispatch`, {});
    assert.equal(plan.plan.session.origin, 'task-session-ref');
    assert.equal(plan.plan.session.send.decision, 'new-run');
  });

  it('refresh, cancel and read of a task with an attempt in flight', async () => {
    const task = await submit(rig.t);
    const d = await dispatch(rig.t, task.taskId);
    // Acknowledged: the attempt and the task follow by themselves.
    await acknowledge(rig.t, d);
    assert.equal((await api('GET', `/api/v1/queue/tasks/${task.taskId}`)).body.state, 'running');
    // News a refresh would write: an attempt record an older replica left behind.
    await sql`UPDATE queue_attempts SET state = 'dispatched' WHERE attempt_id = ${d.attempt.attemptId}`.execute(
      rig.t.manager.store.db,
    );
    await sql`UPDATE queue_tasks SET state = 'dispatched' WHERE task_id = ${task.taskId}`.execute(
      rig.t.manager.store.db,
    );
    const refreshPlan = await dryRun('POST', `/api/v1/queue/tasks/${task.taskId}/refresh`, {});
    assert.equal(refreshPlan.plan.changes, true);
    assert.deepEqual(refreshPlan.plan.attempt.state, { from: 'dispatched', to: 'running' });
    assert.deepEqual(refreshPlan.plan.taskState, { from: 'dispatched', to: 'running' });
    assert.equal(refreshPlan.plan.readsEvents, false);

    const cancelPlan = await dryRun('POST', `/api/v1/queue/tasks/${task.taskId}/cancel`, {
      reason: 'just looking',
    });
    assert.deepEqual(cancelPlan.plan.taskState, { from: 'dispatched', to: 'cancelled' });
    assert.equal(cancelPlan.plan.cancelCommand, d.command.commandId);

    const current = (await api('GET', `/api/v1/queue/tasks/${task.taskId}`)).body;
    const readPlan = await dryRun('POST', `/api/v1/queue/tasks/${task.taskId}/read`, {
      readerId: 'alice',
    });
    assert.deepEqual(readPlan.plan.readVersion, { from: null, to: current.version });
    assert.equal(readPlan.plan.unreadBefore, true);
    // And the real mutations still do what the plans said.
    assert.equal(
      (await api('POST', `/api/v1/queue/tasks/${task.taskId}/refresh`, {})).body.state,
      'running',
    );
  });

  it('a dry run refuses what the real call would refuse', async () => {
    const task = await submit(rig.t);
    await api('POST', `/api/v1/queue/tasks/${task.taskId}/cancel`, {});
    const res = await api('POST', `/api/v1/queue/tasks/${task.taskId}/dispatch`, { dryRun: true });
    assert.equal(res.status, 409);
    assert.equal(res.body.failureKind, 'task-terminal');
  });
});
