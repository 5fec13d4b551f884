import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ensureTestTag, processesWithTag } from '@svc/testkit';
import { dispatch, isolateTests, useE2E, waitFor } from './e2e-helpers.js';
import { FAST_SCHEDULER } from './scheduler-helpers.js';

/**
 * What the service says is what is happening, with real runner processes driving the real
 * agent against a loopback provider: a run whose only turn failed reads failed once its runner
 * closes it (and said what it was doing on the way), and a queue task reads `running` exactly
 * while its runner works on its turn. No turn here runs a shell command.
 */
const rig = useE2E({ env: { ...FAST_SCHEDULER, SVC_METRICS_COUNTS_MAX_AGE_MS: '0' } });
isolateTests(rig);
const tag = ensureTestTag();

/** The runner and agent processes of this test file that are alive now. */
function working(): { runners: number; agents: number } {
  const alive = processesWithTag(tag);
  return {
    runners: alive.filter((p) => /runner\/(dist|bin)\//.test(p.command)).length,
    agents: alive.filter((p) => /codex/.test(p.command) && /app-server/.test(p.command)).length,
  };
}

/** Consecutive distinct values, as a poll saw them. */
function changes<T>(seen: T[]): T[] {
  return seen.filter((value, i) => i === 0 || value !== seen[i - 1]);
}

describe('a failed turn does not hide', () => {
  it('the run says waiting-runner, turn-active, idle, closed, and ends failed with the turn failure kind', async () => {
    const { e } = rig;
    // More 500s than the agent retries: the turn fails provider-unavailable, after retries that
    // keep it active long enough to be seen.
    e.provider.enqueue(
      ...Array.from({ length: 12 }, () => ({ kind: 'http-error' as const, status: 500 })),
    );
    const { runId, commandId } = await dispatch(e, 'Say hello.');
    const activities: string[] = [];
    const whileActive: Array<{ runners: number; agents: number }> = [];
    const closed = await waitFor(
      'the runner to close the run',
      async () => {
        const run = (await e.t.api('GET', `/api/v1/runs/${runId}`)).body;
        activities.push(run.activity);
        if (run.activity === 'turn-active') whileActive.push(working());
        return run.activity === 'closed' ? run : null;
      },
      150_000,
    );
    assert.deepEqual(
      changes(activities),
      ['waiting-runner', 'turn-active', 'idle', 'closed'],
      'activity as the run lived it',
    );
    assert.ok(
      whileActive.some((w) => w.runners >= 1 && w.agents >= 1),
      `a runner and its agent were alive while the run read turn-active: ${JSON.stringify(whileActive)}`,
    );
    assert.equal(closed.state, 'failed', JSON.stringify(closed));
    assert.equal(closed.failureKind, 'provider-unavailable');
    assert.deepEqual(
      {
        commandId: closed.lastCommand.commandId,
        state: closed.lastCommand.state,
        failureKind: closed.lastCommand.failureKind,
      },
      { commandId, state: 'failed', failureKind: 'provider-unavailable' },
    );
    assert.ok(e.provider.requestsOf().length >= 2, 'the agent asked the provider, and retried');

    // The listing, its filters and the metrics agree with the record.
    const failed = await e.t.api('GET', '/api/v1/runs?state=failed&lastOutcome=failed');
    assert.ok(failed.body.runs.some((r: any) => r.runId === runId));
    const completed = await e.t.api('GET', '/api/v1/runs?state=completed');
    assert.ok(!completed.body.runs.some((r: any) => r.runId === runId), 'not completed');
    const metrics = (await e.t.api('GET', '/metrics')).raw;
    assert.match(metrics, /svc_runs\{state="failed"\} [1-9]/);
    assert.match(
      metrics,
      /svc_runs_failed\{state="failed",failure_kind="provider-unavailable"\} [1-9]/,
    );

    // Closed means gone: the runner exited and its agent with it.
    const after = await waitFor(
      'the runner and agent to exit',
      () => {
        const w = working();
        return w.runners === 0 && w.agents === 0 ? w : null;
      },
      30_000,
    );
    assert.deepEqual(after, { runners: 0, agents: 0 });
  });
});

describe('a task reads running while its turn runs', () => {
  it('dispatched until its runner takes the turn, running while the agent works, then completed', async () => {
    const { e } = rig;
    // A reply streamed slowly: the turn lasts a few seconds.
    e.provider.enqueue({
      kind: 'text',
      text: 'Working on it, slowly and surely.',
      deltas: 30,
      frameDelayMs: 120,
    });
    const submitted = await e.t.api('POST', '/api/v1/queue/tasks', {
      tenantId: 'tenant-a',
      projectId: 'proj-1',
      queue: 'truth',
      title: 'a slow turn',
      executionPolicy: { timeoutMs: 60_000 },
      payload: { prompt: 'Take your time.' },
    });
    assert.equal(submitted.status, 201, submitted.raw);
    const taskId = submitted.body.taskId as string;
    const seen: string[] = [];
    const samples: Array<{
      state: string;
      statsRunning: number;
      runners: number;
      agents: number;
      requests: number;
    }> = [];
    const done = await waitFor(
      'the task to complete',
      async () => {
        const [task, stats] = await Promise.all([
          e.t.api('GET', `/api/v1/queue/tasks/${taskId}`),
          e.t.api('GET', '/api/v1/queue/stats?queue=truth'),
        ]);
        seen.push(task.body.state);
        samples.push({
          state: task.body.state,
          statsRunning: stats.body.tasks.byState.running,
          ...working(),
          requests: e.provider.requestsOf().length,
        });
        return task.body.state === 'completed' ? task.body : null;
      },
      150_000,
    );
    const states = changes(seen).filter((s) => s !== 'queued');
    assert.deepEqual(states, ['dispatched', 'running', 'completed'], JSON.stringify(samples));
    const running = samples.filter((s) => s.state === 'running');
    assert.ok(running.length >= 3, `running was seen for a while: ${running.length} samples`);
    // Counted by the queue's own statistics while it ran.
    assert.ok(
      running.every((s) => s.statsRunning === 1),
      JSON.stringify(running),
    );
    // And true of the processes: its runner was alive every time it read running, and the agent
    // was streaming the reply (the provider had the turn's request) while it did.
    assert.ok(
      running.every((s) => s.runners >= 1),
      JSON.stringify(running),
    );
    assert.ok(
      running.some((s) => s.agents >= 1 && s.requests >= 1),
      JSON.stringify(running),
    );
    // Before the ack nothing counted it running.
    for (const s of samples.filter((x) => x.state === 'dispatched'))
      assert.equal(s.statsRunning, 0);
    assert.equal(done.latestAttempt.state, 'completed');
    assert.ok(done.latestAttempt.startedAt, 'the attempt started at the ack');
  });
});
