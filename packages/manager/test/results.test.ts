import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runBody, startTestManager, TestRunner, type TestManager } from './helpers.js';

let t: TestManager;
before(async () => {
  t = await startTestManager({ env: { SVC_RESULT_EVENT_CAP: '50' } });
  await t.configureProfile('builtin-a');
});
after(() => t.close());

let counter = 0;
/** A claimed run with one acknowledged turn, ready for events. */
async function runningTurn(): Promise<{ runId: string; commandId: string; runner: TestRunner }> {
  const run = await t.api('POST', '/api/v1/runs', runBody());
  const runId = run.body.runId;
  const runner = new TestRunner(t, `rnr-result${String(++counter).padStart(3, '0')}`, runId);
  await runner.claim();
  const command = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
    type: 'turn',
    payload: { prompt: 'go' },
  });
  await runner.poll();
  await runner.ack(command.body.commandId);
  return { runId, commandId: command.body.commandId, runner };
}

let keyCounter = 0;
const assistant = (commandId: string, text: string, flags: Record<string, unknown> = {}) => ({
  key: `a${++keyCounter}`,
  commandId,
  category: 'assistant_message',
  data: { text, itemId: `item-${keyCounter}`, ...flags },
});

const result = async (runId: string, commandId?: string) =>
  (
    await t.api(
      'GET',
      commandId
        ? `/api/v1/runs/${runId}/commands/${commandId}/result`
        : `/api/v1/runs/${runId}/result`,
    )
  ).body;

