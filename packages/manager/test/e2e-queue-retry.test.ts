import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { FakeProvider } from '@svc/testkit';
import { configureProviderProfile, useE2E, waitFor } from './e2e-helpers.js';
import { FAST_SCHEDULER } from './scheduler-helpers.js';

/**
 * A person's retry with real runners and the real agent: a task whose provider failed every
 * attempt is retried once the provider is back, and the scheduler runs it to completion.
 */
const rig = useE2E({ env: FAST_SCHEDULER });
let provider: FakeProvider | undefined;
after(() => provider?.close());

const task = async (taskId: string) =>
  (await rig.e.t.api('GET', `/api/v1/queue/tasks/${taskId}`)).body;

describe('retry with the real agent', () => {
  it('a task that failed all its attempts runs again after a retry and completes', async () => {
    // Its own loopback provider, answering 500 until it is "back".
    provider = await FakeProvider.start();
    provider.enqueue(
      ...Array.from({ length: 64 }, () => ({ kind: 'http-error', status: 500 }) as const),
    );
    await configureProviderProfile(
      rig.e.t,
      'retry-later',
      provider.baseUrl,
      'sk-test-retry-key-1111111111111111',
      { noRetries: true },
    );
    const submitted = await rig.e.t.api('POST', '/api/v1/queue/tasks', {
      tenantId: 'tenant-a',
      projectId: 'proj-1',
      queue: 'retry-e2e',
      title: 'retried by a person',
      backendProfile: 'retry-later',
      maxAttempts: 2,
      retryPolicy: { backoffMs: 200 },
      executionPolicy: { timeoutMs: 60_000 },
      payload: { prompt: 'Say hello.' },
    });
    assert.equal(submitted.status, 201, submitted.raw);
    const taskId = submitted.body.taskId as string;
    const failed = await waitFor(
      'the task failed both its attempts',
      async () => {
        const shown = await task(taskId);
        return shown.state === 'failed' && shown.counters.attempts === 2 ? shown : null;
      },
      120_000,
    );
    assert.equal(failed.latestAttempt.failureKind, 'provider-unavailable');

    // The provider is back: the next request gets a reply.
    provider.dropSteps().enqueue({ kind: 'text', text: 'Hello after the retry.' });
    const asked = provider.requestsOf().length;
    const retried = await rig.e.t.api('POST', `/api/v1/queue/tasks/${taskId}/retry`, {
      reason: 'the provider is back',
    });
    assert.equal(retried.status, 200, retried.raw);
    assert.equal(retried.body.counters.sinceRetry, 0);

    const done = await waitFor(
      'the retried task completed',
      async () => {
        const shown = await task(taskId);
        return shown.state === 'completed' ? shown : null;
      },
      120_000,
    );
    assert.deepEqual(
      done.attempts.map((a: any) => [a.retryIndex, a.state]),
      [
        [0, 'failed'],
        [1, 'failed'],
        [2, 'completed'],
      ],
    );
    assert.equal(new Set(done.attempts.map((a: any) => a.runId)).size, 3, 'a run per attempt');
    assert.equal(done.retries.length, 1);
    assert.equal(done.retries[0].reason, 'the provider is back');
    assert.ok(provider.requestsOf().length > asked, 'the retried attempt asked the provider');
  });
});
