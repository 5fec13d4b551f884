import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { waitFor } from './e2e-helpers.js';
import { startTestManager, type TestManager } from './helpers.js';
import { call } from './http-call.js';
import {
  acknowledge,
  dispatch,
  fingerprint,
  finish,
  rowCount,
  show,
  startQueueRig,
  submit,
  type QueueRig,
} from './queue-helpers.js';
import { endAttempt, FAST_SCHEDULER, startedAttempt } from './scheduler-helpers.js';

/**
 * Retry of failed work: a failed, blocked or cancelled task is requeued with a fresh attempt
 * budget, once however many ask at the same time, on one manager or two.
 */

const retryUrl = (taskId: string) => `/api/v1/queue/tasks/${taskId}/retry`;
const BULK = '/api/v1/queue/tasks/retry';

describe('retry with the scheduler on: a retried task really runs again', () => {
  let rig: QueueRig;
  before(async () => {
    rig = await startQueueRig({ env: FAST_SCHEDULER });
  });
  after(() => rig.close());

  it('requeues a task that used all its attempts with a fresh budget; the scheduler starts it', async () => {
    const { t } = rig;
    const task = await submit(t, { maxAttempts: 2, retryPolicy: { backoffMs: 100 } });
    // Two attempts fail with a retryable kind: the scheduler retries once, then gives up.
    for (const index of [0, 1])
      await endAttempt(t, await startedAttempt(t, task.taskId, index), 'failed', {
        failureKind: 'provider-unavailable',
      });
    const failed = await waitFor('the task failed for good', async () => {
      const shown = await show(t, task.taskId);
      return shown.state === 'failed' && shown.counters.attempts === 2 ? shown : null;
    });
    const dispatchRefused = await t.api('POST', `/api/v1/queue/tasks/${task.taskId}/dispatch`, {});
    assert.equal(dispatchRefused.body.failureKind, 'attempts-exhausted');
    const overview = (await t.api('GET', `/api/v1/queue/commander?queue=${task.queue}`)).body;
    assert.ok(
      overview.next.includes(`queue retry ${task.taskId}`),
      `the commander points at the retry: ${JSON.stringify(overview.next)}`,
    );

    const retried = await t.api('POST', retryUrl(task.taskId), { by: 'alice', reason: 'fixed' });
    assert.equal(retried.status, 200, retried.raw);
    assert.equal(retried.body.state, 'queued');
    assert.equal(retried.body.counters.attempts, 2, 'earlier attempts are kept');
    assert.equal(retried.body.counters.sinceRetry, 0, 'a fresh budget');
    assert.equal(retried.body.counters.retries, 1);
    assert.ok(retried.body.changeSeq > failed.changeSeq, 'followers see the change');
    assert.ok(retried.body.version > failed.version);
    assert.equal(retried.body.retries.length, 1);
    assert.deepEqual(
      {
        ...retried.body.retries[0],
        retryId: undefined,
        at: undefined,
      },
      {
        retryId: undefined,
        at: undefined,
        by: 'alice',
        reason: 'fixed',
        fromState: 'failed',
        failureKind: 'provider-unavailable',
        attemptsBefore: 2,
        bulk: false,
      },
    );

    // The scheduler starts attempt 3 (retry index 2) by itself, and it runs to the end.
    const third = await startedAttempt(t, task.taskId, 2);
    await endAttempt(t, third, 'completed');
    const done = await waitFor('the retried task completed', async () => {
      const shown = await show(t, task.taskId);
      return shown.state === 'completed' ? shown : null;
    });
    assert.deepEqual(
      done.attempts.map((a: any) => [a.retryIndex, a.state]),
      [
        [0, 'failed'],
        [1, 'failed'],
        [2, 'completed'],
      ],
      'every attempt is listed, numbers keep increasing',
    );
    assert.equal(done.counters.sinceRetry, 1);

    // Completed now: a second retry is refused, naming the state.
    const again = await t.api('POST', retryUrl(task.taskId), {});
    assert.equal(again.status, 409);
    assert.equal(again.body.failureKind, 'state-conflict');
    assert.equal(again.body.details.state, 'completed');

    const metrics = (await t.api('GET', '/metrics')).raw;
    assert.match(metrics, /svc_queue_tasks_retried_total\{queue="main"\} [1-9]/);
  });

  it('the fresh budget is a whole one: the scheduler retries the retried task up to maxAttempts again', async () => {
    const { t } = rig;
    const task = await submit(t, { maxAttempts: 2, retryPolicy: { backoffMs: 100 } });
    for (const index of [0, 1])
      await endAttempt(t, await startedAttempt(t, task.taskId, index), 'failed', {
        failureKind: 'provider-unavailable',
      });
    await waitFor('failed for good', async () => {
      const shown = await show(t, task.taskId);
      return shown.state === 'failed' && shown.counters.attempts === 2;
    });
    assert.equal((await t.api('POST', retryUrl(task.taskId))).status, 200);
    // Two more attempts, the second a scheduler retry within the new budget, then it stops.
    for (const index of [2, 3])
      await endAttempt(t, await startedAttempt(t, task.taskId, index), 'failed', {
        failureKind: 'provider-unavailable',
      });
    const shown = await waitFor('failed for good again', async () => {
      const s = await show(t, task.taskId);
      return s.state === 'failed' && s.counters.attempts === 4 ? s : null;
    });
    await new Promise((r) => setTimeout(r, 800));
    assert.equal((await show(t, task.taskId)).counters.attempts, 4, 'no fifth attempt');
    assert.equal(shown.counters.sinceRetry, 2);
  });
});

