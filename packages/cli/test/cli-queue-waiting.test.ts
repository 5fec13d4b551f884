import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { waitFor } from '../../manager/test/e2e-helpers.js';
import { show, submit, type QueueRig } from '../../manager/test/queue-helpers.js';
import { endAttempt, startedAttempt } from '../../manager/test/scheduler-helpers.js';
import { assertBounded, cli } from './cli-helpers.js';
import { startCliRig } from './cli-rig.js';

/**
 * `queue submit`, `show`, `list` and `commander` say why a task waits (the limit and its use,
 * the retry time) and, with the scheduler on, never print a dispatch the scheduler makes itself
 * or would refuse. The built client against a real manager with its scheduler on.
 */
const KEY = 'svc-canary-api-key-waiting-61c0ad';
let rig: QueueRig;
let env: Record<string, string>;

before(async () => {
  ({ rig, env } = await startCliRig(
    KEY,
    {
      SVC_SCHEDULER: 'on',
      SVC_SCHEDULER_SCAN_MS: '300',
      SVC_RETRY_BACKOFF_MS: '600000',
      SVC_SCHEDULER_TENANT_LIMITS: 'tenant-b=1',
    },
    { NO_COLOR: '1' },
  ));
});
after(async () => {
  await rig?.close();
});

const queue = (args: string[], stdin?: string) =>
  cli('queue', args, { env, tty: stdin === undefined, ...(stdin ? { stdin } : {}) });

describe('queue views say why a task waits', () => {
  it('submit points at queue show, not at a dispatch the scheduler makes itself', async () => {
    const body = JSON.stringify({
      tenantId: 'tenant-a',
      projectId: 'proj-1',
      queue: 'cli-wait',
      title: 'a task',
      payload: { prompt: 'go' },
    });
    const submitted = await cli('queue', ['submit', '--json-stdin'], {
      env: { ...env, FORCE_COLOR: '0' },
      stdin: body,
    });
    assert.equal(submitted.code, 0, submitted.stderr);
    // Piped output is JSON: the answer carries the wait and the next step.
    const task = JSON.parse(submitted.stdout);
    assert.equal(task.waiting.reason, 'dispatching');
    assert.equal(task.next, `queue show ${task.taskId}`);
  });

  it('capacity: show, list and commander name the limit and its use', async () => {
    const holder = await submit(rig.t, { tenantId: 'tenant-b', queue: 'cli-cap' });
    await startedAttempt(rig.t, holder.taskId);
    const waiting = await submit(rig.t, { tenantId: 'tenant-b', queue: 'cli-cap' });
    const shown = await queue(['show', waiting.taskId]);
    assert.equal(shown.code, 0, shown.stderr);
    assertBounded(shown.stdout, 40);
    assert.match(
      shown.stdout,
      /waiting: capacity \(tenant tenant-b 1\/1\): tenant tenant-b runs 1 of its 1 attempts at once/,
    );
    assert.match(shown.stdout, new RegExp(`next: queue show ${waiting.taskId}`));
    assert.doesNotMatch(shown.stdout, /queue dispatch/);
    const listed = await queue(['list', '--queue', 'cli-cap']);
    assert.match(listed.stdout, /waiting: capacity \(tenant tenant-b 1\/1\)/);
    assert.match(listed.stdout, /waiting: waiting-runner/);
    assert.doesNotMatch(listed.stdout, /queue dispatch/);
    const commander = await queue(['commander', '--queue', 'cli-cap']);
    assert.match(commander.stdout, /waiting: capacity \(tenant tenant-b 1\/1\)/);
    assert.doesNotMatch(commander.stdout, /queue dispatch/);
  });

  it('backoff: show prints the retry time', async () => {
    const task = await submit(rig.t, { queue: 'cli-retry', maxAttempts: 3 });
    await endAttempt(rig.t, await startedAttempt(rig.t, task.taskId), 'failed', {
      failureKind: 'provider-unavailable',
    });
    const requeued = await waitFor('the retry queued', async () => {
      const t = await show(rig.t, task.taskId);
      return t.state === 'queued' && t;
    });
    const shown = await queue(['show', task.taskId]);
    assert.equal(shown.code, 0, shown.stderr);
    assert.ok(
      shown.stdout.includes(`waiting: backoff until ${requeued.scheduling.runAfter}`),
      shown.stdout,
    );
    assert.doesNotMatch(shown.stdout, /queue dispatch/);
  });
});
