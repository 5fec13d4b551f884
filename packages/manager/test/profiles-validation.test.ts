import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startTestManager, TestRunner, type TestManager } from './helpers.js';
import { waitFor } from './e2e-helpers.js';

/**
 * How a validation concludes, from the command, result, events and runner job phase. The
 * manager and its launcher are real; the runner Job's program is a stand-in that stays up (or,
 * for profiles named `exit-…`, exits at once) while the test speaks the runner-facing API as
 * the runner would. The real runner and agent are exercised in profiles-e2e.
 */

const BASE = '/api/v1/provider-profiles';
let t: TestManager;
let dir: string;

const STAND_IN = `
if ((process.env.SVC_PROFILE ?? '').startsWith('exit-')) process.exit(3);
process.on('SIGTERM', () => process.exit(0));
setInterval(() => {}, 1000);
`;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'svc-standin-'));
  await writeFile(join(dir, 'runner.mjs'), STAND_IN);
  t = await startTestManager({ env: { SVC_RUNNER_ENTRY: join(dir, 'runner.mjs') } });
});
after(async () => {
  await t?.close();
  await rm(dir, { recursive: true, force: true });
});

async function configure(profile: string): Promise<void> {
  const res = await t.api('PUT', `${BASE}/${profile}/credential`, {
    apiKey: `sk-${profile}-0000000000000`,
    config: { model: 'm', baseUrl: 'https://llm.example.com/v1' },
    delegatedBy: { system: 'lab-backend', requestId: `req-${profile}` },
  });
  assert.ok(res.status === 201 || res.status === 200, res.raw);
}

/** Start a validation and take the runner's part: claim, poll, ack. */
async function startAndClaim(profile: string) {
  const started = await t.api('POST', `${BASE}/${profile}/validate`);
  assert.equal(started.status, 202, started.raw);
  const { runId, commandId } = started.body;
  const jobs = await t.api('GET', `/api/v1/runs/${runId}/runner-jobs`);
  const runner = new TestRunner(t, jobs.body.runnerJobs[0].runnerId, runId);
  assert.equal((await runner.claim()).status, 200);
  await runner.poll();
  assert.equal((await runner.ack(commandId)).status, 200);
  return { started: started.body, runner, runId, commandId };
}

const poll = (url: string) => t.api('GET', url);

async function settled(url: string) {
  return waitFor(
    'the validation to settle',
    async () => {
      const v = await poll(url);
      return v.body.status !== 'running' ? v.body : null;
    },
    15_000,
  );
}