describe('result envelope', () => {
  it('takes the last authoritative final message as the reply once terminal completed', async () => {
    const { runId, commandId, runner } = await runningTurn();
    const appended = await runner.append([
      assistant(commandId, 'thinking aloud', { final: false }),
      assistant(commandId, 'The answer is 4.', { final: true, replyAuthority: true }),
      assistant(commandId, 'a later non-final aside', { final: false }),
    ]);
    const before = await result(runId, commandId);
    assert.equal(before.completed, false, 'no terminal event yet');
    assert.equal(before.reply, null, 'no reply is invented before terminal completed');
    assert.equal(before.finalResponseAuthority, 'authoritative');
    assert.equal(before.terminalSource.kind, 'none');

    await runner.finish(commandId, 'completed');
    const done = await result(runId, commandId);
    assert.equal(done.completed, true);
    assert.equal(done.terminalStatus, 'completed');
    assert.equal(done.terminalSource.kind, 'terminal-status-event');
    assert.equal(done.reply, 'The answer is 4.');
    assert.equal(done.finalResponseAuthority, 'authoritative');
    assert.equal(done.finalAssistantSeq, appended.body.events[1].seq);
    assert.equal(done.needsContinuation, false);
    assert.equal(done.completionEvidence.reason, 'terminal-completed-with-authoritative-final');
    assert.equal(done.lastSeq, done.terminalSource.seq);
    assert.equal(done.eventCount, done.lastSeq);
    assert.equal(done.liveness.phase, 'terminal');
    assert.equal(done.liveness.timeoutBudget.state, 'terminal');
  });

  it('falls back to the last non-empty assistant text and asks for continuation', async () => {
    const { runId, commandId, runner } = await runningTurn();
    await runner.append([
      assistant(commandId, 'first draft'),
      assistant(commandId, 'second draft'),
      assistant(commandId, ''),
    ]);
    await runner.finish(commandId, 'completed');
    const done = await result(runId, commandId);
    assert.equal(done.completed, true);
    assert.equal(done.reply, 'second draft');
    assert.equal(done.finalResponseAuthority, 'fallback');
    assert.equal(done.finalResponseFallback, true);
    assert.equal(done.finalResponse.replyAuthority, false);
    assert.equal(done.needsContinuation, true);
    assert.equal(done.completionEvidence.reason, 'terminal-completed-without-authoritative-final');
    assert.equal(done.completionEvidence.continueWith.path, `/api/v1/runs/${runId}/commands`);
  });

  it('reports a missing reply when completed without assistant text', async () => {
    const { runId, commandId, runner } = await runningTurn();
    await runner.append([
      {
        key: `o${++keyCounter}`,
        commandId,
        category: 'command_output',
        data: { text: 'lots of stdout', originalBytes: 14, keptBytes: 14 },
      },
    ]);
    await runner.finish(commandId, 'completed');
    const done = await result(runId, commandId);
    assert.equal(done.reply, null);
    assert.equal(done.finalResponseAuthority, 'missing');
    assert.equal(done.needsContinuation, true);
    assert.equal(done.completionEvidence.reason, 'terminal-completed-without-assistant-text');
  });

  it('never reports completed from text, output or a failed terminal', async () => {
    const { runId, commandId, runner } = await runningTurn();
    await runner.append([
      assistant(commandId, 'partial answer', { final: false }),
      {
        key: `o${++keyCounter}`,
        commandId,
        category: 'command_output',
        data: { text: 'ok', originalBytes: 2 },
      },
    ]);
    const open = await result(runId, commandId);
    assert.equal(open.completed, false);
    assert.equal(open.status, 'confirmed');
    assert.equal(open.terminalStatus, null);
    await runner.finish(commandId, 'failed', {
      failureKind: 'provider-unavailable',
      message: 'stream disconnected',
    });
    const failed = await result(runId, commandId);
    assert.equal(failed.completed, false);
    assert.equal(failed.terminalStatus, 'failed');
    assert.equal(failed.failureKind, 'provider-unavailable');
    assert.equal(failed.reply, null);
    assert.equal(failed.finalResponse.text, 'partial answer');
    assert.equal(failed.finalResponseAuthority, 'fallback');
    assert.equal(failed.needsContinuation, false);
  });

  it('ignores assistant events after the terminal event when selecting the reply', async () => {
    const { runId, commandId, runner } = await runningTurn();
    await runner.append([
      assistant(commandId, 'the real answer', { final: true, replyAuthority: true }),
    ]);
    await runner.finish(commandId, 'completed');
    await runner.append([
      assistant(commandId, 'straggler after terminal', { final: true, replyAuthority: true }),
    ]);
    const done = await result(runId, commandId);
    assert.equal(done.reply, 'the real answer');
    assert.ok(done.finalAssistantSeq < done.terminalSource.seq);
  });

  it('scopes to one command when commandId is given and to the latest turn otherwise', async () => {
    const { runId, commandId: first, runner } = await runningTurn();
    await runner.append([assistant(first, 'answer one', { final: true, replyAuthority: true })]);
    await runner.finish(first, 'completed');
    const second = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'again' },
    });
    await runner.poll(1);
    await runner.ack(second.body.commandId);
    await runner.append([
      assistant(second.body.commandId, 'answer two', { final: true, replyAuthority: true }),
    ]);
    await runner.finish(second.body.commandId, 'completed');

    const one = await result(runId, first);
    const two = await result(runId, second.body.commandId);
    const latest = await result(runId);
    assert.equal(one.reply, 'answer one');
    assert.equal(two.reply, 'answer two');
    assert.equal(latest.commandId, second.body.commandId);
    assert.equal(latest.reply, 'answer two');
    assert.equal(one.scopedEventCount, 2);
    assert.ok(one.scopedLastSeq < two.scopedLastSeq);
    assert.equal(one.lastSeq, two.lastSeq, 'lastSeq covers the whole run');
  });

  it('joins a reply split into parts', async () => {
    const { runId, commandId, runner } = await runningTurn();
    await runner.append([
      {
        key: 'p1',
        commandId,
        category: 'assistant_message',
        data: {
          itemId: 'msg-1',
          part: 1,
          parts: 2,
          text: 'Hello, ',
          final: true,
          replyAuthority: true,
        },
      },
      {
        key: 'p2',
        commandId,
        category: 'assistant_message',
        data: {
          itemId: 'msg-1',
          part: 2,
          parts: 2,
          text: 'world.',
          final: true,
          replyAuthority: true,
        },
      },
    ]);
    await runner.finish(commandId, 'completed');
    assert.equal((await result(runId, commandId)).reply, 'Hello, world.');
  });

  it('summarizes tool calls by their latest state and output by bytes, bounded', async () => {
    const { runId, commandId, runner } = await runningTurn();
    const tool = (item: string, status: string, exitCode?: number) => ({
      key: `t-${item}-${status}`,
      commandId,
      category: 'tool_call',
      data: {
        itemId: item,
        toolName: 'shell',
        type: 'commandExecution',
        method: 'item/completed',
        status,
        command: `ls ${'-l '.repeat(200)}`,
        ...(exitCode !== undefined ? { exitCode } : {}),
      },
    });
    await runner.append([
      tool('i1', 'started'),
      tool('i1', 'completed', 0),
      tool('i2', 'started'),
      tool('i2', 'failed', 2),
      tool('i3', 'started'),
      {
        key: 'out1',
        commandId,
        category: 'command_output',
        data: {
          itemId: 'i1',
          text: 'x',
          originalBytes: 100000,
          keptBytes: 16384,
          outputTruncated: true,
          logRef: 'runner.log#i1',
        },
      },
      { key: 'diff1', commandId, category: 'diff', data: { diff: '+a', originalBytes: 2 } },
    ]);
    const summary = await result(runId, commandId);
    assert.equal(summary.toolCallSummary.count, 3);
    assert.deepEqual(summary.toolCallSummary.statusCounts, { completed: 1, failed: 1, started: 1 });
    assert.deepEqual(summary.toolCallSummary.exitCodeCounts, { '0': 1, '2': 1 });
    assert.ok(summary.toolCallSummary.recent.every((r: any) => r.command.length <= 200));
    assert.equal(summary.artifactSummary.outputBytes, 100000);
    assert.equal(summary.artifactSummary.keptBytes, 16384);
    assert.equal(summary.artifactSummary.truncatedOutputs, 1);
    assert.equal(summary.artifactSummary.diffEvents, 1);
    assert.deepEqual(summary.artifactSummary.references, ['runner.log#i1']);
    assert.equal(summary.liveness.phase, 'waiting-tool', 'tool i3 is still running');
    await runner.append([tool('i3', 'completed', 0)]);
    assert.equal((await result(runId, commandId)).liveness.phase, 'idle-after-tool');
  });

  it('says eventsCapped with a continuation cursor past the aggregation cap, never silently', async () => {
    const { runId, commandId, runner } = await runningTurn();
    const tools = Array.from({ length: 80 }, (_, i) => ({
      key: `c${i}`,
      commandId,
      category: 'tool_call',
      data: { itemId: `x${i}`, status: 'completed', exitCode: 0 },
    }));
    await runner.append([
      ...tools,
      assistant(commandId, 'done', { final: true, replyAuthority: true }),
    ]);
    await runner.finish(commandId, 'completed');
    const first = await result(runId, commandId);
    assert.equal(first.eventsCapped, true);
    assert.equal(
      first.aggregationWindow.throughSeq - first.aggregationWindow.afterSeq,
      50,
      'a window spans the cap',
    );
    assert.ok(first.toolCallSummary.count <= 50);
    assert.equal(first.completed, true, 'terminal and reply are found beyond the window');
    assert.equal(first.reply, 'done');
    const next = (
      await t.api(
        'GET',
        `/api/v1/runs/${runId}/result?commandId=${commandId}&afterSeq=${first.nextAfterSeq}`,
      )
    ).body;
    assert.equal(next.eventsCapped, false);
    assert.equal(next.nextAfterSeq, null);
    assert.equal(
      first.toolCallSummary.count + next.toolCallSummary.count,
      80,
      'the windows together cover every tool call once',
    );
  });

  it('reports steer delivery from the runner and whether the target produced later events', async () => {
    const { runId, commandId: target, runner } = await runningTurn();
    const steer = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'steer',
      payload: { prompt: 'be brief' },
    });
    await runner.poll(1);
    await runner.ack(steer.body.commandId);
    await runner.finish(steer.body.commandId, 'completed', {
      steerDelivery: { forwarded: true, accepted: true, targetTurnId: 'turn-9' },
    });
    const before = await result(runId, steer.body.commandId);
    assert.deepEqual(
      { ...before.steerDelivery },
      {
        targetCommandId: target,
        acknowledged: true,
        forwarded: true,
        accepted: true,
        targetTurnId: 'turn-9',
        laterTargetEventsSeen: false,
        message: null,
      },
    );
    assert.equal(before.completed, true, 'the steer command completed');
    await runner.append([assistant(target, 'brief answer', { final: true, replyAuthority: true })]);
    const after = await result(runId, steer.body.commandId);
    assert.equal(after.steerDelivery.laterTargetEventsSeen, true);
  });

  it('counts target output after the steer was delivered, even before the steer finished', async () => {
    const { runId, commandId: target, runner } = await runningTurn();
    await runner.append([assistant(target, 'thinking out loud')]);
    const steer = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'steer',
      payload: { prompt: 'be brief' },
    });
    await runner.poll(1);
    await runner.ack(steer.body.commandId);
    const delivered = {
      key: `d${++keyCounter}`,
      commandId: steer.body.commandId,
      category: 'backend_status',
      name: 'steer.delivered',
      data: { targetCommandId: target, forwarded: true, accepted: true },
    };
    await runner.append([delivered]);
    const quiet = await result(runId, steer.body.commandId);
    assert.equal(quiet.steerDelivery.laterTargetEventsSeen, false, 'output before the steer');
    // The short target turn answers and ends before the steer's own status arrives.
    await runner.append([assistant(target, 'brief answer', { final: true, replyAuthority: true })]);
    await runner.finish(target, 'completed');
    await runner.finish(steer.body.commandId, 'completed', {
      steerDelivery: { forwarded: true, accepted: true, targetTurnId: 'turn-9' },
    });
    const done = await result(runId, steer.body.commandId);
    assert.equal(done.completed, true);
    assert.equal(done.steerDelivery.laterTargetEventsSeen, true);
  });

  it('reports a blocked command with its blocker', async () => {
    const { runId, commandId, runner } = await runningTurn();
    await runner.finish(commandId, 'blocked', {
      failureKind: 'required-skill-unavailable',
      message: 'skill review missing',
    });
    const blocked = await result(runId, commandId);
    assert.equal(blocked.terminalStatus, 'blocked');
    assert.deepEqual(blocked.blocker, {
      failureKind: 'required-skill-unavailable',
      message: 'skill review missing',
      details: {},
    });
  });
});