describe('retry: refusals, races, bulk filters, two managers', () => {
  let rig: QueueRig;
  let second: TestManager;
  before(async () => {
    rig = await startQueueRig({ listen: true });
    // A second manager on the same database: what a second replica would do.
    second = await startTestManager({ store: rig.t.store, listen: true });
  });
  after(async () => {
    await second.close();
    await rig.close();
  });

  /** A task that ended in `state` through a real attempt (or a cancel). */
  async function ended(
    state: 'failed' | 'blocked' | 'cancelled',
    overrides: Record<string, unknown> = {},
    failureKind = state === 'blocked' ? 'required-skill-unavailable' : 'backend-failed',
  ) {
    const task = await submit(rig.t, { maxAttempts: 1, ...overrides });
    if (state === 'cancelled') {
      const res = await rig.t.api('POST', `/api/v1/queue/tasks/${task.taskId}/cancel`, {});
      assert.equal(res.body.state, 'cancelled');
    } else {
      const d = await dispatch(rig.t, task.taskId);
      await finish(rig.t, d, state, { failureKind });
      assert.equal((await show(rig.t, task.taskId)).state, state);
    }
    return task.taskId as string;
  }

  it('retries failed, blocked and cancelled tasks; a person can dispatch them again', async () => {
    for (const state of ['failed', 'blocked', 'cancelled'] as const) {
      const taskId = await ended(state);
      // A reader has seen it as it ended; a follower polls from its change number.
      const seen = await rig.t.api('POST', `/api/v1/queue/tasks/${taskId}/read`, {
        readerId: 'watcher',
      });
      assert.equal(seen.body.unread, false);
      // A dry run answers the plan and writes nothing.
      const before = await fingerprint(rig.t);
      const plan = await rig.t.api('POST', retryUrl(taskId), { dryRun: true });
      assert.equal(plan.status, 200, plan.raw);
      assert.equal(plan.body.mutation, false);
      assert.deepEqual(plan.body.plan.taskState, { from: state, to: 'queued' });
      assert.deepEqual(await fingerprint(rig.t), before, 'a dry run wrote nothing');
      const res = await rig.t.api('POST', retryUrl(taskId));
      assert.equal(res.status, 200, res.raw);
      assert.equal(res.body.state, 'queued');
      assert.equal(res.body.retries[0].fromState, state);
      assert.equal(res.body.retries[0].by, 'operator', 'the caller kind when no name is given');
      assert.equal(res.body.cancelReason, null);
      const polled = await rig.t.api(
        'GET',
        `/api/v1/queue/tasks?updatedAfter=${seen.body.readChangeSeq}&limit=200`,
      );
      assert.ok(
        polled.body.tasks.some((t: any) => t.taskId === taskId && t.state === 'queued'),
        'a follower sees the retried task',
      );
      const reader = await rig.t.api('POST', `/api/v1/queue/tasks/${taskId}/read`, {
        readerId: 'watcher',
        dryRun: true,
      });
      assert.equal(reader.body.plan.unreadBefore, true, 'unread again for its reader');
      // With the scheduler off a person dispatches it: the budget allows a new attempt.
      const d = await dispatch(rig.t, taskId);
      assert.equal(d.attempt.retryIndex, state === 'cancelled' ? 0 : 1);
    }
  });

  it('refuses every other state with state-conflict naming it; an unknown task is 404', async () => {
    const queued = await submit(rig.t);
    const dispatched = await submit(rig.t);
    await dispatch(rig.t, dispatched.taskId);
    const running = await submit(rig.t);
    await acknowledge(rig.t, await dispatch(rig.t, running.taskId));
    const completed = await submit(rig.t);
    await finish(rig.t, await dispatch(rig.t, completed.taskId), 'completed');
    const cases: Array<[string, string]> = [
      [queued.taskId, 'queued'],
      [dispatched.taskId, 'dispatched'],
      [running.taskId, 'running'],
      [completed.taskId, 'completed'],
    ];
    for (const [taskId, state] of cases) {
      assert.equal((await show(rig.t, taskId)).state, state);
      const before = await fingerprint(rig.t);
      const res = await rig.t.api('POST', retryUrl(taskId), {});
      assert.equal(res.status, 409, `${state}: ${res.raw}`);
      assert.equal(res.body.failureKind, 'state-conflict');
      assert.equal(res.body.details.state, state);
      assert.match(res.body.message, new RegExp(`is ${state}`));
      const dry = await rig.t.api('POST', retryUrl(taskId), { dryRun: true });
      assert.equal(dry.status, 409, 'a dry run answers what the retry would');
      assert.deepEqual(await fingerprint(rig.t), before, `${state}: nothing changed`);
    }
    const unknown = await rig.t.api('POST', retryUrl('tsk-doesnotexist'), {});
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.failureKind, 'not-found');
  });

  it('refuses bad input with 400 and changes nothing', async () => {
    const taskId = await ended('failed', { queue: 'bad-input' });
    const before = await fingerprint(rig.t);
    const bad: Array<[string, unknown]> = [
      [retryUrl(taskId), { extra: 1 }],
      [retryUrl(taskId), { by: '' }],
      [retryUrl(taskId), []],
      [BULK, { queue: 'bad-input', unknown: true }],
      [BULK, { queue: 'bad-input', state: 'completed' }],
      [BULK, { queue: 'bad-input', state: ['failed', 'queued'] }],
      [BULK, { queue: 'bad-input', state: [] }],
      [BULK, { queue: 'bad-input', updatedAfter: 'yesterday' }],
      [BULK, { queue: 'bad-input', updatedAfter: '2026-13-40T00:00:00Z' }],
      [BULK, { queue: 'bad-input', limit: 0 }],
      [BULK, { queue: 'bad-input', limit: 501 }],
      [BULK, { queue: 'bad-input', limit: 1.5 }],
      [BULK, { queue: 'bad-input', failureKind: 'not-a-kind' }],
      [BULK, { queue: 'bad-input', dryRun: 'yes' }],
    ];
    for (const [url, body] of bad) {
      const res = await rig.t.api('POST', url, body);
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.raw}`);
      assert.equal(res.body.failureKind, 'schema-invalid');
    }
    assert.deepEqual(await fingerprint(rig.t), before);
    assert.equal((await show(rig.t, taskId)).state, 'failed');
  });

  it('many clients retrying one task at once, on two managers: it is requeued once', async () => {
    const taskId = await ended('failed');
    const bases = [rig.t.manager.url, second.manager.url];
    const answers = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        call(bases[i % 2]!, 'POST', retryUrl(taskId), { by: `client-${i}` }),
      ),
    );
    const ok = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status === 409);
    assert.equal(ok.length, 1, answers.map((a) => a.status).join(','));
    assert.equal(refused.length, 23);
    for (const r of refused) {
      assert.equal(r.body.failureKind, 'state-conflict');
      assert.equal(r.body.details.state, 'queued');
    }
    const shown = await show(rig.t, taskId);
    assert.equal(shown.counters.retries, 1);
    assert.equal(shown.retries.length, 1);
    assert.equal(shown.retries[0].by, ok[0]!.body.retries[0].by);
  });

  it('bulk: filters by queue, state, failure kind and time; dryRun changes nothing', async () => {
    const q = 'bulk-filters';
    const failedA = await ended('failed', { queue: q }, 'backend-failed');
    const failedB = await ended('failed', { queue: q }, 'idle-timeout');
    const blocked = await ended('blocked', { queue: q });
    const cancelled = await ended('cancelled', { queue: q });
    const elsewhere = await ended('failed', { queue: 'bulk-other' });
    const ids = (body: any) => body.tasks.map((t: any) => t.taskId).sort();

    // dryRun: the default state is failed, in this queue only; nothing is written.
    const before = await fingerprint(rig.t);
    const dry = await rig.t.api('POST', BULK, { queue: q, dryRun: true });
    assert.equal(dry.status, 200, dry.raw);
    assert.equal(dry.body.dryRun, true);
    assert.equal(dry.body.mutation, false);
    assert.equal(dry.body.more, false);
    assert.deepEqual(ids(dry.body), [failedA, failedB].sort());
    assert.ok(
      dry.body.tasks.every((t: any) => t.state === 'failed'),
      'shown as they are',
    );
    assert.deepEqual(await fingerprint(rig.t), before, 'dryRun wrote nothing');

    // A list of states, and a failure kind.
    const kinds = await rig.t.api('POST', BULK, {
      queue: q,
      state: ['failed', 'blocked', 'cancelled'],
      failureKind: 'idle-timeout',
      dryRun: true,
    });
    assert.deepEqual(ids(kinds.body), [failedB]);
    const states = await rig.t.api('POST', BULK, {
      queue: q,
      state: ['blocked', 'cancelled'],
      dryRun: true,
    });
    assert.deepEqual(ids(states.body), [blocked, cancelled].sort());

    // updatedAfter: only tasks changed after the time.
    const at = (await show(rig.t, blocked)).updatedAt;
    const later = await rig.t.api('POST', BULK, {
      queue: q,
      state: ['failed', 'blocked', 'cancelled'],
      updatedAfter: at,
      dryRun: true,
    });
    assert.deepEqual(ids(later.body), [cancelled]);

    // The real thing: failed ones with kind backend-failed in this queue.
    const done = await rig.t.api('POST', BULK, { queue: q, failureKind: 'backend-failed' });
    assert.equal(done.status, 200, done.raw);
    assert.equal(done.body.dryRun, false);
    assert.equal(done.body.mutation, true);
    assert.deepEqual(ids(done.body), [failedA]);
    assert.equal(done.body.tasks[0].state, 'queued');
    assert.equal(done.body.tasks[0].counters.retries, 1);
    const history = (await show(rig.t, failedA)).retries;
    assert.equal(history.length, 1);
    assert.equal(history[0].bulk, true);
    assert.equal((await show(rig.t, failedB)).state, 'failed');
    assert.equal((await show(rig.t, elsewhere)).state, 'failed');
    // Nothing else matches now: an empty answer, nothing written.
    const none = await rig.t.api('POST', BULK, { queue: q, failureKind: 'backend-failed' });
    assert.deepEqual(none.body.tasks, []);
  });

  it('bulk: the limit caps the retry and says more matched', async () => {
    const q = 'bulk-limit';
    const all = [];
    for (let i = 0; i < 5; i++) all.push(await ended('failed', { queue: q }));
    const first = await rig.t.api('POST', BULK, { queue: q, limit: 3 });
    assert.equal(first.body.tasks.length, 3);
    assert.equal(first.body.more, true);
    assert.equal(first.body.limit, 3);
    assert.deepEqual(
      first.body.tasks.map((t: any) => t.taskId),
      all.slice(0, 3),
      'oldest change first',
    );
    const rest = await rig.t.api('POST', BULK, { queue: q, limit: 3 });
    assert.equal(rest.body.tasks.length, 2);
    assert.equal(rest.body.more, false);
    const defaulted = await rig.t.api('POST', BULK, { queue: q, dryRun: true });
    assert.equal(defaulted.body.limit, 100);
  });

  it('two managers running the same bulk retry at once retry each task exactly once', async () => {
    const q = 'bulk-race';
    const all: string[] = [];
    for (let i = 0; i < 30; i++) all.push(await ended('failed', { queue: q }));
    const bases = [rig.t.manager.url, second.manager.url];
    const answers = await Promise.all(
      [0, 1, 2, 3].map((i) => call(bases[i % 2]!, 'POST', BULK, { queue: q, limit: 500 })),
    );
    for (const a of answers) assert.equal(a.status, 200, a.raw);
    const retried = answers.flatMap((a) => a.body.tasks.map((t: any) => t.taskId));
    assert.equal(retried.length, 30, 'every task retried by exactly one of them');
    assert.deepEqual([...new Set(retried)].sort(), [...all].sort());
    assert.equal(
      await rowCount(rig.t, 'queue_task_retries', sql`task_id = ANY(${all}::text[])`),
      30,
    );
    assert.equal(
      await rowCount(
        rig.t,
        'queue_tasks',
        sql`queue = ${q} AND state = 'queued' AND retry_count = 1`,
      ),
      30,
    );
  });
});
