import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { dispatch, show, startQueueRig, submit, type QueueRig } from './queue-helpers.js';

/**
 * A command nobody took within its TTL expires; its attempt, task and session follow in the
 * same transaction, found by the manager's own maintenance pass (nobody reads the command or
 * types `queue refresh`). The stand-in runner Job stays up and never claims.
 */
let rig: QueueRig;
before(async () => {
  rig = await startQueueRig({
    env: { SVC_COMMAND_TTL_MS: '1000', SVC_MAINTENANCE_INTERVAL_MS: '200' },
  });
});
after(async () => {
  await rig?.close();
});

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 15_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('an expired command', () => {
  it('moves its attempt, task and session to the outcome without a refresh', async () => {
    const task = await submit(rig.t, { maxAttempts: 1 });
    const d = await dispatch(rig.t, task.taskId);
    // Only the task is read: the command and its run are never touched by the test.
    const shown = await until('the task to follow the expiry', async () => {
      const s = await show(rig.t, task.taskId);
      return s.state === 'failed' ? s : undefined;
    });
    assert.equal(shown.latestAttempt.state, 'failed');
    assert.equal(shown.latestAttempt.failureKind, 'command-expired');
    assert.equal(shown.counters.failed, 1);
    const command = (
      await rig.t.api('GET', `/api/v1/runs/${d.run.runId}/commands/${d.command.commandId}`)
    ).body;
    assert.equal(command.state, 'expired');
    const session = (await rig.t.api('GET', d.sessionPath)).body;
    assert.equal(session.executionState, 'terminal', 'the session is not left running');

    // The repair tool agrees and has nothing left to write.
    const plan = await rig.t.api('POST', `/api/v1/queue/tasks/${task.taskId}/refresh`, {
      dryRun: true,
    });
    assert.equal(plan.status, 200, plan.raw);
    assert.equal(plan.body.plan.taskState.to, 'failed');
  });
});
