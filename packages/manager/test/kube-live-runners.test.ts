import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { FakeKube } from '@svc/testkit';
import { startTestManager, TestRunner, type TestManager } from './helpers.js';
import { eventually } from './kube-helpers.js';
import { FAST_SCHEDULER } from './scheduler-helpers.js';

/**
 * Capacity and recovery on the Kubernetes launcher, against the fake API server: a runner Job
 * holds its task's capacity until the Job watch reports it finished, not until its command
 * ended; a Job the watch reports failed mid-turn is replaced at once, long before its runner's
 * lease would expire, and the replacement holds the capacity in turn.
 */
const NS = 'svc-v01';
const LEASE_TTL_MS = 30_000;
let fake: FakeKube;
let t: TestManager;

before(async () => {
  fake = await FakeKube.start();
  t = await startTestManager({
    env: {
      ...FAST_SCHEDULER,
      SVC_SCHEDULER_MAX_RUNNING: '1',
      SVC_LAUNCHER: 'kubernetes',
      SVC_SECRET_STORE: 'kubernetes',
      SVC_KUBE_API_URL: fake.url,
      SVC_MANAGER_PUBLIC_URL: 'http://svc-run-manager.svc-v01.svc:8080',
      SVC_KUBE_POLL_INTERVAL_MS: '100',
      SVC_LEASE_TTL_MS: String(LEASE_TTL_MS),
      SVC_REPLACEMENT_BACKOFF_MS: '500',
    },
  });
  await t.configureProfile('builtin-a');
});
after(async () => {
  await t.close();
  await fake.close();
});

/** Runner Job names the manager created in the cluster, in order. */
const jobsCreated = () =>
  fake.requests
    .filter(
      (r) => r.method === 'POST' && /\/apis\/batch\/v1\/namespaces\/[^/]+\/jobs$/.test(r.path),
    )
    .map((r) => (r.body as { metadata: { name: string } }).metadata.name);

async function submit(prompt: string): Promise<string> {
  const res = await t.api('POST', '/api/v1/queue/tasks', {
    tenantId: 'tenant-a',
    projectId: 'proj-1',
    queue: 'main',
    title: prompt,
    payload: { prompt },
  });
  assert.equal(res.status, 201, res.raw);
  return res.body.taskId as string;
}

const task = async (taskId: string) => (await t.api('GET', `/api/v1/queue/tasks/${taskId}`)).body;

/** The runner's part, up to an acknowledged turn. */
async function acknowledged(taskId: string) {
  const attempt = await eventually(async () => {
    const latest = (await task(taskId)).latestAttempt;
    return latest?.commandId && latest.runner.runnerId ? latest : undefined;
  });
  const runner = new TestRunner(t, attempt.runner.runnerId, attempt.runId);
  assert.equal((await runner.claim()).status, 200);
  await runner.poll();
  assert.equal((await runner.ack(attempt.commandId)).status, 200);
  return { attempt, runner };
}

/** No new Job for a while (several scheduler passes at FAST_SCHEDULER's scan). */
async function noNewJobFor(ms: number, count: number, why: string): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    assert.equal(jobsCreated().length, count, why);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('live runner Jobs on Kubernetes', () => {
  it('hold their capacity until the Job watch reports them finished', async () => {
    const before = jobsCreated().length;
    const first = await submit('first');
    const second = await submit('second');
    const [firstJob] = await eventually(() => {
      const made = jobsCreated().slice(before);
      return made.length > 0 ? made : undefined;
    });
    const { attempt, runner } = await acknowledged(first);
    assert.equal((await runner.finish(attempt.commandId, 'completed')).status, 200);
    await eventually(async () => ((await task(first)).state === 'completed' ? true : undefined));
    // The turn ended, its Job has not: the limit of one is still taken.
    await noNewJobFor(1500, before + 1, 'no second Job while the first still runs');
    assert.equal((await task(second)).state, 'queued');
    fake.setJobState(NS, firstJob!, 'succeeded');
    const started = Date.now();
    await eventually(() => (jobsCreated().length === before + 2 ? true : undefined));
    assert.ok(Date.now() - started < 5000, 'the next task starts once the Job finished');
    // The finished Job closed its single-turn run in its turn's outcome.
    const run = (await t.api('GET', `/api/v1/runs/${attempt.runId}`)).body;
    assert.equal(run.state, 'completed');
    // Leave nothing running for the next test.
    const next = await acknowledged(second);
    await next.runner.finish(next.attempt.commandId, 'completed');
    fake.setJobState(NS, jobsCreated().at(-1)!, 'succeeded');
    await eventually(async () =>
      (await t.api('GET', `/api/v1/runs/${next.attempt.runId}`)).body.state === 'completed'
        ? true
        : undefined,
    );
  });

  it('replace a Job the watch reports failed mid-turn at once; the replacement holds the capacity', async () => {
    const before = jobsCreated().length;
    const lost = await submit('lost mid-turn');
    const waiting = await submit('waits its turn');
    const [jobName] = await eventually(() => {
      const made = jobsCreated().slice(before);
      return made.length > 0 ? made : undefined;
    });
    const { attempt } = await acknowledged(lost);
    // The node went away: the Job controller gives up on the pod.
    const failedAt = Date.now();
    fake.setJobState(NS, jobName!, 'failed', {
      exitCode: 137,
      reason: 'PodFailurePolicy',
      message: 'node lost',
    });
    const replacement = await eventually(() => {
      const made = jobsCreated().slice(before);
      return made.length === 2 ? made[1] : undefined;
    }, LEASE_TTL_MS);
    const elapsed = Date.now() - failedAt;
    assert.ok(
      elapsed < 5000,
      `replaced ${elapsed} ms after the Job failed (lease ${LEASE_TTL_MS})`,
    );
    const jobs = (await t.api('GET', `/api/v1/runs/${attempt.runId}/runner-jobs`)).body.runnerJobs;
    assert.deepEqual(
      jobs.map((j: { jobName: string; phase: string }) => [
        j.jobName,
        ['pending', 'starting'].includes(j.phase) ? 'live' : j.phase,
      ]),
      [
        [jobName, 'failed'],
        [replacement, 'live'],
      ],
    );
    const events = (await t.api('GET', `/api/v1/runs/${attempt.runId}/events?limit=1000`)).body
      .events;
    const runnerLost = events.find((e: { name: string }) => e.name === 'runner.lost');
    assert.equal(runnerLost.data.jobName, jobName);
    // The replacement claims at once: the lease was released with the report.
    const replacementRunner = new TestRunner(
      t,
      jobs[1].runnerId as string,
      attempt.runId as string,
    );
    const claim = await replacementRunner.claim('replacement');
    assert.equal(claim.status, 200, claim.raw);
    // It holds the task's capacity: the other task waits for it.
    await noNewJobFor(1500, before + 2, 'the replacement holds the only slot');
    assert.equal((await task(waiting)).state, 'queued');
    await replacementRunner.poll();
    assert.equal((await replacementRunner.ack(attempt.commandId)).status, 200);
    assert.equal((await replacementRunner.finish(attempt.commandId, 'completed')).status, 200);
    fake.setJobState(NS, replacement, 'succeeded');
    await eventually(() => (jobsCreated().length === before + 3 ? true : undefined));
    const shown = await task(lost);
    assert.equal(shown.state, 'completed');
    assert.equal(shown.counters.attempts, 1, 'the same attempt went on');
  });
});
