import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runBody, startTestManager, TestRunner, type TestManager } from './helpers.js';

let t: TestManager;
before(async () => {
  t = await startTestManager();
  await t.configureProfile('builtin-a');
});
after(() => t.close());

let n = 0;
async function setup(timeoutMs = 60_000) {
  const run = await t.api('POST', '/api/v1/runs', runBody({ executionPolicy: { timeoutMs } }));
  const runId = run.body.runId;
  const runner = new TestRunner(t, `rnr-live${String(++n).padStart(4, '0')}`, runId);
  const command = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
    type: 'turn',
    payload: { prompt: 'x' },
  });
  return { runId, runner, commandId: command.body.commandId as string };
}

const liveness = async (runId: string) =>
  (await t.api('GET', `/api/v1/runs/${runId}/result`)).body.liveness;
const age = (runId: string, ms: number) =>
  t.manager.store.db
    .updateTable('events')
    .set({ recorded_at: new Date(Date.now() - ms) })
    .where('run_id', '=', runId)
    .execute()
    .then(() =>
      t.manager.store.db
        .updateTable('commands')
        .set({ confirmed_at: new Date(Date.now() - ms), created_at: new Date(Date.now() - ms) })
        .where('run_id', '=', runId)
        .execute(),
    );

describe('liveness derived at query time', () => {
  it('follows the phases of a turn', async () => {
    const { runId, runner, commandId } = await setup();
    assert.equal((await liveness(runId)).phase, 'waiting-runner');
    await runner.claim();
    await runner.poll();
    assert.equal((await liveness(runId)).phase, 'waiting-runner', 'delivered but not acknowledged');
    await runner.ack(commandId);
    assert.equal((await liveness(runId)).phase, 'waiting-model');
    await runner.append([
      { key: 'd1', commandId, category: 'assistant_message', data: { text: 'thin', final: false } },
    ]);
    assert.equal((await liveness(runId)).phase, 'waiting-model-output');
    await runner.append([
      { key: 't1', commandId, category: 'tool_call', data: { itemId: 'i1', status: 'started' } },
    ]);
    assert.equal((await liveness(runId)).phase, 'waiting-tool');
    await runner.append([
      {
        key: 'o1',
        commandId,
        category: 'command_output',
        data: { itemId: 'i1', text: 'partial', final: false },
      },
    ]);
    assert.equal((await liveness(runId)).phase, 'waiting-tool-output');
    await runner.append([
      {
        key: 't2',
        commandId,
        category: 'tool_call',
        data: { itemId: 'i1', status: 'completed', exitCode: 0 },
      },
    ]);
    assert.equal((await liveness(runId)).phase, 'idle-after-tool');
    await runner.append([
      {
        key: 'x1',
        commandId,
        category: 'error',
        name: 'agent.transport-closed',
        data: { message: 'stdout closed' },
      },
    ]);
    assert.equal((await liveness(runId)).phase, 'transport-disconnected');
    await runner.finish(commandId, 'failed', { failureKind: 'backend-failed' });
    const end = await liveness(runId);
    assert.equal(end.phase, 'terminal');
    assert.equal(end.active, false);
  });

  it('shows a stale heartbeat when the lease expired', async () => {
    const { runId, runner, commandId } = await setup();
    await runner.claim();
    await runner.poll();
    await runner.ack(commandId);
    await t.manager.store.db
      .updateTable('runs')
      .set({ lease_expires_at: new Date(Date.now() - 5000) })
      .where('run_id', '=', runId)
      .execute();
    const live = await liveness(runId);
    assert.equal(live.phase, 'runner-heartbeat-stale');
    assert.equal(live.lease.expired, true);
    assert.ok(
      live.recoveryActions.some(
        (a: any) => a.action === 'split-task' || a.action === 'continue-same-session',
      ),
    );
  });

  it('counts the idle budget from the last activity and resets it on any activity', async () => {
    const { runId, runner, commandId } = await setup(10_000);
    await runner.claim();
    await runner.poll();
    await runner.ack(commandId);
    await runner.append([
      { key: 'a', commandId, category: 'backend_status', name: 'turn.started', data: {} },
    ]);
    const fresh = (await liveness(runId)).timeoutBudget;
    assert.equal(fresh.timeoutKind, 'idle');
    assert.equal(fresh.hardTimeout, false);
    assert.equal(fresh.state, 'within-budget');
    assert.ok(fresh.remainingMs > 9000);

    await age(runId, 9000);
    const close = (await liveness(runId)).timeoutBudget;
    assert.equal(close.state, 'approaching-idle-timeout');

    await age(runId, 11_000);
    const out = (await liveness(runId)).timeoutBudget;
    assert.equal(out.state, 'idle-timed-out');
    assert.equal(out.remainingMs, 0);
    assert.ok(out.elapsedMs >= 11_000);

    // A runner heartbeat reporting agent activity (a token delta, say) restarts the idle clock.
    await runner.heartbeat({
      lastActivityAt: new Date().toISOString(),
      lastActivityKind: 'item/agentMessage/delta',
    });
    const reset = (await liveness(runId)).timeoutBudget;
    assert.equal(reset.state, 'within-budget');
    // ...and so does any new event.
    await age(runId, 11_000);
    await t.manager.store.db
      .updateTable('runs')
      .set({ last_activity_at: new Date(Date.now() - 11_000) })
      .where('run_id', '=', runId)
      .execute();
    assert.equal((await liveness(runId)).timeoutBudget.state, 'idle-timed-out');
    const appended = await runner.append([
      { key: 'b', commandId, category: 'tool_call', data: { itemId: 'q', status: 'started' } },
    ]);
    const again = (await liveness(runId)).timeoutBudget;
    assert.equal(again.state, 'within-budget');
    assert.equal(again.lastActivitySeq, appended.body.lastSeq);
  });

  it('always offers recovery actions, the result and events first', async () => {
    const { runId } = await setup();
    const live = await liveness(runId);
    assert.ok(live.recoveryActions.length >= 2);
    assert.equal(live.recoveryActions[0].action, 'inspect-result');
    assert.equal(live.recoveryActions[1].action, 'read-events');
    assert.ok(live.recoveryActions.some((a: any) => a.action === 'create-runner-job'));
  });
});
