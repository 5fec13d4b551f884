import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { userTexts, type RecordedRequest } from '@svc/testkit';
import {
  agentPidOf,
  killGroup,
  runEvents,
  useE2E,
  waitFor,
  waitForCommand,
} from './e2e-helpers.js';
import { FAST_SCHEDULER } from './scheduler-helpers.js';

/**
 * The scheduler with real runners driving the real agent against a loopback provider: judge
 * runs that send a task back with a suggestion, and a runner killed mid-turn replaced by itself.
 */
const rig = useE2E({ env: { ...FAST_SCHEDULER, SVC_REPLACEMENT_BACKOFF_MS: '500' } });

const submit = async (body: Record<string, unknown>) => {
  const res = await rig.e.t.api('POST', '/api/v1/queue/tasks', {
    tenantId: 'tenant-a',
    projectId: 'proj-1',
    queue: 'main',
    title: 'scheduled',
    executionPolicy: { timeoutMs: 60_000 },
    ...body,
  });
  assert.equal(res.status, 201, res.raw);
  return res.body;
};
const task = async (taskId: string) =>
  (await rig.e.t.api('GET', `/api/v1/queue/tasks/${taskId}`)).body;
const lastUserText = (request: RecordedRequest) => userTexts(request).join('\n');

describe('scheduler end to end', () => {
  it('judges each attempt: a failing verdict with a suggestion retries with it, a pass completes', async () => {
    const { e } = rig;
    let judged = 0;
    const answer = (request: RecordedRequest) => {
      const text = lastUserText(request);
      if (text.includes('"verdict"'))
        return ++judged === 1
          ? '{"verdict":"fail","suggestion":"Name the fruit: banana."}'
          : '{"verdict":"pass"}';
      return text.includes('banana') ? 'The fruit is banana.' : 'Some fruit.';
    };
    e.provider.enqueue(
      ...Array.from({ length: 6 }, () => ({ kind: 'text' as const, text: answer })),
    );
    const submitted = await submit({
      payload: { prompt: 'Name a fruit.' },
      judge: { prompt: 'Check that the reply names the fruit banana.' },
    });
    // Every read on the way: a judged task never reads completed before its last verdict.
    const early: string[] = [];
    const done = await waitFor(
      'the judged task to complete',
      async () => {
        const shown = await task(submitted.taskId);
        const judged =
          shown.judgeRuns.length === 2 &&
          shown.judgeRuns.every((j: { state: string }) => j.state !== 'requested');
        if (shown.state === 'completed' && !judged) early.push(JSON.stringify(shown.judgeRuns));
        return shown.state === 'completed' ? shown : null;
      },
      120_000,
    );
    assert.deepEqual(early, [], 'the task read completed before its judge verdicts were recorded');
    assert.equal(done.counters.attempts, 2);
    const list = await e.t.api('GET', `/api/v1/queue/tasks/${submitted.taskId}/judge-runs`);
    assert.equal(list.status, 200, list.raw);
    const [first, second] = list.body.judgeRuns;
    assert.equal(first.verdict, 'fail');
    assert.equal(first.retrySuggestion, 'Name the fruit: banana.');
    assert.equal(second.verdict, 'pass', JSON.stringify(list.body.judgeRuns));
    assert.notEqual(first.attemptId, second.attemptId);
    assert.equal(second.attemptId, done.latestAttempt.attemptId);
    assert.ok(first.runId && first.commandId && first.sessionId);
    assert.equal(done.scheduling.retryNote, 'Name the fruit: banana.');
    // The second attempt's prompt carried the suggestion to the agent.
    const prompts = e.provider.requestsOf().map(lastUserText);
    assert.ok(prompts.some((p) => p.includes('Name a fruit.') && p.includes('banana')));
  });

  it('replaces a runner killed mid-turn by itself: the turn completes on the same thread about one lease TTL later', async (t) => {
    const { e } = rig;
    e.provider
      .dropSteps()
      .enqueue({ kind: 'stall' }, { kind: 'text', text: 'Recovered: the sea is blue.' });
    const before = e.provider.requestsOf().length;
    const submitted = await submit({ payload: { prompt: 'What colour is the sea?' } });
    await e.provider.waitForRequest(before + 1, { timeoutMs: 60_000 });
    const attempt = await waitFor(
      'the turn to be acknowledged',
      async () => {
        const latest = (await task(submitted.taskId)).latestAttempt;
        if (!latest?.commandId) return null;
        const command = await e.t.api(
          'GET',
          `/api/v1/runs/${latest.runId}/commands/${latest.commandId}`,
        );
        return command.body.threadId ? { ...latest, threadId: command.body.threadId } : null;
      },
      30_000,
    );
    const runId = attempt.runId as string;
    const jobs = (await e.t.api('GET', `/api/v1/runs/${runId}/runner-jobs`)).body;
    const job = jobs.runnerJobs[0];
    const agentPid = agentPidOf(job.jobName);
    assert.ok(agentPid, 'the agent runs');
    // A node failure: the runner and its agent die at once, nobody posts a new runner job.
    const killedAt = Date.now();
    killGroup(Number(job.podIdentity.split(':').at(-1)));
    killGroup(agentPid);
    e.provider.release();
    const done = await waitForCommand(e.t, runId, attempt.commandId, 90_000);
    const elapsed = Date.now() - killedAt;
    assert.equal(done.state, 'completed', JSON.stringify(done));
    t.diagnostic(`kill to completion: ${elapsed} ms`);
    const leaseTtlMs = 6_000;
    assert.ok(
      elapsed < leaseTtlMs + 20_000,
      `kill to completion took ${elapsed} ms, lease TTL ${leaseTtlMs} ms`,
    );
    const finished = await waitFor(
      'the task to complete',
      async () => {
        const shown = await task(submitted.taskId);
        return shown.state === 'completed' ? shown : null;
      },
      30_000,
    );
    assert.equal(finished.counters.attempts, 1, 'the same attempt continued, no retry');
    const events = await runEvents(e.t, runId);
    const names = events.map((ev) => ev.name);
    const recovered = events.find((ev) => ev.name === 'runner.claim.recovered');
    assert.ok(recovered, `a replacement claimed the run: ${names.join(', ')}`);
    assert.equal(recovered.data.previousOwner, job.runnerId);
    assert.ok(names.includes('thread.resumed'), 'the thread was resumed, not restarted');
    const summary = (
      await e.t.api('GET', `/api/v1/runs/${runId}/commands/${attempt.commandId}/result`)
    ).body;
    assert.equal(summary.reply, 'Recovered: the sea is blue.');
    assert.equal(summary.threadId, attempt.threadId, 'the same thread continues');
    const after = (await e.t.api('GET', `/api/v1/runs/${runId}/runner-jobs`)).body;
    const all = after.runnerJobs;
    assert.equal(all.length, 2, 'one replacement runner job, started by the scheduler');
  });
});
