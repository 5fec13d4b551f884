import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { findCanaries, type ProviderStep } from '@svc/testkit';
import type { AgentEvent, TurnOutcome } from '../src/agent/index.js';
import { agentFixture, leakGuard, named, recorder, type AgentFixture } from './agent-helpers.js';

const guard = leakGuard();
after(() => guard.check());

async function failingTurn(
  fx: AgentFixture,
  step: ProviderStep | null,
  options: { idleTimeoutMs?: number; env?: Record<string, string> } = {},
): Promise<{ outcome: TurnOutcome; events: AgentEvent[] }> {
  if (step) fx.provider.enqueue(step);
  const agent = await fx.start(options.env ? { env: options.env } : {});
  const { thread } = await agent.startThread({ cwd: fx.workspace });
  const rec = recorder();
  const turn = await agent.runTurn(thread.id, 'do the thing', {
    onEvent: rec.onEvent,
    ...(options.idleTimeoutMs !== undefined && { idleTimeoutMs: options.idleTimeoutMs }),
  });
  return { outcome: await turn.outcome, events: rec.events };
}

const PROVIDER_CASES: Array<{
  name: string;
  step: ProviderStep;
  failureKind: string;
  reason: string;
  retryable: boolean;
}> = [
  {
    name: 'HTTP 401',
    step: { kind: 'http-error', status: 401 },
    failureKind: 'provider-auth-failed',
    reason: 'http-401',
    retryable: false,
  },
  {
    name: 'HTTP 403',
    step: { kind: 'http-error', status: 403 },
    failureKind: 'provider-auth-failed',
    reason: 'http-403',
    retryable: false,
  },
  {
    name: 'HTTP 429',
    step: { kind: 'http-error', status: 429 },
    failureKind: 'provider-unavailable',
    reason: 'rate-limited',
    retryable: true,
  },
  {
    name: 'HTTP 500',
    step: { kind: 'http-error', status: 500 },
    failureKind: 'provider-unavailable',
    reason: 'server-error',
    retryable: true,
  },
  {
    name: 'a cut stream',
    step: { kind: 'cut', partialText: 'half an ans' },
    failureKind: 'provider-unavailable',
    reason: 'stream-disconnected',
    retryable: true,
  },
  {
    name: 'context_length_exceeded',
    step: { kind: 'failed', code: 'context_length_exceeded' },
    failureKind: 'provider-unavailable',
    reason: 'context-window-exceeded',
    retryable: false,
  },
  {
    name: 'insufficient_quota',
    step: { kind: 'failed', code: 'insufficient_quota' },
    failureKind: 'provider-unavailable',
    reason: 'usage-limit-exceeded',
    retryable: false,
  },
];

