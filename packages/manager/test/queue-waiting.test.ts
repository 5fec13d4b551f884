import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { waitFor } from './e2e-helpers.js';
import { createSession, type TestManager } from './helpers.js';
import { show, startQueueRig, submit, type QueueRig } from './queue-helpers.js';
import { endAttempt, startedAttempt } from './scheduler-helpers.js';

/**
 * Every view of a task says why it waits (`waiting`: reason, message, until, limit), and its
 * `next` never suggests a dispatch the scheduler will make by itself or would refuse.
 */
const views = async (t: TestManager, taskId: string, queue: string) => {
  const task = await show(t, taskId);
  const listed = (await t.api('GET', `/api/v1/queue/tasks?queue=${queue}`)).body.tasks.find(
    (x: any) => x.taskId === taskId,
  );
  const commander = (await t.api('GET', `/api/v1/queue/commander?queue=${queue}`)).body;
  const item = commander.items.find((i: any) => i.task.taskId === taskId);
  // One answer, whichever view asks.
  assert.deepEqual(listed.waiting, task.waiting, 'the listing says what the task view says');
  assert.deepEqual(item?.task.waiting, task.waiting, 'the commander too');
  assert.equal(listed.next, task.next);
  return { task, commander };
};

describe('why a task waits, with the scheduler on', () => {
  let rig: QueueRig;
  before(async () => {
    rig = await startQueueRig({
      env: {
        SVC_SCHEDULER: 'on',
        SVC_SCHEDULER_SCAN_MS: '300',
        // Retries wait long enough to be seen waiting.
        SVC_RETRY_BACKOFF_MS: '600000',
        SVC_TENANT_ALLOWLIST: 'tenant-a,tenant-b,tenant-c',
        SVC_SCHEDULER_TENANT_LIMITS: 'tenant-b=1,tenant-c=1',
      },
    });
  });
  after(() => rig.close());

  it('capacity: names the limit and its use; next is queue show, never a refused dispatch', async () => {
    const { t } = rig;
    const first = await submit(t, { tenantId: 'tenant-b', queue: 'cap' });
    await startedAttempt(t, first.taskId);
    const second = await submit(t, { tenantId: 'tenant-b', queue: 'cap' });
    // The stand-in runner never takes its turn: the first attempt holds tenant-b's one slot.
    const { task, commander } = await views(t, second.taskId, 'cap');
    assert.equal(task.state, 'queued');
    assert.equal(task.waiting.reason, 'capacity');
    assert.deepEqual(task.waiting.limit, { scope: 'tenant', key: 'tenant-b', limit: 1, used: 1 });
    assert.equal(task.waiting.until, null);
    assert.match(task.waiting.message, /tenant tenant-b runs 1 of its 1 attempts/);
    assert.equal(task.next, `queue show ${second.taskId}`);
    assert.ok(!commander.next.includes(`queue dispatch ${second.taskId}`), commander.next);
    // What the next line would have said is refused indeed.
    const refused = await t.api('POST', `/api/v1/queue/tasks/${second.taskId}/dispatch`, {});
    assert.equal(refused.status, 429, refused.raw);

    // The dispatched one waits for its runner.
    const firstShown = (await views(t, first.taskId, 'cap')).task;
    assert.equal(firstShown.state, 'dispatched');
    assert.equal(firstShown.waiting.reason, 'waiting-runner');

    // A queue limit is named as such.
    const set = await t.api('PUT', '/api/v1/queue/queues/closed-q/settings', { maxRunning: 0 });
    assert.equal(set.status, 200, set.raw);
    const held = await submit(t, { queue: 'closed-q' });
    const shown = (await views(t, held.taskId, 'closed-q')).task;
    assert.equal(shown.waiting.reason, 'capacity');
    assert.deepEqual(shown.waiting.limit, { scope: 'queue', key: 'closed-q', limit: 0, used: 0 });
  });

  it('run-after: waits until its runAfter', async () => {
    const { t } = rig;
    const runAfter = new Date(Date.now() + 3_600_000).toISOString();
    const submitted = await submit(t, { queue: 'later', runAfter });
    assert.equal(submitted.waiting.reason, 'run-after');
    const { task } = await views(t, submitted.taskId, 'later');
    assert.equal(task.waiting.reason, 'run-after');
    assert.equal(task.waiting.until, runAfter);
    assert.equal(task.next, `queue show ${submitted.taskId}`);
  });

  it('backoff: a retryable failure waits for the scheduler, then until its retry time', async () => {
    const { t } = rig;
    const task = await submit(t, { queue: 'retry', maxAttempts: 3 });
    const attempt = await startedAttempt(t, task.taskId);
    await endAttempt(t, attempt, 'failed', { failureKind: 'provider-unavailable' });
    // Failed, with a retry coming: waiting, and no dispatch suggested (the scheduler does it).
    const failed = await show(t, task.taskId);
    if (failed.state === 'failed') {
      assert.equal(failed.waiting.reason, 'backoff');
      assert.equal(failed.next.startsWith('queue dispatch'), false, failed.next);
    }
    const requeued = await waitFor('the retry queued', async () => {
      const shown = await show(t, task.taskId);
      return shown.state === 'queued' && shown;
    });
    assert.equal(requeued.waiting.reason, 'backoff');
    assert.equal(requeued.waiting.until, requeued.scheduling.runAfter);
    assert.ok(Date.parse(requeued.waiting.until) > Date.now() + 60_000, 'minutes away');
    // The failed attempt's trace is worth reading meanwhile; a dispatch is not suggested.
    assert.match(requeued.next, /^sessions trace /);
    const { commander } = await views(t, task.taskId, 'retry');
    assert.ok(!commander.next.includes(`queue dispatch ${task.taskId}`), commander.next);
  });

  it('session-busy: its session serves another turn', async () => {
    const { t } = rig;
    const session = await createSession(t);
    const sent = await t.api('POST', `/api/v1/sessions/${session.sessionId}/send`, {
      prompt: 'busy',
      runnerJob: false,
    });
    assert.equal(sent.status, 201, sent.raw);
    const task = await submit(t, { queue: 'busy', sessionRef: { sessionId: session.sessionId } });
    // The scheduler tries, is refused by the busy session, and puts the task back for later.
    const deferred = await waitFor('the scheduler deferred it', async () => {
      const shown = await show(t, task.taskId);
      return shown.scheduling.deferrals > 0 && shown;
    });
    assert.equal(deferred.state, 'queued');
    const { task: shown } = await views(t, task.taskId, 'busy');
    assert.equal(shown.waiting.reason, 'session-busy');
    assert.match(shown.waiting.message, new RegExp(sent.body.command.commandId));
    assert.equal(shown.next, `queue show ${task.taskId}`);
  });

  it('blocked: all attempts used, nothing will start it', async () => {
    const { t } = rig;
    const task = await submit(t, {
      queue: 'spent',
      runAfter: new Date(Date.now() + 3_600_000).toISOString(),
    });
    // As an older replica or a judge could leave it: queued with no attempt left.
    await sql`UPDATE queue_tasks SET attempt_count = max_attempts WHERE task_id = ${task.taskId}`.execute(
      t.manager.store.db,
    );
    const { task: shown } = await views(t, task.taskId, 'spent');
    assert.equal(shown.waiting.reason, 'blocked');
    assert.match(shown.waiting.message, /all 3 of its attempts/);
    assert.notEqual(shown.next, `queue dispatch ${task.taskId}`);
  });

  it('dispatching: submit answers with the wait and a next that is not a dispatch', async () => {
    const { t } = rig;
    const response = await t.api('POST', '/api/v1/queue/tasks', {
      tenantId: 'tenant-a',
      projectId: 'proj-1',
      queue: 'fresh',
      title: 'fresh',
      payload: { prompt: 'go' },
    });
    assert.equal(response.status, 201, response.raw);
    assert.equal(response.body.waiting.reason, 'dispatching');
    assert.equal(response.body.next, `queue show ${response.body.taskId}`);
  });

  it('a failure no retry covers: the commander suggests a dispatch only while capacity has room', async () => {
    const { t } = rig;
    const task = await submit(t, { queue: 'manual', tenantId: 'tenant-c', maxAttempts: 2 });
    await endAttempt(t, await startedAttempt(t, task.taskId), 'failed', {
      failureKind: 'provider-auth-failed',
    });
    const failed = await show(t, task.taskId);
    assert.equal(failed.state, 'failed');
    assert.equal(failed.waiting, null, 'no retry comes by itself: nothing to wait for');
    const dispatch = `queue dispatch ${task.taskId}`;
    // tenant-c's one slot is free: a person's dispatch is a next step.
    let { commander } = await views(t, task.taskId, 'manual');
    assert.ok(commander.next.includes(dispatch), commander.next);

    // With tenant-c's slot taken, a dispatch would be refused: not suggested anywhere.
    const blocker = await submit(t, { tenantId: 'tenant-c', queue: 'manual' });
    await startedAttempt(t, blocker.taskId);
    ({ commander } = await views(t, task.taskId, 'manual'));
    assert.ok(!commander.next.includes(dispatch), commander.next);
    assert.notEqual((await show(t, task.taskId)).next, dispatch);
    const refused = await t.api('POST', `/api/v1/queue/tasks/${task.taskId}/dispatch`, {});
    assert.equal(refused.status, 429, refused.raw);
  });
});

