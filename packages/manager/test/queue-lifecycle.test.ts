import assert from 'node:assert/strict';
import { rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  acknowledge,
  dispatch,
  finish,
  refresh,
  show,
  startQueueRig,
  submit,
  type QueueRig,
} from './queue-helpers.js';

let rig: QueueRig;
before(async () => {
  rig = await startQueueRig();
});
after(() => rig.close());

const api = (method: string, url: string, body?: unknown) => rig.t.api(method, url, body);

describe('task outcomes follow their attempt without a refresh', () => {
  const cases: Array<['completed' | 'failed' | 'blocked', Record<string, unknown>, RegExp]> = [
    ['completed', {}, /^attempt 1 completed$/],
    [
      'failed',
      { failureKind: 'provider-unavailable', message: 'upstream answered 503' },
      /^attempt 1 failed \(provider-unavailable\): upstream answered 503$/,
    ],
    [
      'blocked',
      { failureKind: 'required-skill-unavailable', message: 'skill lint missing' },
      /^attempt 1 blocked \(required-skill-unavailable\): skill lint missing$/,
    ],
  ];
  for (const [state, extra, summary] of cases) {
    it(`${state}: task, attempt, counters and summary written with the terminal status`, async () => {
      const task = await submit(rig.t);
      const d = await dispatch(rig.t, task.taskId);
      await finish(rig.t, d, state, extra);
      const shown = await show(rig.t, task.taskId);
      assert.equal(shown.state, state, 'no refresh was needed');
      assert.equal(shown.latestAttempt.state, state);
      assert.equal(shown.latestAttempt.terminalStatus, state);
      assert.equal(shown.latestAttempt.failureKind, extra['failureKind'] ?? null);
      assert.match(shown.summary, summary, 'the summary is filled from the outcome');
      assert.equal(shown.latestAttempt.supervisor.phase, 'terminal');
      assert.equal(shown.counters.failed, state === 'failed' ? 1 : 0);
      assert.equal(shown.counters.blocked, state === 'blocked' ? 1 : 0);
      if (state === 'completed') assert.ok(shown.terminalAt);
      const listed = (await api('GET', `/api/v1/queue/tasks?queue=${task.queue}&limit=200`)).body;
      const row = listed.tasks.find((x: { taskId: string }) => x.taskId === task.taskId);
      assert.equal(row.state, state, 'the list answers the same');

      // Refresh stays a repair tool: with nothing new it changes nothing.
      const repaired = (await refresh(rig.t, task.taskId)).body;
      assert.equal(repaired.version, shown.version);
      assert.equal(repaired.state, state);
    });
  }

  it('a run cancelled through the run API ends the attempt and the task', async () => {
    const task = await submit(rig.t);
    const d = await dispatch(rig.t, task.taskId);
    await acknowledge(rig.t, d);
    const cancelled = await api('POST', `/api/v1/runs/${d.run.runId}/cancel`, { reason: 'stop' });
    assert.equal(cancelled.status, 200, cancelled.raw);
    const shown = await show(rig.t, task.taskId);
    assert.equal(shown.latestAttempt.state, 'cancelled');
    assert.equal(shown.state, 'cancelled');
  });

  it('a retry after a followed failure is the next attempt', async () => {
    const task = await submit(rig.t, { maxAttempts: 2 });
    const first = await dispatch(rig.t, task.taskId);
    await finish(rig.t, first, 'failed', { failureKind: 'backend-failed', message: 'boom' });
    assert.equal(
      (await show(rig.t, task.taskId)).next,
      `sessions trace ${first.session.sessionId} --after-seq 0`,
    );
    const second = await dispatch(rig.t, task.taskId);
    assert.equal(second.attempt.retryIndex, 1);
    await finish(rig.t, second, 'completed');
    const shown = await show(rig.t, task.taskId);
    assert.equal(shown.state, 'completed');
    assert.match(shown.summary, /^attempt 2 completed$/);
    // The task view lists both attempts, oldest first, each with its run and outcome.
    assert.deepEqual(
      shown.attempts.map((a: any) => [a.retryIndex, a.state, a.runId, a.failureKind]),
      [
        [0, 'failed', first.run.runId, 'backend-failed'],
        [1, 'completed', second.run.runId, null],
      ],
    );
    assert.equal(shown.attempts[0].message, 'boom');
    // A submitted task has none yet.
    const fresh = await submit(rig.t);
    assert.deepEqual((await show(rig.t, fresh.taskId)).attempts, []);
    assert.deepEqual(fresh.attempts, []);
  });
});

