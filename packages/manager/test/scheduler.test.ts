import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { waitFor } from './e2e-helpers.js';
import { rowCount, show, startQueueRig, submit, type QueueRig } from './queue-helpers.js';
import { endAttempt, FAST_SCHEDULER, openAttempts, startedAttempt } from './scheduler-helpers.js';

describe('scheduler: capacity, fair share, manual dispatch', () => {
  let rig: QueueRig;
  before(async () => {
    rig = await startQueueRig({
      env: {
        ...FAST_SCHEDULER,
        SVC_SCHEDULER_MAX_RUNNING: '3',
        SVC_SCHEDULER_TENANT_MAX_RUNNING: '2',
      },
    });
  });
  after(() => rig.close());

  it('starts submitted tasks by itself within the global and per-tenant limits, fairly', async () => {
    const { t } = rig;
    // The big tenant's backlog is submitted first; the small tenant's two tasks come after.
    const big = [];
    for (let i = 0; i < 6; i++) big.push(await submit(t, { tenantId: 'tenant-a' }));
    await waitFor('two attempts of tenant-a', async () => (await openAttempts(t)).total === 2);
    const small = [
      await submit(t, { tenantId: 'tenant-b' }),
      await submit(t, { tenantId: 'tenant-b' }),
    ];
    // The small tenant starts at once while the big tenant still has four waiting.
    const first = await startedAttempt(t, small[0].taskId);
    assert.ok(first);
    const use = await openAttempts(t);
    assert.equal(use.total, 3);
    assert.deepEqual(use.byTenant, { 'tenant-a': 2, 'tenant-b': 1 });
    const waiting = await rowCount(
      t,
      'queue_tasks',
      sql`tenant_id = 'tenant-a' AND state = 'queued'`,
    );
    assert.equal(waiting, 4);

    // The API read shows what runs and what waits.
    const view = (await t.api('GET', '/api/v1/queue/scheduler')).body;
    assert.equal(view.enabled, true);
    assert.equal(view.inUse.global, 3);
    assert.deepEqual(view.inUse.byTenant, { 'tenant-a': 2, 'tenant-b': 1 });
    assert.deepEqual(
      view.backlog.map((b: any) => [b.tenantId, b.queue, b.ready]),
      [
        ['tenant-a', 'main', 4],
        ['tenant-b', 'main', 1],
      ],
    );
    assert.equal(view.limits.global, 3);
    assert.equal(view.limits.perTenant, 2);
    assert.ok(view.nextWakeAt);

    // Each ended attempt lets the next task start, with no dispatch or refresh by anyone.
    const all = [...big, ...small];
    let max = 0;
    for (;;) {
      const open = await sql<{ task_id: string }>`
        SELECT task_id FROM queue_attempts WHERE state IN ('dispatched','running')`.execute(
        t.manager.store.db,
      );
      max = Math.max(max, open.rows.length);
      if (open.rows.length === 0) break;
      const attempt = await startedAttempt(t, open.rows[0]!.task_id);
      await endAttempt(t, attempt, 'completed');
      await waitFor('the ended attempt settled', async () => {
        const task = await show(t, open.rows[0]!.task_id);
        return task.state === 'completed';
      });
    }
    assert.ok(max <= 3);
    for (const task of all) {
      const shown = await show(t, task.taskId);
      assert.equal(shown.state, 'completed', task.taskId);
      assert.equal(shown.counters.attempts, 1);
    }
  });

  it('counts a manual dispatch against the same capacity and refuses one over it', async () => {
    const { t } = rig;
    await t.api('PUT', '/api/v1/queue/queues/manual/settings', { maxRunning: 0 });
    const held = await submit(t, { tenantId: 'tenant-b', queue: 'manual' });
    const before = await rowCount(t, 'queue_attempts');
    const refused = await t.api('POST', `/api/v1/queue/tasks/${held.taskId}/dispatch`, {});
    assert.equal(refused.status, 429, refused.raw);
    assert.equal(refused.body.failureKind, 'capacity-exhausted');
    assert.equal(refused.body.details.scope, 'queue');
    assert.equal(await rowCount(t, 'queue_attempts'), before);
    assert.equal((await show(t, held.taskId)).state, 'queued');
    // Raising the queue's limit lets the scheduler start it.
    const raised = await t.api('PUT', '/api/v1/queue/queues/manual/settings', { maxRunning: 1 });
    assert.equal(raised.status, 200, raised.raw);
    const attempt = await startedAttempt(t, held.taskId);
    await endAttempt(t, attempt, 'completed');
    await waitFor('completed', async () => (await show(t, held.taskId)).state === 'completed');
  });

  it('honours runAfter and priority within a queue', async () => {
    const { t } = rig;
    const later = await submit(t, {
      tenantId: 'tenant-b',
      queue: 'timed',
      runAfter: new Date(Date.now() + 1500).toISOString(),
    });
    assert.ok((await show(t, later.taskId)).scheduling.runAfter);
    await new Promise((r) => setTimeout(r, 600));
    assert.equal((await show(t, later.taskId)).state, 'queued');
    const attempt = await startedAttempt(t, later.taskId);
    assert.ok(Date.parse(attempt.createdAt) >= Date.parse(later.scheduling.runAfter) - 50);
    await endAttempt(t, attempt, 'completed');
  });
});