describe('validation through the run, command and runner job path', () => {
  it('answers at once with running and ids, on a narrow canary run of the validation tenant', async () => {
    await configure('val-ok');
    const { started, runner, runId, commandId } = await startAndClaim('val-ok');
    assert.equal(started.status, 'running');
    assert.equal(started.profile, 'val-ok');
    assert.match(started.jobName, /^svc-v01-runner-/);
    assert.equal(started.pollUrl, `${BASE}/val-ok/validations/${started.validationId}`);
    const run = (await t.api('GET', `/api/v1/runs/${runId}`)).body;
    assert.equal(run.tenantId, 'tenant-a');
    assert.equal(run.projectId, 'provider-validation');
    assert.equal(run.backendProfile, 'val-ok');
    assert.equal(run.executionPolicy.sandbox, 'read-only');
    assert.equal(run.executionPolicy.network, 'disabled');
    const command = (await t.api('GET', `/api/v1/runs/${runId}/commands/${commandId}`)).body;
    assert.match(command.payload.prompt, /one word/);
    assert.equal((await poll(started.pollUrl)).body.status, 'running');

    await runner.append([
      {
        key: 'a1',
        commandId,
        category: 'assistant_message',
        data: { text: 'ready', final: true, replyAuthority: true },
      },
    ]);
    await runner.finish(commandId, 'completed');
    const done = await settled(started.pollUrl);
    assert.equal(done.status, 'completed');
    assert.equal(done.reply, 'ready');
    assert.equal(done.failureKind, null);
    assert.equal(done.evidence.terminalStatus, 'completed');
    const status = (await t.api('GET', `${BASE}/val-ok`)).body;
    assert.deepEqual(
      [
        status.lastValidation.validationId,
        status.lastValidation.status,
        status.lastValidation.runId,
        status.lastValidation.commandId,
        status.lastValidation.jobName,
      ],
      [started.validationId, 'completed', runId, commandId, started.jobName],
    );
    // The conclusion is kept: cancelling the finished canary run later does not change it.
    await t.api('POST', `/api/v1/runs/${runId}/cancel`, {});
    assert.equal((await poll(started.pollUrl)).body.status, 'completed');
  });

  it('does not count a completed turn without an assistant reply', async () => {
    await configure('val-silent');
    const { started, runner, commandId } = await startAndClaim('val-silent');
    await runner.finish(commandId, 'completed');
    const done = await settled(started.pollUrl);
    assert.equal(done.status, 'failed');
    assert.equal(done.failureKind, 'backend-failed');
    assert.match(done.message, /without an assistant reply/);
  });

  for (const failureKind of [
    'provider-auth-failed',
    'provider-unavailable',
    'provider-compact-unsupported',
    'secret-unavailable',
  ]) {
    it(`fails with the command's ${failureKind}`, async () => {
      const profile = `val-${failureKind}`.slice(0, 60);
      await configure(profile);
      const { started, runner, commandId } = await startAndClaim(profile);
      await runner.append([
        {
          key: 'e1',
          commandId,
          category: 'error',
          data: { failureKind, message: `simulated ${failureKind}` },
        },
      ]);
      await runner.finish(commandId, 'failed', {
        failureKind,
        message: `simulated ${failureKind}`,
      });
      const done = await settled(started.pollUrl);
      assert.equal(done.status, 'failed');
      assert.equal(done.failureKind, failureKind);
      assert.equal(
        (await t.api('GET', `${BASE}/${profile}`)).body.lastValidation.failureKind,
        failureKind,
      );
    });
  }

  it('fails with infra-failed when the runner job ends before the command', async () => {
    await configure('exit-early');
    const started = await t.api('POST', `${BASE}/exit-early/validate`);
    assert.equal(started.status, 202, started.raw);
    const done = await settled(started.body.pollUrl);
    assert.equal(done.status, 'failed');
    assert.equal(done.failureKind, 'infra-failed');
    assert.equal(done.evidence.runnerJobPhase, 'failed');
    assert.match(done.message, /exit code 3/);
  });

  it('is cancelled when its run is cancelled', async () => {
    await configure('val-cancel');
    const { started, runId } = await startAndClaim('val-cancel');
    await t.api('POST', `/api/v1/runs/${runId}/cancel`, { reason: 'operator stop' });
    const done = await settled(started.pollUrl);
    assert.equal(done.status, 'cancelled');
    assert.equal(done.failureKind, 'cancelled');
  });

  it('refuses an unconfigured profile with secret-unavailable and keeps that as lastValidation', async () => {
    const res = await t.api('POST', `${BASE}/val-missing/validate`);
    assert.equal(res.status, 424, res.raw);
    assert.equal(res.body.failureKind, 'secret-unavailable');
    assert.match(res.body.details.validationId, /^val-/);
    const last = (await t.api('GET', `${BASE}/val-missing`)).body.lastValidation;
    assert.equal(last.validationId, res.body.details.validationId);
    assert.equal(last.status, 'failed');
    assert.equal(last.failureKind, 'secret-unavailable');
    assert.equal(last.runId, null);
    const other = await t.api('GET', `${BASE}/val-ok/validations/${res.body.details.validationId}`);
    assert.equal(other.status, 404, 'a validation is found only under its own profile');
  });
});
