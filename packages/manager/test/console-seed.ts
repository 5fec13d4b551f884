import assert from 'node:assert/strict';
import { FakeProvider } from '@svc/testkit';
import type { E2E } from './e2e-helpers.js';
import {
  configureProviderProfile,
  createSession,
  sendToSession,
  waitFor,
  waitForCommand,
} from './e2e-helpers.js';
import { runBody } from './helpers.js';
import { submit } from './queue-helpers.js';

/**
 * What the console's browser tests look at, made through the API with real runners and the
 * real agent against the scripted provider: a run that answered in Markdown (with a table), a
 * run whose turn the provider refused, a run with no runner yet, a session of two turns, and
 * queue tasks (one dispatched to the end, others waiting).
 */
export interface Seeded {
  answered: { runId: string; commandId: string };
  refused: { runId: string; commandId: string };
  pending: { runId: string; commandId: string };
  session: { sessionId: string; runIds: string[]; prompts: string[] };
  task: { taskId: string; runId: string; sessionId: string; title: string };
  waitingTasks: string[];
  /** Stops the refusing provider. */
  close(): Promise<void>;
}

export const TABLE_REPLY = [
  '**Done.** The build is green again.',
  '',
  '| Check | Result |',
  '| --- | --- |',
  '| unit tests | 745 passed |',
  '| lint | clean |',
].join('\n');

export async function createRunAndTurn(e: E2E, prompt: string, run: Record<string, unknown> = {}) {
  const created = await e.t.api(
    'POST',
    '/api/v1/runs',
    runBody({ executionPolicy: { timeoutMs: 60_000 }, ...run }),
  );
  assert.equal(created.status, 201, created.raw);
  const command = await e.t.api('POST', `/api/v1/runs/${created.body.runId}/commands`, {
    type: 'turn',
    payload: { prompt },
  });
  assert.equal(command.status, 201, command.raw);
  return { runId: created.body.runId as string, commandId: command.body.commandId as string };
}

export async function launchRunner(e: E2E, runId: string, commandId: string) {
  const job = await e.t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, { commandId });
  assert.equal(job.status, 201, job.raw);
}

/** A turn that runs to its end on a real runner. */
export async function finishedTurn(e: E2E, prompt: string, run: Record<string, unknown> = {}) {
  const ids = await createRunAndTurn(e, prompt, run);
  await launchRunner(e, ids.runId, ids.commandId);
  await waitForCommand(e.t, ids.runId, ids.commandId, 120_000);
  return ids;
}

export async function seed(e: E2E): Promise<Seeded> {
  e.provider.dropSteps().enqueue({ kind: 'text', text: TABLE_REPLY, deltas: 4 });
  const answered = await finishedTurn(e, 'Fix the failing build and report the checks.');

  // A provider that refuses every request (its own profile): the turn fails whatever the
  // agent retries, and nothing it leaves behind reaches the other turns.
  const refusing = await FakeProvider.start({
    fallback: () => ({
      kind: 'http-error',
      status: 401,
      message: 'Incorrect API key provided: sk-te****0000.',
    }),
  });
  await configureProviderProfile(
    e.t,
    'refusing',
    refusing.baseUrl,
    'sk-test-refused-key-000000000',
  );
  const refused = await finishedTurn(e, 'Summarize the open issues.', {
    projectId: 'proj-2',
    backendProfile: 'refusing',
  });

  const pending = await createRunAndTurn(e, 'Review the release notes (no runner yet).');

  const prompts = ['Check the build.', 'Now fix the flaky test.'];
  e.provider.enqueue(
    { kind: 'text', text: 'The build passes on main.' },
    { kind: 'text', text: 'Fixed: the test waited on a fixed sleep; it now polls.' },
  );
  const created = await createSession(e.t);
  const runIds: string[] = [];
  for (const prompt of prompts) {
    const sent = await sendToSession(e.t, created.sessionId, { prompt });
    assert.ok(sent.command?.commandId, JSON.stringify(sent));
    runIds.push(sent.run.runId);
    await waitForCommand(e.t, sent.run.runId, sent.command.commandId, 120_000);
  }

  e.provider.enqueue({ kind: 'text', text: 'Login test fixed: it awaited a stale promise.' });
  const title = 'Fix the flaky login test';
  const task = await submit(e.t, {
    title,
    priority: 5,
    payload: { prompt: 'Fix the flaky login test.' },
  });
  const dispatched = await e.t.api('POST', `/api/v1/queue/tasks/${task.taskId}/dispatch`, {});
  assert.equal(dispatched.status, 201, dispatched.raw);
  const done = await waitFor(
    'the dispatched task to end',
    async () => {
      const shown = (await e.t.api('GET', `/api/v1/queue/tasks/${task.taskId}`)).body;
      return shown.state === 'completed' ? shown : null;
    },
    120_000,
  );
  const waitingTasks: string[] = [];
  for (const title of [
    'Update the README walkthrough',
    'Bump the runner image',
    'Rotate the API key',
  ])
    waitingTasks.push((await submit(e.t, { title, runAfter: '2099-01-01T00:00:00Z' })).taskId);

  // A task whose only attempt failed (its profile's provider refuses): the lists offer Retry.
  const failing = await submit(e.t, {
    title: 'Summarize the weekly report',
    backendProfile: 'refusing',
    maxAttempts: 1,
  });
  await e.t.api('POST', `/api/v1/queue/tasks/${failing.taskId}/dispatch`, {});
  await waitFor(
    'the refused task to fail',
    async () =>
      (await e.t.api('GET', `/api/v1/queue/tasks/${failing.taskId}`)).body.state === 'failed',
    120_000,
  );
  // A paused queue holding a task with a concurrency key: each view says both.
  const paused = await e.t.api('PUT', '/api/v1/queue/queues/nightly/settings', { paused: true });
  assert.equal(paused.status, 200, paused.raw);
  await submit(e.t, {
    title: 'Audit the dependencies',
    queue: 'nightly',
    concurrencyKey: 'repo:example/web',
  });

  return {
    answered,
    refused,
    pending,
    session: { sessionId: created.sessionId, runIds: [...new Set(runIds)], prompts },
    task: {
      taskId: task.taskId,
      runId: done.latestAttempt.runId,
      sessionId: done.latestAttempt.sessionId,
      title,
    },
    waitingTasks,
    close: () => refusing.close(),
  };
}