describe('scheduler: limits set per tenant', () => {
  let rig: QueueRig;
  before(async () => {
    rig = await startQueueRig({
      env: {
        ...FAST_SCHEDULER,
        SVC_SCHEDULER_MAX_RUNNING: '10',
        SVC_SCHEDULER_TENANT_MAX_RUNNING: '1',
        // One tenant may run more than the default, one none at all.
        SVC_SCHEDULER_TENANT_LIMITS: 'tenant-b=3,tenant-c=0',
        SVC_TENANT_ALLOWLIST: 'tenant-a,tenant-b,tenant-c',
      },
    });
  });
  after(() => rig.close());

  it('holds each tenant to its own limit, the default for the others', async () => {
    const { t } = rig;
    for (const tenantId of ['tenant-a', 'tenant-b', 'tenant-c'])
      for (let i = 0; i < 4; i++) await submit(t, { tenantId, queue: 'limits' });
    await waitFor('each tenant at its limit', async () => {
      const use = await openAttempts(t);
      return use.byTenant['tenant-a'] === 1 && use.byTenant['tenant-b'] === 3;
    });
    // Several scans later nothing more has started, and the zero-limit tenant never did.
    await new Promise((r) => setTimeout(r, 1_000));
    const use = await openAttempts(t);
    assert.deepEqual(use.byTenant, { 'tenant-a': 1, 'tenant-b': 3 });
    const view = (await t.api('GET', '/api/v1/queue/scheduler')).body;
    assert.deepEqual(
      view.backlog.filter((b: any) => b.queue === 'limits').map((b: any) => [b.tenantId, b.ready]),
      [
        ['tenant-a', 3],
        ['tenant-b', 1],
        ['tenant-c', 4],
      ],
    );
  });
});

describe('scheduler: provider profiles it found usable', () => {
  let rig: QueueRig;
  before(async () => {
    rig = await startQueueRig({ env: { ...FAST_SCHEDULER, SVC_SCHEDULER_MAX_RUNNING: '50' } });
  });
  after(() => rig.close());

  it('stops starting tasks on a removed profile within a second, spending no attempt', async () => {
    const { t } = rig;
    const first = await submit(t);
    await startedAttempt(t, first.taskId);
    const removed = await t.api('DELETE', '/api/v1/provider-profiles/builtin-a');
    assert.equal(removed.body.removed, true, removed.raw);
    // Past the second for which a profile found usable is taken as usable.
    await new Promise((r) => setTimeout(r, 1_200));
    const held = await submit(t);
    await waitFor('the task deferred', async () => {
      const task = await show(t, held.taskId);
      return task.scheduling.lastRefusal !== null;
    });
    const task = await show(t, held.taskId);
    assert.equal(task.state, 'queued');
    assert.equal(task.counters.attempts, 0, 'a refused start spends no attempt');
    assert.equal(task.latestAttempt, null);
    assert.equal(task.scheduling.lastRefusal.failureKind, 'secret-unavailable');
    // Configured again, the profile is usable again: the deferred task starts by itself.
    await t.configureProfile('builtin-a');
    await startedAttempt(t, held.taskId);
  });
});
