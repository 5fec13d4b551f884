import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { ensureTestTag, killTagged, userTexts, waitForNoTaggedProcesses } from '@svc/testkit';
import { putProfileCredential, startE2E, validateProfile, type E2E } from './e2e-helpers.js';

/**
 * Provider profiles end to end: profiles written only through the profile API, validated by the
 * real runner driving the real coding agent against the loopback provider.
 */

const tag = ensureTestTag();
let e: E2E;

before(async () => {
  e = await startE2E({ env: { SVC_FLASH_MODEL_ID: 'flash-e2e' } });
});
after(async () => {
  await e?.close();
  const left = await waitForNoTaggedProcesses(tag, 15_000);
  killTagged(tag);
  assert.deepEqual(left, [], 'no runner or agent process outlives the tests');
});

async function runnerLog(jobName: string, runId: string): Promise<string> {
  const jobs = await e.t.api('GET', `/api/v1/runs/${runId}/runner-jobs`);
  const job = jobs.body.runnerJobs.find((j: any) => j.jobName === jobName);
  return job?.logPath ? (await readFile(job.logPath, 'utf8').catch(() => '')).slice(-3000) : '';
}

describe('a dynamic profile created, validated, broken and validated again', () => {
  const apiKey = 'sk-e2e-dynamic-profile-000000000000';

  it('validates a new dynamic profile with a real canary turn that gets a reply', async () => {
    const written = await putProfileCredential(e.t, 'e2e-dynamic', apiKey, {
      model: 'e2e-model',
      baseUrl: e.provider.baseUrl,
    });
    assert.equal(written.configured, true);
    e.provider.enqueue({ kind: 'text', text: 'ready' });
    const before = e.provider.requestsOf().length;
    const { started, outcome } = await validateProfile(e.t, 'e2e-dynamic');
    assert.equal(
      outcome.status,
      'completed',
      `${JSON.stringify(outcome)}\n${await runnerLog(started.jobName, started.runId)}`,
    );
    assert.equal(outcome.reply, 'ready');
    assert.equal(outcome.evidence.terminalStatus, 'completed');
    // The provider saw the canary with the key written through the API, and the model.
    const request = e.provider.requestsOf()[before]!;
    assert.equal(request.bearer, apiKey);
    assert.equal((request.body as any).model, 'e2e-model');
    assert.ok(userTexts(request).some((text) => /one word/.test(text)));
    const status = (await e.t.api('GET', '/api/v1/provider-profiles/e2e-dynamic')).body;
    assert.equal(status.lastValidation.status, 'completed');
    assert.equal(status.lastValidation.runId, started.runId);
    assert.equal(status.lastValidation.jobName, started.jobName);
  });

  it('validates builtin-d with the generated model catalog the agent loads', async () => {
    await putProfileCredential(e.t, 'builtin-d', 'sk-e2e-builtin-d-0000000000000', {
      baseUrl: e.provider.baseUrl,
    });
    e.provider.enqueue({ kind: 'text', text: 'ready' });
    const before = e.provider.requestsOf().length;
    const { started, outcome } = await validateProfile(e.t, 'builtin-d');
    assert.equal(
      outcome.status,
      'completed',
      `${JSON.stringify(outcome)}\n${await runnerLog(started.jobName, started.runId)}`,
    );
    assert.equal((e.provider.requestsOf()[before]!.body as any).model, 'flash-e2e');
  });

  it('reports provider-auth-failed once the provider refuses the key', async () => {
    // The provider now answers 401 to every attempt of the canary turn.
    e.provider.enqueue(
      { kind: 'http-error', status: 401, message: 'Incorrect API key provided' },
      { kind: 'http-error', status: 401, message: 'Incorrect API key provided' },
      { kind: 'http-error', status: 401, message: 'Incorrect API key provided' },
      { kind: 'http-error', status: 401, message: 'Incorrect API key provided' },
    );
    const { started, outcome } = await validateProfile(e.t, 'e2e-dynamic');
    assert.equal(
      outcome.status,
      'failed',
      `${JSON.stringify(outcome)}\n${await runnerLog(started.jobName, started.runId)}`,
    );
    assert.equal(outcome.failureKind, 'provider-auth-failed');
    assert.equal(outcome.reply, null);
    const status = (await e.t.api('GET', '/api/v1/provider-profiles/e2e-dynamic')).body;
    assert.equal(status.configured, true, 'a failed validation does not unconfigure the profile');
    assert.equal(status.lastValidation.validationId, started.validationId);
    assert.equal(status.lastValidation.failureKind, 'provider-auth-failed');
  });
});
