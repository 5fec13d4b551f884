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
async function setup() {
  const run = await t.api('POST', '/api/v1/runs', runBody());
  const runId = run.body.runId as string;
  return { runId, runner: new TestRunner(t, `rnr-cncl${String(++n).padStart(4, '0')}`, runId) };
}
const turn = async (runId: string) =>
  (
    await t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'x' },
    })
  ).body.commandId as string;

describe('cancel', () => {
  it('cancels a pending command at once; no runner ever receives it', async () => {
    const { runId, runner } = await setup();
    const commandId = await turn(runId);
    const cancelled = await t.api('POST', `/api/v1/commands/${commandId}/cancel`, {
      reason: 'changed my mind',
    });
    assert.equal(cancelled.status, 200);
    assert.equal(cancelled.body.state, 'cancelled');
    assert.equal(cancelled.body.failureKind, 'cancelled');
    await runner.claim();
    const polled = await runner.poll();
    assert.equal(polled.body.commands[0].state, 'cancelled');
    assert.equal(
      (await runner.ack(commandId)).status,
      409,
      'a cancelled command cannot be acknowledged',
    );
    const result = (await t.api('GET', `/api/v1/runs/${runId}/commands/${commandId}/result`)).body;
    assert.equal(result.terminalStatus, 'cancelled');
    assert.equal(result.completed, false);
  });

  it('cancels a running command; the runner sees it in its control signals and cannot complete it', async () => {
    const { runId, runner } = await setup();
    const commandId = await turn(runId);
    await runner.claim();
    await runner.poll();
    await runner.ack(commandId);
    const waiting = runner.poll(1, 10_000);
    await new Promise((r) => setTimeout(r, 50));
    const started = Date.now();
    await t.api('POST', `/api/v1/commands/${commandId}/cancel`, {});
    const woke = await waiting;
    assert.ok(Date.now() - started < 3000, 'the long-poll returns on cancel');
    assert.deepEqual(woke.body.control.cancelledCommandIds, [commandId]);
    const late = await runner.finish(commandId, 'completed');
    assert.equal(late.body.state, 'cancelled', 'a terminal command is returned unchanged');
    assert.equal(
      (await t.api('GET', `/api/v1/runs/${runId}`)).body.state,
      'running',
      'cancelling a command leaves the run open',
    );
  });

  it('cancels a run: every unfinished command converges; repeats return the terminal state', async () => {
    const { runId, runner } = await setup();
    const a = await turn(runId);
    await runner.claim();
    await runner.poll();
    await runner.ack(a);
    const b = await turn(runId);
    const cancelled = await t.api('POST', `/api/v1/runs/${runId}/cancel`, { reason: 'stop' });
    assert.equal(cancelled.body.state, 'cancelled');
    assert.equal(cancelled.body.failureKind, 'cancelled');
    assert.equal(cancelled.body.cancelRequested, true);
    for (const id of [a, b])
      assert.equal(
        (await t.api('GET', `/api/v1/runs/${runId}/commands/${id}`)).body.state,
        'cancelled',
      );
    const again = await t.api('POST', `/api/v1/runs/${runId}/cancel`, {});
    assert.equal(again.status, 200);
    assert.equal(again.body.state, 'cancelled');
    assert.equal(again.body.terminalAt, cancelled.body.terminalAt);
    const events = (await t.api('GET', `/api/v1/runs/${runId}/events`)).body.events.filter(
      (e: any) => e.category === 'terminal_status',
    );
    assert.equal(
      events.length,
      3,
      'one terminal event per command and one for the run, written once',
    );
    const beat = await runner.heartbeat();
    assert.equal(beat.body.control.cancelRequested, true);
  });

  it('leaves a completed command or run unchanged', async () => {
    const { runId, runner } = await setup();
    const id = await turn(runId);
    await runner.claim();
    await runner.poll();
    await runner.ack(id);
    await runner.finish(id, 'completed');
    const kept = await t.api('POST', `/api/v1/commands/${id}/cancel`, {});
    assert.equal(kept.body.state, 'completed');
    await runner.runStatus('completed');
    const run = await t.api('POST', `/api/v1/runs/${runId}/cancel`, {});
    assert.equal(run.body.state, 'completed');
  });

  it('answers cancel of unknown ids with 404', async () => {
    assert.equal(
      (await t.api('POST', '/api/v1/commands/cmd-0000000000000/cancel', {})).status,
      404,
    );
    assert.equal((await t.api('POST', '/api/v1/runs/run-0000000000000/cancel', {})).status, 404);
  });
});

describe('cancel without a body', () => {
  it('accepts POST with no body at all, as curl -X POST sends it', async () => {
    const { runId } = await setup();
    const response = await t.manager.app.inject({
      method: 'POST',
      url: `/api/v1/runs/${runId}/cancel`,
    });
    assert.equal(response.statusCode, 200, response.body);
    assert.equal(JSON.parse(response.body).state, 'cancelled');
    const empty = await t.manager.app.inject({
      method: 'POST',
      url: `/api/v1/runs/${runId}/cancel`,
      headers: { 'content-type': 'application/json' },
      payload: '',
    });
    assert.equal(empty.statusCode, 200, empty.body);
    const command = await t.api('POST', '/api/v1/runs', runBody());
    const turn = (
      await t.api('POST', `/api/v1/runs/${command.body.runId}/commands`, {
        type: 'turn',
        payload: { prompt: 'x' },
      })
    ).body;
    const cancelled = await t.manager.app.inject({
      method: 'POST',
      url: `/api/v1/commands/${turn.commandId}/cancel`,
    });
    assert.equal(JSON.parse(cancelled.body).state, 'cancelled');
    const noBodyCreate = await t.manager.app.inject({ method: 'POST', url: '/api/v1/runs' });
    assert.equal(noBodyCreate.statusCode, 400, 'a required body is still required');
  });
});