describe('agent failures are classified, never completed', () => {
  for (const c of PROVIDER_CASES) {
    it(`classifies ${c.name} as ${c.failureKind} (${c.reason})`, async (t) => {
      const fx = await agentFixture();
      t.after(() => fx.cleanup());
      const { outcome, events } = await failingTurn(fx, c.step);
      assert.equal(outcome.status, 'failed');
      assert.equal(outcome.agentStatus, 'failed');
      assert.equal(outcome.finalMessage, null);
      assert.equal(outcome.failure?.failureKind, c.failureKind);
      assert.equal(outcome.failure?.reason, c.reason);
      assert.equal(outcome.failure?.retryable, c.retryable);
      assert.equal(outcome.failure?.classification, 'provider');
      const errors = events.filter((e) => e.category === 'error');
      assert.ok(errors.length >= 1);
      const last = errors.at(-1)!;
      assert.equal(last.data['failureKind'], c.failureKind);
      assert.equal(last.data['willRetry'], false);
      assert.ok(String(last.data['message']).length <= 2000);
      assert.ok(
        events.every((e) => e.data['final'] !== true),
        'nothing is final on a failed turn',
      );
      assert.deepEqual(findCanaries(JSON.stringify(events), [fx.apiKey]), []);
    });
  }

  it('scrubs the provider key from error messages, replies and outcomes', async (t) => {
    const fx = await agentFixture();
    t.after(() => fx.cleanup());
    fx.provider.enqueue(
      { kind: 'text', text: `your key is ${fx.apiKey}` },
      { kind: 'http-error', status: 401, message: `Incorrect API key provided: ${fx.apiKey}` },
    );
    const agent = await fx.start();
    const { thread } = await agent.startThread({ cwd: fx.workspace });
    const rec = recorder();
    const first = await (
      await agent.runTurn(thread.id, 'leak it', { onEvent: rec.onEvent })
    ).outcome;
    const second = await (
      await agent.runTurn(thread.id, 'again', { onEvent: rec.onEvent })
    ).outcome;
    assert.equal(first.finalMessage?.text, 'your key is [redacted]');
    assert.equal(second.failure?.failureKind, 'provider-auth-failed');
    assert.match(second.failure?.message ?? '', /\[redacted\]/);
    const leaks = findCanaries(JSON.stringify([rec.events, first, second]), [fx.apiKey]);
    assert.deepEqual(leaks, []);
  });

  it('trips the idle watchdog on a stalled provider: interrupted, idle-timeout', async (t) => {
    const fx = await agentFixture();
    t.after(() => fx.cleanup());
    const started = Date.now();
    const { outcome, events } = await failingTurn(fx, { kind: 'stall' }, { idleTimeoutMs: 1500 });
    assert.ok(Date.now() - started < 10_000);
    assert.equal(outcome.status, 'failed');
    assert.equal(outcome.failure?.failureKind, 'idle-timeout');
    assert.equal(outcome.agentStatus, 'interrupted', 'the watchdog interrupted the turn');
    const idle = named(events, 'turn.idle-timeout');
    assert.equal(idle.length, 1);
    assert.equal(idle[0]!.category, 'error');
    assert.ok((idle[0]!.data['idleMs'] as number) >= 1500);
  });

  it('classifies the provider stream idle timeout as provider-unavailable', async (t) => {
    const fx = await agentFixture({ config: { streamIdleTimeoutMs: 800 } });
    t.after(() => fx.cleanup());
    const { outcome } = await failingTurn(fx, { kind: 'stall' }, { idleTimeoutMs: 10_000 });
    assert.equal(outcome.failure?.failureKind, 'provider-unavailable');
    assert.equal(outcome.failure?.reason, 'stream-idle-timeout');
    assert.equal(outcome.failure?.retryable, true);
  });

  it('classifies a missing provider key variable as provider-auth-failed', async (t) => {
    const fx = await agentFixture();
    t.after(() => fx.cleanup());
    const { outcome } = await failingTurn(fx, null, { env: {} });
    assert.equal(outcome.failure?.failureKind, 'provider-auth-failed');
    assert.equal(outcome.failure?.reason, 'credential-missing');
    assert.equal(fx.provider.requests.length, 0);
  });

  for (const providerName of ['svc', 'OpenAI']) {
    it(`maps a compaction answered 404 to provider-compact-unsupported (provider named ${providerName})`, async (t) => {
      const fx = await agentFixture({ providerName });
      t.after(() => fx.cleanup());
      const agent = await fx.start();
      const { thread } = await agent.startThread({ cwd: fx.workspace });
      assert.equal(
        (await (await agent.runTurn(thread.id, 'some history')).outcome).status,
        'completed',
      );
      const rec = recorder();
      const outcome = await (
        await agent.compactThread(thread.id, { onEvent: rec.onEvent })
      ).outcome;
      assert.equal(outcome.status, 'failed');
      assert.equal(outcome.failure?.failureKind, 'provider-compact-unsupported');
      assert.equal(outcome.failure?.httpStatus, 404);
      assert.equal(fx.provider.requestsOf('compact').length, 1);
      assert.equal(named(rec.events, 'context.compaction')[0]?.data['status'], 'started');
    });
  }

  for (const providerName of ['svc', 'OpenAI']) {
    it(`compacts when the provider supports it (provider named ${providerName})`, async (t) => {
      const fx = await agentFixture({
        providerName,
        provider: { compact: { kind: 'reply', summary: 'short summary' } },
      });
      t.after(() => fx.cleanup());
      const agent = await fx.start();
      const { thread } = await agent.startThread({ cwd: fx.workspace });
      await (
        await agent.runTurn(thread.id, 'some history')
      ).outcome;
      const outcome = await (await agent.compactThread(thread.id)).outcome;
      assert.equal(outcome.status, 'completed');
      assert.equal(fx.provider.requestsOf('compact').length, 1);
    });
  }

  it('reports an agent that dies mid-turn as backend-failed (transport closed)', async (t) => {
    const fx = await agentFixture();
    t.after(() => fx.cleanup());
    fx.provider.enqueue({ kind: 'stall' });
    const agent = await fx.start();
    const { thread } = await agent.startThread({ cwd: fx.workspace });
    const rec = recorder();
    const turn = await agent.runTurn(thread.id, 'then crash', { onEvent: rec.onEvent });
    await fx.provider.waitForRequest(1);
    process.kill(agent.process.pid, 'SIGKILL');
    const outcome = await turn.outcome;
    assert.equal(outcome.status, 'failed');
    assert.equal(outcome.agentStatus, null);
    assert.equal(outcome.failure?.failureKind, 'backend-failed');
    assert.equal(outcome.failure?.reason, 'agent-exited');
    assert.equal(named(rec.events, 'agent.transport-closed').length, 1);
    await assert.rejects(agent.startThread({ cwd: fx.workspace }), /refused/);
  });
});
