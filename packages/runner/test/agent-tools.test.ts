import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, describe, it, type TestContext } from 'node:test';
import { functionCallOutput, processesWithTag, userTexts } from '@svc/testkit';
import { descendantsOf } from '../src/agent/index.js';
import { agentFixture, leakGuard, named, recorder, sleep, waitUntil } from './agent-helpers.js';

const guard = leakGuard();
after(() => guard.check());

/** A turn whose shell command (`sleep 30`) has started, for interrupt and cancel. */
async function sleepingTurn(t: TestContext, prompt: string) {
  const fx = await agentFixture();
  t.after(() => fx.cleanup());
  fx.provider.enqueue({ kind: 'tool-call', command: 'sleep 30', yieldTimeMs: 60_000 });
  const agent = await fx.start();
  const { thread } = await agent.startThread({ cwd: fx.workspace });
  const rec = recorder();
  const turn = await agent.runTurn(thread.id, prompt, { onEvent: rec.onEvent });
  await waitUntil(
    () => named(rec.events, 'item.started').length > 0,
    10_000,
    'the command to start',
  );
  return { agent, rec, turn };
}

describe('agent tools, steer and interrupt', () => {
  it('reports a tool call as started and completed with its exit code and bounded output', async (t) => {
    const fx = await agentFixture();
    t.after(() => fx.cleanup());
    fx.provider.enqueue(
      {
        kind: 'tool-call',
        command: 'echo tool-output-line; seq 1 5000; exit 3',
        callId: 'call_one',
      },
      {
        kind: 'text',
        text: (request) =>
          `saw ${functionCallOutput(request, 'call_one')?.includes('tool-output-line')}`,
      },
    );
    const agent = await fx.start();
    const { thread } = await agent.startThread({ cwd: fx.workspace });
    const rec = recorder();
    const outcome = await (
      await agent.runTurn(thread.id, 'run it', { onEvent: rec.onEvent })
    ).outcome;

    assert.equal(outcome.status, 'completed');
    assert.equal(
      outcome.finalMessage?.text,
      'saw true',
      'the follow-up request carried the output',
    );
    const started = named(rec.events, 'item.started');
    const completed = named(rec.events, 'item.completed');
    assert.equal(started.length, 1);
    assert.equal(completed.length, 1);
    assert.equal(started[0]!.category, 'tool_call');
    assert.equal(started[0]!.data['status'], 'started');
    assert.equal(started[0]!.data['itemId'], 'call_one');
    assert.equal(completed[0]!.data['itemId'], 'call_one');
    assert.equal(completed[0]!.data['status'], 'failed');
    assert.equal(completed[0]!.data['exitCode'], 3);
    assert.equal(completed[0]!.data['toolName'], 'shell');
    assert.ok(String(completed[0]!.data['command']).includes('echo tool-output-line'));
    assert.ok(String(completed[0]!.data['command']).length <= 200);

    const output = named(rec.events, 'command.output');
    assert.equal(output.length, 1);
    const data = output[0]!.data;
    assert.equal(output[0]!.category, 'command_output');
    assert.equal(data['final'], true);
    assert.equal(data['itemId'], 'call_one');
    assert.ok(String(data['text']).startsWith('tool-output-line'));
    assert.ok(String(data['text']).trimEnd().endsWith('5000'), 'the tail is kept');
    assert.equal(data['outputTruncated'], true);
    assert.ok((data['originalBytes'] as number) > 16 * 1024);
    assert.ok((data['keptBytes'] as number) <= 16 * 1024);
  });

  it('runs a shell command under the default workspace-write sandbox, with or without a system bubblewrap', async (t) => {
    // The agent home is under the temp dir here, where the agent puts no helper on its PATH;
    // with /usr/bin/bwrap installed the command only runs if the runner provides it.
    const fx = await agentFixture({ config: { sandboxMode: 'workspace-write' } });
    t.after(() => fx.cleanup());
    fx.provider.enqueue(
      {
        kind: 'tool-call',
        command: 'echo sandboxed > inside.txt && cat inside.txt',
        callId: 'call_sb',
      },
      { kind: 'text', text: 'done' },
    );
    const agent = await fx.start();
    const { thread } = await agent.startThread({ cwd: fx.workspace });
    const rec = recorder();
    const outcome = await (
      await agent.runTurn(thread.id, 'write', { onEvent: rec.onEvent })
    ).outcome;
    assert.equal(outcome.status, 'completed');
    const completed = named(rec.events, 'item.completed');
    const output = named(rec.events, 'command.output')[0]?.data['text'];
    assert.equal(completed[0]?.data['exitCode'], 0, `the command ran: ${String(output)}`);
    assert.equal(String(output).trim(), 'sandboxed');
    assert.equal(await readFile(join(fx.workspace, 'inside.txt'), 'utf8'), 'sandboxed\n');
    const followUp = await fx.provider.waitForRequest(2);
    assert.match(functionCallOutput(followUp, 'call_sb') ?? '', /sandboxed/);
    assert.doesNotMatch(functionCallOutput(followUp, 'call_sb') ?? '', /execvp/);
  });

  it('declines approvals (headless) and reports them', async (t) => {
    const fx = await agentFixture({
      config: { approvalPolicy: 'on-request', sandboxMode: 'read-only' },
    });
    t.after(() => fx.cleanup());
    fx.provider.enqueue({
      kind: 'tool-call',
      command: 'touch escalated.txt',
      callId: 'call_esc',
      extraArgs: { sandbox_permissions: 'require_escalated', justification: 'needs write' },
    });
    const agent = await fx.start();
    const { thread } = await agent.startThread({ cwd: fx.workspace });
    const rec = recorder();
    const outcome = await (
      await agent.runTurn(thread.id, 'write a file', { onEvent: rec.onEvent })
    ).outcome;
    assert.equal(outcome.status, 'completed');
    const approval = named(rec.events, 'approval.declined');
    assert.equal(approval.length, 1);
    assert.equal(approval[0]!.data['method'], 'item/commandExecution/requestApproval');
    assert.equal(approval[0]!.data['itemId'], 'call_esc');
    const completed = named(rec.events, 'item.completed');
    assert.equal(completed[0]!.data['status'], 'declined');
    const followUp = await fx.provider.waitForRequest(2);
    assert.match(functionCallOutput(followUp, 'call_esc') ?? '', /rejected/);
  });

  it('steers a turn while the provider stalls: the next request carries the steer text', async (t) => {
    const fx = await agentFixture();
    t.after(() => fx.cleanup());
    fx.provider.enqueue({ kind: 'stall' }, { kind: 'text', text: 'steered answer' });
    const agent = await fx.start();
    const { thread } = await agent.startThread({ cwd: fx.workspace });
    const turn = await agent.runTurn(thread.id, 'start slowly');
    await fx.provider.waitForRequest(1);
    const steer = await turn.steer('please also mention bananas');
    assert.deepEqual(steer, { forwarded: true, accepted: true, turnId: turn.turnId, error: null });
    const outcome = await turn.outcome;
    assert.equal(outcome.status, 'completed');
    assert.equal(outcome.finalMessage?.text, 'steered answer');
    const next = await fx.provider.waitForRequest(2);
    assert.ok(userTexts(next).includes('please also mention bananas'));
    assert.ok(userTexts(next).includes('start slowly'), 'the steer joins the same turn');

    const late = await turn.steer('too late');
    assert.equal(late.forwarded, false);
    assert.equal(late.accepted, false);
  });

  it('a stall released early answers with the default reply', async (t) => {
    const fx = await agentFixture();
    t.after(() => fx.cleanup());
    fx.provider.enqueue({ kind: 'stall' });
    const agent = await fx.start();
    const { thread } = await agent.startThread({ cwd: fx.workspace });
    const turn = await agent.runTurn(thread.id, 'wait for it');
    await fx.provider.waitForRequest(1);
    await sleep(300);
    fx.provider.release();
    const outcome = await turn.outcome;
    assert.equal(outcome.status, 'completed');
    assert.equal(outcome.finalMessage?.text, 'ok');
  });

  it('interrupts a turn mid-command (cancelled), and killTree leaves no agent or shell process', async (t) => {
    const { agent, rec, turn } = await sleepingTurn(t, 'sleep for a while');
    await waitUntil(
      () => processesWithTag(guard.tag).some((p) => p.command.startsWith('sleep 30')),
      5000,
      'sleep to run',
    );
    const sleeper = processesWithTag(guard.tag).find((p) => p.command.startsWith('sleep 30'))!;
    assert.ok(descendantsOf(agent.process.pid).includes(sleeper.pid));

    await turn.interrupt();
    const outcome = await turn.outcome;
    assert.equal(outcome.status, 'cancelled');
    assert.equal(outcome.agentStatus, 'interrupted');
    assert.equal(outcome.failure?.failureKind, 'cancelled');
    assert.equal(outcome.finalMessage, null);
    const interrupted = named(rec.events, 'item.interrupted');
    assert.equal(interrupted[0]?.data['status'], 'interrupted', 'the open command is closed out');

    // The interrupt does not stop the command itself: the tree kill does.
    await sleep(200);
    assert.ok(
      processesWithTag(guard.tag).some((p) => p.pid === sleeper.pid),
      'sleep survives the interrupt',
    );
    agent.killTree();
    await agent.process.exited;
    await waitUntil(() => processesWithTag(guard.tag).length === 0, 5000, 'the tree to die');
  });

  it('cancel() with kill "always" ends the turn and the whole tree', async (t) => {
    const { agent, turn } = await sleepingTurn(t, 'sleep again');
    const outcome = await turn.cancel({ graceMs: 2000, kill: 'always' });
    assert.equal(outcome.status, 'cancelled');
    await agent.process.exited;
    await waitUntil(() => processesWithTag(guard.tag).length === 0, 5000, 'the tree to die');
  });

  it('shutdown also ends helpers the agent leaves behind (a slow login shell)', async (t) => {
    const fx = await agentFixture();
    t.after(() => fx.cleanup());
    // The agent snapshots the login shell environment at thread start; a slow profile keeps
    // that shell (and what it runs) alive past the agent's own exit.
    await writeFile(join(fx.userHome, '.profile'), 'sleep 25\n');
    const agent = await fx.start();
    await agent.startThread({ cwd: fx.workspace });
    await waitUntil(
      () => processesWithTag(guard.tag).some((p) => p.command === 'sleep 25'),
      10_000,
      'the login shell to run its profile',
    );
    await agent.shutdown({ graceMs: 3000, termMs: 1000 });
    await waitUntil(() => processesWithTag(guard.tag).length === 0, 3000, 'no process to remain');
  });
});