describe('why a task waits, with the scheduler off', () => {
  let rig: QueueRig;
  before(async () => {
    rig = await startQueueRig({ env: { SVC_SCHEDULER_MAX_RUNNING: '1' } });
  });
  after(() => rig.close());

  it('scheduler-off: a person dispatches, until capacity is used up', async () => {
    const { t } = rig;
    const first = await submit(t, { queue: 'manual' });
    assert.equal(first.waiting.reason, 'scheduler-off');
    assert.equal(first.next, `queue dispatch ${first.taskId}`);
    const { task } = await views(t, first.taskId, 'manual');
    assert.equal(task.waiting.reason, 'scheduler-off');
    assert.equal(task.next, `queue dispatch ${first.taskId}`);
    const dispatched = await t.api('POST', `/api/v1/queue/tasks/${first.taskId}/dispatch`, {});
    assert.equal(dispatched.status, 201, dispatched.raw);

    // The one slot is taken: the next task waits on capacity, and submit says so.
    const second = await submit(t, { queue: 'manual' });
    assert.equal(second.waiting.reason, 'capacity');
    assert.deepEqual(second.waiting.limit, { scope: 'global', key: null, limit: 1, used: 1 });
    assert.equal(second.next, `queue show ${second.taskId}`);
    const refused = await t.api('POST', `/api/v1/queue/tasks/${second.taskId}/dispatch`, {});
    assert.equal(refused.status, 429);
  });
});
