import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import {
  ensureTestTag,
  liveRunnerJobs,
  sampleRunnerJobs,
  userTexts,
  type RecordedRequest,
} from '@svc/testkit';
import { runEvents, useE2E, waitFor, waitForCommand } from './e2e-helpers.js';
import { FAST_SCHEDULER } from './scheduler-helpers.js';

/**
 * What capacity says is what runs: real runner processes driving the real agent against a
 * loopback provider, counted in /proc (not in rows). A limit of one holds for runner processes
 * at every sampled moment, judge runs included; a queue task's runner ends with its turn
 * instead of idling; a runner killed mid-turn is replaced as soon as its launcher saw it die,
 * long before its lease would expire; concurrent runner-job creates for one command start one
 * runner.
 */
const LEASE_TTL_MS = 30_000;
const rig = useE2E({
  env: {
    ...FAST_SCHEDULER,
    SVC_SCHEDULER_MAX_RUNNING: '1',
    // Long enough that an idling runner, or a replacement at lease expiry, would show.
    SVC_RUNNER_IDLE_EXIT_MS: '120000',
    SVC_LEASE_TTL_MS: String(LEASE_TTL_MS),
    SVC_REPLACEMENT_BACKOFF_MS: '500',
  },
});
const tag = ensureTestTag();

const submit = async (body: Record<string, unknown>) => {
  const res = await rig.e.t.api('POST', '/api/v1/queue/tasks', {
    tenantId: 'tenant-a',
    projectId: 'proj-1',
    queue: 'main',
    title: 'live runners',
    executionPolicy: { timeoutMs: 60_000 },
    ...body,
  });
  assert.equal(res.status, 201, res.raw);
  return res.body as { taskId: string };
};
const task = async (taskId: string) =>
  (await rig.e.t.api('GET', `/api/v1/queue/tasks/${taskId}`)).body;

/** The run's runner jobs once none is live any more (each recorded as it ended). */
const endedJobs = (runId: string) =>
  waitFor(`the runner jobs of ${runId} to be recorded ended`, async () => {
    const jobs = (await rig.e.t.api('GET', `/api/v1/runs/${runId}/runner-jobs`)).body.runnerJobs;
    return jobs.every(
      (j: { phase: string }) => !['pending', 'starting', 'running'].includes(j.phase),
    )
      ? (jobs as Array<{ phase: string; exitCode: number | null }>)
      : null;
  });