describe('next hints and snapshots of tasks that ended early', () => {
  it('a cancelled queued task suggests showing it, never dispatching it', async () => {
    const task = await submit(rig.t);
    await api('POST', `/api/v1/queue/tasks/${task.taskId}/cancel`, { reason: 'not needed' });
    const shown = await show(rig.t, task.taskId);
    assert.equal(shown.state, 'cancelled');
    assert.equal(shown.next, `queue show ${task.taskId}`);
    const listed = (await api('GET', `/api/v1/queue/tasks?queue=${task.queue}&limit=200`)).body;
    const row = listed.tasks.find((x: { taskId: string }) => x.taskId === task.taskId);
    assert.equal(row.next, `queue show ${task.taskId}`);
  });

  it('a cancelled dispatched task: its session to show, its snapshot terminal', async () => {
    const task = await submit(rig.t);
    const d = await dispatch(rig.t, task.taskId);
    await acknowledge(rig.t, d);
    const running = (await refresh(rig.t, task.taskId)).body;
    assert.equal(running.latestAttempt.supervisor.phase, 'waiting-model');
    await api('POST', `/api/v1/queue/tasks/${task.taskId}/cancel`, { reason: 'stop' });
    const shown = await show(rig.t, task.taskId);
    assert.equal(shown.latestAttempt.state, 'cancelled');
    assert.equal(shown.latestAttempt.supervisor.phase, 'terminal', 'not waiting-model');
    assert.equal(shown.latestAttempt.supervisor.timeoutBudget.remainingMs, 0);
    assert.equal(shown.next, `sessions show ${d.session.sessionId}`);
    const refreshed = (await refresh(rig.t, task.taskId)).body;
    assert.equal(refreshed.latestAttempt.supervisor.phase, 'terminal', 'a refresh keeps it over');
  });

  it('a task that failed during dispatch suggests another dispatch, not an empty trace', async () => {
    const task = await submit(rig.t, { maxAttempts: 2 });
    const jobs = join(rig.t.dataDir, 'jobs');
    await rename(jobs, `${jobs}.aside`).catch(() => undefined);
    await writeFile(jobs, 'not a directory');
    try {
      const res = await api('POST', `/api/v1/queue/tasks/${task.taskId}/dispatch`, {});
      assert.equal(res.status, 502, res.raw);
    } finally {
      await rm(jobs, { force: true });
      await rename(`${jobs}.aside`, jobs).catch(() => undefined);
    }
    const failed = await show(rig.t, task.taskId);
    assert.equal(failed.state, 'failed');
    assert.equal(failed.next, `queue dispatch ${task.taskId}`);
    assert.match(failed.summary, /^attempt 1 failed \(infra-failed\): /);
    const retry = await dispatch(rig.t, task.taskId);
    assert.equal(retry.attempt.retryIndex, 1);
  });

  it('a failed dispatch with no attempt left suggests a retry (a fresh budget)', async () => {
    const task = await submit(rig.t, { maxAttempts: 1 });
    const jobs = join(rig.t.dataDir, 'jobs');
    await rename(jobs, `${jobs}.aside`).catch(() => undefined);
    await writeFile(jobs, 'not a directory');
    try {
      await api('POST', `/api/v1/queue/tasks/${task.taskId}/dispatch`, {});
    } finally {
      await rm(jobs, { force: true });
      await rename(`${jobs}.aside`, jobs).catch(() => undefined);
    }
    assert.equal((await show(rig.t, task.taskId)).next, `queue retry ${task.taskId}`);
  });
});
