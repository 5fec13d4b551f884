import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { FakeProvider, type ProviderStep } from '@svc/testkit';
import { sql } from 'kysely';
import { configureProviderProfile, useE2E, waitFor } from './e2e-helpers.js';
import { FAST_SCHEDULER } from './scheduler-helpers.js';

/**
 * Retries with real runners and the real agent: a provider answering 500 is retried with
 * growing gaps up to the task's attempts; schema and provider-auth failures are never retried.
 */
const rig = useE2E({ env: FAST_SCHEDULER });
const providers: FakeProvider[] = [];
after(() => Promise.all(providers.map((p) => p.close())));

/**
 * A profile on its own loopback provider that answers every request with `step`. The agent's
 * own request retries are off so one provider answer is one attempt's outcome, fast.
 */
async function failingProfile(name: string, step: ProviderStep): Promise<void> {
  const provider = await FakeProvider.start();
  providers.push(provider);
  provider.enqueue(...Array.from({ length: 64 }, () => step));
  await configureProviderProfile(
    rig.e.t,
    name,
    provider.baseUrl,
    'sk-test-retry-key-0000000000000000',
    {
      noRetries: true,
    },
  );
}

const submit = async (body: Record<string, unknown>) => {
  const res = await rig.e.t.api('POST', '/api/v1/queue/tasks', {
    tenantId: 'tenant-a',
    projectId: 'proj-1',
    queue: 'retries',
    title: 'retried',
    executionPolicy: { timeoutMs: 60_000 },
    payload: { prompt: 'Say hello.' },
    ...body,
  });
  assert.equal(res.status, 201, res.raw);
  return res.body.taskId as string;
};

const task = async (taskId: string) =>
  (await rig.e.t.api('GET', `/api/v1/queue/tasks/${taskId}`)).body;

interface AttemptRow {
  retry_index: number;
  state: string;
  failure_kind: string | null;
  run_id: string | null;
  created_at: Date;
  terminal_at: Date | null;
}
const attemptsOf = async (taskId: string) =>
  (
    await sql<AttemptRow>`
      SELECT retry_index, state, failure_kind, run_id, created_at, terminal_at
      FROM queue_attempts WHERE task_id = ${taskId} ORDER BY retry_index`.execute(
      rig.e.t.manager.store.db,
    )
  ).rows;

/** A task that has failed for good: failed, and the scheduler did not queue it again. */
async function finallyFailed(taskId: string, attempts: number) {
  return waitFor(
    `${taskId} failed after ${attempts} attempt(s)`,
    async () => {
      const shown = await task(taskId);
      return shown.state === 'failed' && shown.counters.attempts === attempts ? shown : null;
    },
    120_000,
  );
}

describe('scheduler retries with the real agent', () => {
  it('retries provider 500s with growing backoff gaps up to maxAttempts, then fails', async () => {
    await failingProfile('flaky-500', { kind: 'http-error', status: 500 });
    const backoffMs = 800;
    const taskId = await submit({
      backendProfile: 'flaky-500',
      maxAttempts: 4,
      retryPolicy: { backoffMs, maxBackoffMs: 60_000 },
    });
    const done = await finallyFailed(taskId, 4);
    assert.equal(done.latestAttempt.failureKind, 'provider-unavailable');
    // Still failed a while later: the last attempt is not retried beyond the limit.
    await new Promise((r) => setTimeout(r, 2 * backoffMs));
    const rows = await attemptsOf(taskId);
    assert.deepEqual(
      rows.map((r) => [r.retry_index, r.state, r.failure_kind]),
      [0, 1, 2, 3].map((i) => [i, 'failed', 'provider-unavailable']),
    );
    assert.equal(new Set(rows.map((r) => r.run_id)).size, 4, 'each attempt has its own run');
    // The n-th retry waits at least backoff * 2^(n-1) * 0.8 (the low edge of the jitter),
    // measured from the previous attempt's end to the next attempt's start.
    const gaps = rows
      .slice(1)
      .map((r, i) => r.created_at.getTime() - rows[i]!.terminal_at!.getTime());
    const minimum = gaps.map((_, i) => backoffMs * 2 ** i * 0.8);
    gaps.forEach((gap, i) => {
      assert.ok(
        gap >= minimum[i]! - 50,
        `gap ${i + 1} ${gap} ms >= ${minimum[i]} ms (${gaps.join(', ')})`,
      );
      if (i > 0) assert.ok(gap >= minimum[i - 1]!, `gap ${i + 1} grew: ${gaps.join(', ')}`);
    });
    // They grow, not just wait: the third waits longer than the first (its minimum, 2.56 s, is
    // far above the first's jitter, at most 0.96 s; a busy machine delays either claim alike).
    assert.ok(gaps[2]! > gaps[0]!, `gaps grow, not just wait: ${gaps.join(', ')}`);
    assert.equal((await task(taskId)).state, 'failed');
  });

  it('does not retry a provider-auth-failed attempt (provider answers 401)', async () => {
    await failingProfile('auth-401', { kind: 'http-error', status: 401 });
    const taskId = await submit({
      backendProfile: 'auth-401',
      maxAttempts: 3,
      retryPolicy: { backoffMs: 100 },
    });
    const done = await finallyFailed(taskId, 1);
    assert.equal(done.latestAttempt.failureKind, 'provider-auth-failed');
    // Several scheduler scans later there is still exactly one attempt.
    await new Promise((r) => setTimeout(r, 1500));
    const rows = await attemptsOf(taskId);
    assert.deepEqual(
      rows.map((r) => [r.retry_index, r.state, r.failure_kind]),
      [[0, 'failed', 'provider-auth-failed']],
    );
    assert.equal((await task(taskId)).state, 'failed');
  });

  it('does not retry a schema-invalid attempt', async () => {
    // A relative host path is refused by the runner while it prepares the run.
    const taskId = await submit({
      workspaceRef: { kind: 'host-path', path: 'not/absolute' },
      maxAttempts: 3,
      retryPolicy: { backoffMs: 100 },
    });
    const done = await finallyFailed(taskId, 1);
    assert.equal(done.latestAttempt.failureKind, 'schema-invalid', JSON.stringify(done));
    await new Promise((r) => setTimeout(r, 1500));
    const rows = await attemptsOf(taskId);
    assert.deepEqual(
      rows.map((r) => [r.retry_index, r.state, r.failure_kind]),
      [[0, 'failed', 'schema-invalid']],
    );
    assert.equal((await task(taskId)).state, 'failed');
  });
});