describe('live runners', () => {
  it('holds a limit of one for runner processes at every moment, judge runs included', async (t) => {
    const { e } = rig;
    const answer = (request: RecordedRequest) =>
      userTexts(request).join('\n').includes('"verdict"') ? '{"verdict":"pass"}' : 'Done.';
    e.provider.enqueue(
      ...Array.from({ length: 8 }, () => ({
        kind: 'text' as const,
        text: answer,
        deltas: 3,
        frameDelayMs: 100,
      })),
    );
    const sampler = sampleRunnerJobs(tag, 10);
    const started = Date.now();
    const tasks = [
      await submit({
        payload: { prompt: 'First, judged.' },
        judge: { prompt: 'Pass any reply.' },
      }),
      await submit({ payload: { prompt: 'Second.' } }),
      await submit({ payload: { prompt: 'Third.' } }),
    ];
    const db = e.t.manager.store.db;
    let rowsPeak = 0;
    const done = await waitFor(
      'every task to complete',
      async () => {
        const live = await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM runner_jobs
          WHERE phase IN ('pending', 'starting', 'running')`.execute(db);
        rowsPeak = Math.max(rowsPeak, live.rows[0]!.n);
        const shown = await Promise.all(tasks.map((x) => task(x.taskId)));
        return shown.every((s) => s.state === 'completed') ? shown : null;
      },
      120_000,
    );
    // The last runner ends with its turn, not after its idle exit.
    await waitFor('the last runner to exit', () => liveRunnerJobs(tag).size === 0, 20_000);
    const elapsed = Date.now() - started;
    const { peak, samples, seen } = await sampler.stop();
    t.diagnostic(`${samples} samples, ${seen.size} runner jobs seen, peak ${peak}, ${elapsed} ms`);
    assert.equal(seen.size, 4, 'three attempts and one judge each had a runner');
    assert.equal(peak, 1, 'never more than one runner job alive at once');
    assert.ok(rowsPeak <= 1, `live runner jobs in the database peaked at ${rowsPeak}`);
    // Each runner ended right after its turn, not after its idle exit (120 s).
    const lingered = await sql<{ job_name: string; ms: number }>`
      SELECT j.job_name, extract(epoch FROM j.finished_at - c.terminal_at) * 1000 AS ms
      FROM runner_jobs j JOIN commands c ON c.command_id = j.command_id`.execute(db);
    for (const row of lingered.rows)
      assert.ok(Number(row.ms) < 30_000, `${row.job_name} ended ${row.ms} ms after its turn`);
    const judged = done[0];
    assert.equal(judged.judgeRuns.length, 1);
    assert.equal(judged.judgeRuns[0].verdict, 'pass');
    // Each run closed with its turn, in its outcome, and its runner exited 0.
    for (const shown of done) {
      const runId = shown.latestAttempt.runId as string;
      const run = (await e.t.api('GET', `/api/v1/runs/${runId}`)).body;
      assert.equal(run.state, 'completed', JSON.stringify(run));
      const jobs = await endedJobs(runId);
      assert.deepEqual(
        jobs.map((j) => [j.phase, j.exitCode]),
        [['succeeded', 0]],
      );
    }
  });

  it('closes a queue task’s run in its failed turn’s outcome, and its runner ends with it', async () => {
    const { e } = rig;
    e.provider.dropSteps().enqueue(
      ...Array.from({ length: 5 }, () => ({
        kind: 'http-error' as const,
        status: 401,
        message: 'bad key',
      })),
    );
    const submitted = await submit({ payload: { prompt: 'Fails at the provider.' } });
    const shown = await waitFor(
      'the task to fail',
      async () => {
        const s = await task(submitted.taskId);
        return s.state === 'failed' ? s : null;
      },
      60_000,
    );
    const runId = shown.latestAttempt.runId as string;
    const run = await waitFor('the run to close', async () => {
      const r = (await e.t.api('GET', `/api/v1/runs/${runId}`)).body;
      return r.state === 'running' || r.state === 'claimed' ? null : r;
    });
    assert.deepEqual([run.state, run.failureKind], ['failed', 'provider-auth-failed']);
    const [job] = await endedJobs(runId);
    assert.deepEqual([job!.phase, job!.exitCode], ['succeeded', 0]);
  });

  it('replaces a runner killed mid-turn as soon as it died, long before its lease expires', async (t) => {
    const { e } = rig;
    e.provider
      .dropSteps()
      .enqueue({ kind: 'stall' }, { kind: 'text', text: 'Recovered: the sky is blue.' });
    const before = e.provider.requestsOf().length;
    const submitted = await submit({ payload: { prompt: 'What colour is the sky?' } });
    await e.provider.waitForRequest(before + 1, { timeoutMs: 60_000 });
    const attempt = await waitFor('the turn to be acknowledged', async () => {
      const latest = (await task(submitted.taskId)).latestAttempt;
      if (!latest?.commandId) return null;
      const c = await e.t.api('GET', `/api/v1/runs/${latest.runId}/commands/${latest.commandId}`);
      return c.body.threadId ? latest : null;
    });
    const runId = attempt.runId as string;
    const [job] = (await e.t.api('GET', `/api/v1/runs/${runId}/runner-jobs`)).body.runnerJobs;
    // The runner alone is killed, as by the OOM killer: its launcher sees the process end.
    const killedAt = Date.now();
    process.kill(Number(job.podIdentity.split(':').at(-1)), 'SIGKILL');
    const recovered = await waitFor(
      'a replacement to claim the run',
      async () =>
        (await runEvents(e.t, runId)).find((ev) => ev.name === 'runner.claim.recovered') ?? null,
      LEASE_TTL_MS,
    );
    const claimMs = Date.now() - killedAt;
    e.provider.release();
    const done = await waitForCommand(e.t, runId, attempt.commandId, 90_000);
    t.diagnostic(`kill to replacement claim: ${claimMs} ms (lease TTL ${LEASE_TTL_MS} ms)`);
    assert.ok(claimMs < LEASE_TTL_MS / 3, `the replacement claimed ${claimMs} ms after the kill`);
    assert.equal(recovered.data.previousOwner, job.runnerId);
    assert.equal(done.state, 'completed', JSON.stringify(done));
    const events = await runEvents(e.t, runId);
    const lost = events.find((ev) => ev.name === 'runner.lost');
    assert.ok(lost, 'the run says its runner was lost');
    assert.equal(lost.data.runnerJobId, job.runnerJobId);
    assert.equal(lost.data.leaseReleased, true);
    const finished = await waitFor('the task to complete', async () => {
      const shown = await task(submitted.taskId);
      return shown.state === 'completed' ? shown : null;
    });
    assert.equal(finished.counters.attempts, 1, 'the same attempt continued, no retry');
    const jobs = await endedJobs(runId);
    assert.deepEqual(
      jobs.map((j) => j.phase),
      ['failed', 'succeeded'],
    );
    assert.equal(liveRunnerJobs(tag).size, 0);
  });

  it('starts one runner for concurrent runner-job creates of one command', async () => {
    const { e } = rig;
    e.provider.dropSteps().enqueue({ kind: 'stall' });
    const before = e.provider.requestsOf().length;
    const run = await e.t.api('POST', '/api/v1/runs', {
      tenantId: 'tenant-a',
      projectId: 'proj-1',
      workspaceRef: { kind: 'opaque' },
      providerId: 'openai',
      backendProfile: 'builtin-a',
      executionPolicy: { timeoutMs: 60_000 },
      traceSink: null,
    });
    assert.equal(run.status, 201, run.raw);
    const runId = run.body.runId as string;
    const command = await e.t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'One runner, please.' },
    });
    const commandId = command.body.commandId as string;
    const sampler = sampleRunnerJobs(tag, 10);
    // Careless clients: the same request twelve times at once, and four that differ.
    const same = Array.from({ length: 12 }, () =>
      e.t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, { commandId }),
    );
    const other = Array.from({ length: 4 }, (_, i) =>
      e.t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, {
        commandId,
        transientEnv: [{ name: 'LAB_RUNTIME_WEB_URL', value: `https://lab.example/${i}` }],
      }),
    );
    const answers = await Promise.all([...same, ...other]);
    // The runner is at work (its turn reached the model); any second one would be up by now.
    await e.provider.waitForRequest(before + 1, { timeoutMs: 60_000 });
    await new Promise((r) => setTimeout(r, 1000));
    const { peak, seen } = await sampler.stop();
    const created = answers.filter((a) => a.status === 201);
    assert.equal(created.length, 1, answers.map((a) => a.raw).join('\n'));
    const jobId = created[0]!.body.runnerJobId as string;
    for (const a of answers) {
      if (a.status === 409) {
        assert.equal(a.body.failureKind, 'state-conflict');
        assert.equal(a.body.details.runnerJobId, jobId, 'the refusal names the live job');
      } else {
        assert.ok([200, 201].includes(a.status), a.raw);
        assert.equal(a.body.runnerJobId, jobId, 'the same job answers the same request');
      }
    }
    assert.equal(answers.filter((a) => a.status === 409).length, 4, 'differing requests refused');
    assert.equal(seen.size, 1, 'one runner process was started');
    assert.equal(peak, 1);
    const listed = (await e.t.api('GET', `/api/v1/runs/${runId}/runner-jobs`)).body.runnerJobs;
    assert.equal(listed.length, 1);
    await e.t.api('POST', `/api/v1/runs/${runId}/cancel`, { reason: 'test ended' });
    e.provider.release();
    await waitFor('the runner to exit', () => liveRunnerJobs(tag).size === 0, 20_000);
  });
});
