import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { ensureTestTag, liveRunnerJobs } from '@svc/testkit';
import { TestRunner } from './helpers.js';
import { waitFor } from './e2e-helpers.js';
import { show, startQueueRig, stopStandIn, submit, type QueueRig } from './queue-helpers.js';
import { endAttempt, FAST_SCHEDULER, startedAttempt } from './scheduler-helpers.js';

/**
 * A slot is a live runner, not an open attempt: a runner that lives on after its attempt
 * ended (its turn reported, its process not yet gone) keeps its slot, beside a retry of the
 * same task, and against a manual dispatch. Stand-in runners here stay up until told to stop.
 */
const tag = ensureTestTag();
let rig: QueueRig;
before(async () => {
  rig = await startQueueRig({ env: { ...FAST_SCHEDULER, SVC_SCHEDULER_MAX_RUNNING: '2' } });
});
after(() => rig.close());

const liveRows = async () =>
  (
    await sql<{ n: number }>`SELECT count(*)::int AS n FROM runner_jobs
      WHERE phase IN ('pending', 'starting', 'running')`.execute(rig.t.manager.store.db)
  ).rows[0]!.n;

/** Over a while, nothing more starts: neither a Job record nor a process. */
async function holdsFor(ms: number, live: number, why: string): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    assert.equal(await liveRows(), live, why);
    assert.ok(liveRunnerJobs(tag).size <= live, `${why}: processes`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** End an attempt's turn as its runner would, leaving the runner process up. */
async function endTurnOnly(attempt: any, state: 'completed' | 'failed', extra = {}) {
  const runner = new TestRunner(rig.t, attempt.runner.runnerId, attempt.runId);
  assert.equal((await runner.claim()).status, 200);
  await runner.poll();
  assert.equal((await runner.ack(attempt.commandId)).status, 200);
  assert.equal((await runner.finish(attempt.commandId, state, extra)).status, 200);
}

describe('slots held by live runners', () => {
  it('a retry waits beside its own earlier runner still alive, and counts apart from it', async () => {
    const { t } = rig;
    const a = await submit(t, { maxAttempts: 2 });
    const b = await submit(t);
    const a1 = await startedAttempt(t, a.taskId);
    const b1 = await startedAttempt(t, b.taskId);
    await endTurnOnly(a1, 'failed', { failureKind: 'provider-unavailable', message: '503' });
    await waitFor(
      'a to be queued for its retry',
      async () => (await show(t, a.taskId)).state === 'queued',
    );
    const c = await submit(t);
    // a's first runner and b's are alive: both slots are taken.
    await holdsFor(1500, 2, 'no retry and no new task while two runners live');
    assert.equal((await show(t, c.taskId)).state, 'queued');
    await endAttempt(t, b1, 'completed');
    // One slot free: exactly one of a's retry and c starts; a's first runner keeps the other.
    await waitFor('one more to start', async () => {
      const [sa, sc] = [await show(t, a.taskId), await show(t, c.taskId)];
      return sa.state !== 'queued' || sc.state !== 'queued';
    });
    await holdsFor(1500, 2, 'the lingering runner still holds a slot');
    const states = [(await show(t, a.taskId)).state, (await show(t, c.taskId)).state];
    assert.equal(states.filter((s) => s === 'queued').length, 1, states.join(','));
    // The earlier runner ends: the last one starts.
    await stopStandIn(t, a1.runner.jobName);
    await waitFor('both to be under way', async () => {
      const [sa, sc] = [await show(t, a.taskId), await show(t, c.taskId)];
      return sa.state !== 'queued' && sc.state !== 'queued';
    });
    const a2 = await startedAttempt(t, a.taskId, 1);
    await endAttempt(t, a2, 'completed');
    await endAttempt(t, await startedAttempt(t, c.taskId), 'completed');
    assert.equal(await liveRows(), 0);
  });

  it('refuses a manual dispatch while a runner whose attempt ended still holds the slot', async () => {
    const { t } = rig;
    await t.api('PUT', '/api/v1/queue/queues/solo/settings', { maxRunning: 1 });
    const x = await submit(t, { queue: 'solo' });
    const x1 = await startedAttempt(t, x.taskId);
    await endTurnOnly(x1, 'completed');
    await waitFor('x completed', async () => (await show(t, x.taskId)).state === 'completed');
    const y = await submit(t, { queue: 'solo' });
    const refused = await t.api('POST', `/api/v1/queue/tasks/${y.taskId}/dispatch`, {});
    assert.equal(refused.status, 429, refused.raw);
    assert.equal(refused.body.failureKind, 'capacity-exhausted');
    assert.deepEqual([refused.body.details.scope, refused.body.details.inUse], ['queue', 1]);
    await holdsFor(1000, 1, 'the scheduler leaves y queued too');
    await stopStandIn(t, x1.runner.jobName);
    // The run its runner left served is closed in its turn's outcome.
    assert.equal((await t.api('GET', `/api/v1/runs/${x1.runId}`)).body.state, 'completed');
    await endAttempt(t, await startedAttempt(t, y.taskId), 'completed');
  });
});
