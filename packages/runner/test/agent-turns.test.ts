import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { findCanaries, userTexts } from '@svc/testkit';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AgentError, mergeRunnerConfig } from '../src/agent/index.js';
import { KEY_VAR, agentFixture, leakGuard, named, recorder } from './agent-helpers.js';

const guard = leakGuard();
after(() => guard.check());

describe('agent turns against the real agent binary', () => {
  it('completes a turn with the last message final and authoritative, and sends the prompt and key', async (t) => {
    const fx = await agentFixture();
    t.after(() => fx.cleanup());
    fx.provider.enqueue({ kind: 'text', text: 'Hello from the model' });
    const agent = await fx.start();
    const { thread, event: threadEvent } = await agent.startThread({ cwd: fx.workspace });
    assert.equal(threadEvent.name, 'thread.started');
    assert.equal(threadEvent.data['threadId'], thread.id);

    const rec = recorder();
    const turn = await agent.runTurn(thread.id, 'Say hello please', {
      onEvent: rec.onEvent,
      commandId: 'cmd-1',
    });
    assert.ok(turn.turnId);
    const outcome = await turn.outcome;

    assert.equal(outcome.status, 'completed');
    assert.equal(outcome.agentStatus, 'completed');
    assert.equal(outcome.failure, null);
    assert.equal(outcome.finalMessage?.text, 'Hello from the model');

    const messages = named(rec.events, 'agent.message');
    assert.equal(messages.length, 1);
    const final = messages[0]!;
    assert.equal(final.category, 'assistant_message');
    assert.equal(final.commandId, 'cmd-1');
    assert.deepEqual(
      {
        text: final.data['text'],
        final: final.data['final'],
        replyAuthority: final.data['replyAuthority'],
        turnId: final.data['turnId'],
      },
      { text: 'Hello from the model', final: true, replyAuthority: true, turnId: turn.turnId },
    );
    assert.equal(typeof final.data['itemId'], 'string');
    assert.equal(named(rec.events, 'turn.started').length, 1);
    const completed = named(rec.events, 'turn.completed')[0];
    assert.equal(completed?.data['agentStatus'], 'completed');

    const request = await fx.provider.waitForRequest(1);
    assert.ok(userTexts(request).includes('Say hello please'));
    assert.equal(request.bearer, fx.apiKey, 'the provider key is sent as the bearer token');
    assert.deepEqual(findCanaries(JSON.stringify(rec.events), [fx.apiKey]), []);
  });

  it('carries the history into a second turn, and into a thread resumed by a new process', async (t) => {
    const fx = await agentFixture();
    t.after(() => fx.cleanup());
    fx.provider.enqueue(
      { kind: 'text', text: 'first answer' },
      { kind: 'text', text: 'second answer' },
      { kind: 'text', text: 'third answer' },
    );
    const first = await fx.start();
    const { thread } = await first.startThread({ cwd: fx.workspace });
    assert.equal(
      (await (await first.runTurn(thread.id, 'question one')).outcome).status,
      'completed',
    );
    const second = await (await first.runTurn(thread.id, 'question two')).outcome;
    assert.equal(second.finalMessage?.text, 'second answer');

    const request2 = await fx.provider.waitForRequest(2);
    assert.deepEqual(
      userTexts(request2).filter((t) => t.startsWith('question')),
      ['question one', 'question two'],
    );
    assert.ok(JSON.stringify(request2.body).includes('first answer'));
    await first.shutdown();

    const restarted = await fx.start();
    const resumed = await restarted.resumeThread(thread.id);
    assert.equal(resumed.thread.id, thread.id);
    assert.equal(resumed.event.name, 'thread.resumed');
    const third = await (await restarted.runTurn(thread.id, 'question three')).outcome;
    assert.equal(third.status, 'completed');
    assert.equal(third.finalMessage?.text, 'third answer');
    const request3 = await fx.provider.waitForRequest(3);
    assert.deepEqual(
      userTexts(request3).filter((t) => t.startsWith('question')),
      ['question one', 'question two', 'question three'],
    );
    const body = JSON.stringify(request3.body);
    assert.ok(body.includes('first answer') && body.includes('second answer'));
  });

  it('maps resume of an unknown thread to rollout-not-found and never starts a new thread', async (t) => {
    const fx = await agentFixture();
    t.after(() => fx.cleanup());
    const agent = await fx.start();
    await assert.rejects(agent.resumeThread('0199a213-81c0-7800-8aa1-bbab2a035a53'), (error) => {
      assert.ok(error instanceof AgentError);
      assert.equal(error.kind, 'rollout-not-found');
      assert.equal(error.failureKind(), 'thread-resume-failed');
      assert.equal(error.failureKind({ sessionVolume: true }), 'session-store-evicted');
      return true;
    });
    await assert.rejects(agent.resumeThread('not-a-uuid'), (error) => {
      assert.ok(error instanceof AgentError);
      assert.equal(error.kind, 'thread-resume-failed');
      return true;
    });
    assert.equal(fx.provider.requests.length, 0, 'no turn was run in place of the resume');
  });

  it('coalesces a reply streamed as 200 deltas into a handful of events', async (t) => {
    const fx = await agentFixture();
    t.after(() => fx.cleanup());
    const text = Array.from({ length: 200 }, (_, i) => `w${i}`).join(' ');
    // 200 deltas over ~1 s: progress events at most every 250 ms.
    fx.provider.enqueue({ kind: 'text', text, deltas: 200, frameDelayMs: 5 });
    const agent = await fx.start();
    const { thread } = await agent.startThread({ cwd: fx.workspace });
    const rec = recorder();
    const raw: string[] = [];
    const outcome = await (
      await agent.runTurn(thread.id, 'stream please', {
        onEvent: rec.onEvent,
        onNotification: (method) => raw.push(method),
      })
    ).outcome;
    assert.equal(outcome.status, 'completed');
    assert.ok(
      raw.filter((m) => m === 'item/agentMessage/delta').length >= 150,
      'the agent streamed deltas',
    );
    const assistant = rec.events.filter((e) => e.category === 'assistant_message');
    assert.ok(
      assistant.length <= 8,
      `at most a handful of assistant events, got ${assistant.length}`,
    );
    const progress = named(rec.events, 'agent.message.progress');
    for (const p of progress) {
      assert.equal(p.data['final'], false);
      assert.equal(p.data['itemId'], undefined, 'progress never joins the parts of the message');
      assert.ok(text.startsWith(String(p.data['text'])));
    }
    const final = named(rec.events, 'agent.message');
    assert.equal(final.length, 1);
    assert.equal(final[0]!.data['text'], text);
    assert.equal(final[0]!.data['final'], true);
  });

  it('splits a long final reply into parts with the same itemId', async (t) => {
    const fx = await agentFixture();
    t.after(() => fx.cleanup());
    const text = 'abcdefghij'.repeat(13_000); // 130 000 bytes: three parts of at most 60 KiB
    fx.provider.enqueue({ kind: 'text', text });
    const agent = await fx.start();
    const { thread } = await agent.startThread({ cwd: fx.workspace });
    const rec = recorder();
    const outcome = await (
      await agent.runTurn(thread.id, 'long please', { onEvent: rec.onEvent })
    ).outcome;
    assert.equal(outcome.status, 'completed');
    const parts = named(rec.events, 'agent.message');
    assert.equal(parts.length, 3);
    assert.deepEqual(
      parts.map((p) => p.data['part']),
      [1, 2, 3],
    );
    assert.ok(
      parts.every((p) => p.data['parts'] === 3 && p.data['itemId'] === parts[0]!.data['itemId']),
    );
    assert.ok(parts.every((p) => p.data['final'] === true && p.data['replyAuthority'] === true));
    assert.equal(parts.map((p) => p.data['text']).join(''), text);
  });

  it('runs with a profile config merged with the runner settings (workspace-write sandbox)', async (t) => {
    const fx = await agentFixture();
    t.after(() => fx.cleanup());
    const profile = [
      'model = "profile-model"',
      'model_provider = "acme"',
      '[model_providers.acme]',
      'name = "Acme"',
      `base_url = "${fx.provider.baseUrl}"`,
      'wire_api = "responses"',
      `env_key = "${KEY_VAR}"`,
    ].join('\n');
    const merged = mergeRunnerConfig(profile, {
      trustedProjects: [fx.workspace],
      sandboxMode: 'workspace-write',
      requestMaxRetries: 0,
      streamMaxRetries: 0,
    });
    await writeFile(join(fx.home, 'config.toml'), merged.toml);
    fx.provider.enqueue(
      { kind: 'tool-call', command: 'echo written > inside.txt', callId: 'call_w' },
      { kind: 'text', text: 'done' },
    );
    const agent = await fx.start();
    const { thread } = await agent.startThread({ cwd: fx.workspace });
    assert.equal(thread.model, 'profile-model');
    assert.equal(thread.modelProvider, 'acme');
    const rec = recorder();
    const outcome = await (
      await agent.runTurn(thread.id, 'write inside', { onEvent: rec.onEvent })
    ).outcome;
    assert.equal(outcome.status, 'completed');
    assert.equal(named(rec.events, 'item.completed')[0]?.data['exitCode'], 0);
    assert.equal(await readFile(join(fx.workspace, 'inside.txt'), 'utf8'), 'written\n');
    const request = await fx.provider.waitForRequest(1);
    assert.equal((request.body as { model?: string }).model, 'profile-model');
    assert.equal(request.bearer, fx.apiKey);
  });
});
