import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, describe, it } from 'node:test';
import { Redactor } from '@svc/contracts';
import { canary, findCanaries } from '@svc/testkit';
import { parse } from 'smol-toml';
import {
  AgentError,
  ByteRing,
  JsonRpcClient,
  TurnEventMapper,
  agentEnvironment,
  classifyAgentError,
  headTailBytes,
  mergeRunnerConfig,
  renderAuthJson,
  renderRunnerConfig,
  splitBytes,
} from '../src/agent/index.js';
import { leakGuard } from './agent-helpers.js';

const guard = leakGuard();
after(() => guard.check());

describe('config rendering and merging', () => {
  it('renders a runner config with every required key', () => {
    const toml = renderRunnerConfig({
      model: 'm1',
      provider: { baseUrl: 'http://127.0.0.1:9/v1', auth: { envKey: 'KEY_VAR' } },
      trustedProjects: ['/work/ws'],
      modelCatalogJson: '/home/agent/model-catalog.json',
      modelContextWindow: 1_000_000,
      modelAutoCompactTokenLimit: 900_000,
    });
    const doc = parse(toml) as any;
    assert.equal(doc.model, 'm1');
    assert.equal(doc.model_provider, 'svc');
    assert.deepEqual(
      { ...doc.model_providers.svc },
      {
        name: 'svc',
        base_url: 'http://127.0.0.1:9/v1',
        wire_api: 'responses',
        env_key: 'KEY_VAR',
        request_max_retries: 1,
        stream_max_retries: 1,
        stream_idle_timeout_ms: 300_000,
      },
    );
    assert.equal(doc.approval_policy, 'never');
    assert.equal(doc.sandbox_mode, 'workspace-write');
    assert.equal(doc.sandbox_workspace_write.network_access, false);
    assert.equal(doc.check_for_update_on_startup, false);
    assert.deepEqual({ ...doc.features }, { plugins: false, unbounded_connection_retries: false });
    assert.equal(doc.analytics.enabled, false);
    assert.equal(doc.projects['/work/ws'].trust_level, 'trusted');
    assert.equal(doc.model_catalog_json, '/home/agent/model-catalog.json');
    assert.equal(doc.model_context_window, 1_000_000);
    assert.equal(doc.model_auto_compact_token_limit, 900_000);
  });

  it('uses auth.json for requires_openai_auth providers', () => {
    const doc = parse(
      renderRunnerConfig({
        model: 'm',
        provider: { id: 'bridge', baseUrl: 'https://bridge/v1', auth: { openaiAuth: true } },
        trustedProjects: [],
      }),
    ) as any;
    assert.equal(doc.model_providers.bridge.requires_openai_auth, true);
    assert.equal(doc.model_providers.bridge.env_key, undefined);
    assert.deepEqual(JSON.parse(renderAuthJson('sk-1')), {
      OPENAI_API_KEY: 'sk-1',
      auth_mode: 'apikey',
    });
  });

  it('rejects invalid options with invalid-config', () => {
    const base = { model: 'm', trustedProjects: [] };
    for (const bad of [
      { ...base, provider: { baseUrl: 'ftp://x', auth: { envKey: 'K' } } },
      { ...base, provider: { baseUrl: 'http://x/v1', auth: { envKey: 'K; rm' } } },
      {
        ...base,
        provider: { baseUrl: 'http://x/v1', auth: { envKey: 'K' } },
        streamIdleTimeoutMs: -1,
      },
      {
        ...base,
        provider: { baseUrl: 'http://x/v1', auth: { envKey: 'K' } },
        trustedProjects: ['rel'],
      },
    ]) {
      assert.throws(
        () => renderRunnerConfig(bad),
        (e) => e instanceof AgentError && e.kind === 'invalid-config',
      );
    }
  });

  it('merges runner settings into a profile config, keeping its model and provider', () => {
    const token = canary('bearer');
    const profile = [
      'model = "flash-1"',
      'model_provider = "bridge"',
      'model_context_window = 1000000',
      'approval_policy = "on-request"',
      'sandbox_mode = "danger-full-access"',
      '[features]',
      'plugins = true',
      'some_other_feature = true',
      '[model_providers.bridge]',
      'name = "Bridge"',
      'base_url = "http://bridge.internal/v1"',
      'wire_api = "responses"',
      'requires_openai_auth = true',
      `experimental_bearer_token = "${token}"`,
      'request_max_retries = 9',
      '[mcp_servers.docs]',
      'command = "docs-server"',
    ].join('\n');
    const merged = mergeRunnerConfig(profile, {
      trustedProjects: ['/work/ws'],
      sandboxMode: 'workspace-write',
      networkAccess: true,
      requestMaxRetries: 0,
    });
    const doc = parse(merged.toml) as any;
    assert.equal(merged.providerId, 'bridge');
    assert.equal(merged.model, 'flash-1');
    assert.deepEqual(merged.warnings, []);
    assert.deepEqual(merged.secretValues, [token]);
    // kept from the profile
    assert.equal(doc.model, 'flash-1');
    assert.equal(doc.model_context_window, 1_000_000);
    assert.equal(doc.model_providers.bridge.base_url, 'http://bridge.internal/v1');
    assert.equal(doc.model_providers.bridge.requires_openai_auth, true);
    assert.equal(doc.features.some_other_feature, true);
    assert.equal(doc.mcp_servers.docs.command, 'docs-server');
    // forced by the runner
    assert.equal(doc.approval_policy, 'never');
    assert.equal(doc.sandbox_mode, 'workspace-write');
    assert.equal(doc.sandbox_workspace_write.network_access, true);
    assert.equal(doc.features.plugins, false);
    assert.equal(doc.features.unbounded_connection_retries, false);
    assert.equal(doc.analytics.enabled, false);
    assert.equal(doc.check_for_update_on_startup, false);
    assert.equal(doc.model_providers.bridge.request_max_retries, 0);
    assert.equal(doc.model_providers.bridge.stream_max_retries, 1);
    assert.equal(doc.projects['/work/ws'].trust_level, 'trusted');
  });

  it('warns when the profile uses a built-in provider, and never echoes unparseable TOML', () => {
    const merged = mergeRunnerConfig('model = "m"', { trustedProjects: [] });
    assert.equal(merged.providerId, 'openai');
    assert.equal(merged.warnings.length, 1);
    const secret = canary('toml');
    assert.throws(
      () => mergeRunnerConfig(`api_key = "${secret}`, { trustedProjects: [] }),
      (e) => e instanceof AgentError && e.kind === 'invalid-config' && !e.message.includes(secret),
    );
  });
});

describe('failure classification', () => {
  const cases: Array<[string, unknown, boolean, string, string]> = [
    [
      'unexpected status 401 Unauthorized',
      { httpConnectionFailed: { httpStatusCode: 401 } },
      false,
      'provider-auth-failed',
      'http-401',
    ],
    ['x', 'unauthorized', false, 'provider-auth-failed', 'http-401'],
    [
      'exceeded retry limit, last status: 429',
      { responseTooManyFailedAttempts: { httpStatusCode: 429 } },
      false,
      'provider-unavailable',
      'rate-limited',
    ],
    ['high demand', 'internalServerError', false, 'provider-unavailable', 'server-error'],
    [
      'unexpected status 502 Bad Gateway',
      { httpConnectionFailed: { httpStatusCode: 502 } },
      false,
      'provider-unavailable',
      'http-502',
    ],
    [
      'stream disconnected before completion: eof',
      'other',
      false,
      'provider-unavailable',
      'stream-disconnected',
    ],
    [
      'stream disconnected before completion: idle timeout waiting for SSE',
      'other',
      false,
      'provider-unavailable',
      'stream-idle-timeout',
    ],
    ['context', 'contextWindowExceeded', false, 'provider-unavailable', 'context-window-exceeded'],
    ['quota', 'usageLimitExceeded', false, 'provider-unavailable', 'usage-limit-exceeded'],
    [
      'unexpected status 404 Not Found',
      { httpConnectionFailed: { httpStatusCode: 404 } },
      true,
      'provider-compact-unsupported',
      'compact-unsupported',
    ],
    [
      'Error running remote compact task: no route',
      'other',
      false,
      'provider-compact-unsupported',
      'compact-unsupported',
    ],
    [
      'compaction: not implemented',
      'other',
      true,
      'provider-compact-unsupported',
      'compact-unsupported',
    ],
    [
      'unexpected status 404 Not Found',
      { httpConnectionFailed: { httpStatusCode: 404 } },
      false,
      'provider-unavailable',
      'http-404',
    ],
    [
      'Missing environment variable: `KEY`.',
      'other',
      false,
      'provider-auth-failed',
      'credential-missing',
    ],
    ['sandbox denied', 'sandboxError', false, 'backend-failed', 'sandbox-error'],
    ['something odd', 'other', false, 'backend-failed', 'agent-error'],
  ];
  for (const [message, info, compacting, kind, reason] of cases) {
    it(`${JSON.stringify(info)} "${message}"${compacting ? ' while compacting' : ''} -> ${kind}/${reason}`, () => {
      const failure = classifyAgentError({ message, codexErrorInfo: info }, { compacting });
      assert.equal(failure.failureKind, kind);
      assert.equal(failure.reason, reason);
    });
  }
});

describe('bounded text', () => {
  it('keeps head and tail of long output within the byte budget, on code point boundaries', () => {
    const text = `${'é'.repeat(20_000)}END`;
    const bounded = headTailBytes(text, 1000);
    assert.equal(bounded.truncated, true);
    assert.equal(bounded.originalBytes, 40_003);
    assert.ok(bounded.keptBytes <= 1000);
    assert.ok(bounded.text.endsWith('END'));
    assert.ok(!bounded.text.includes('\uFFFD'));
  });

  it('splits into parts and caps the count', () => {
    const { parts, truncated } = splitBytes('x'.repeat(250), 100, 2);
    assert.deepEqual(
      parts.map((p) => p.length),
      [100, 100],
    );
    assert.equal(truncated, true);
  });

  it('keeps only the newest stderr bytes', () => {
    const ring = new ByteRing(10);
    ring.push(Buffer.from('0123456789'));
    ring.push(Buffer.from('abcdef'));
    assert.equal(ring.text(), '6789abcdef');
    assert.equal(ring.dropped, 6);
    ring.push(Buffer.from('Z'.repeat(30)));
    assert.equal(ring.text(), 'Z'.repeat(10));
  });
});

describe('event mapping (pure)', () => {
  it('coalesces deltas by time, holds the last message until the turn completes, scrubs secrets', () => {
    const secret = canary('reply');
    let now = 0;
    const mapper = new TurnEventMapper('th', {
      redactor: new Redactor().add(secret),
      now: () => now,
    });
    mapper.turnId = 'tu';
    const produced = [];
    for (let i = 0; i < 100; i++) {
      now += 10; // 1 s of deltas: at most four progress events
      produced.push(
        ...mapper.onNotification('item/agentMessage/delta', { itemId: 'm1', delta: 'ab' }),
      );
    }
    assert.ok(produced.length >= 3 && produced.length <= 4, `${produced.length} progress events`);
    const item = (text: string) => ({ item: { type: 'agentMessage', id: 'm1', text } });
    assert.deepEqual(mapper.onNotification('item/completed', item(`the key is ${secret}`)), []);
    const finished = mapper.finish({
      completed: true,
      agentStatus: 'completed',
      failure: null,
      durationMs: 5,
    });
    const message = finished.find((e) => e.name === 'agent.message')!;
    assert.equal(message.data['final'], true);
    assert.equal(message.data['replyAuthority'], true);
    assert.equal(message.data['text'], 'the key is [redacted]');
    assert.deepEqual(findCanaries(JSON.stringify(finished), [secret]), []);
  });

  it('emits an earlier message as non-final once another item starts, and nothing final on failure', () => {
    const mapper = new TurnEventMapper('th');
    mapper.turnId = 'tu';
    mapper.onNotification('item/completed', {
      item: { type: 'agentMessage', id: 'm1', text: 'one' },
    });
    const flushed = mapper.onNotification('item/started', {
      item: { type: 'commandExecution', id: 'c1', command: 'ls', status: 'inProgress' },
    });
    assert.equal(flushed[0]?.data['text'], 'one');
    assert.equal(flushed[0]?.data['final'], false);
    assert.equal(flushed[1]?.name, 'item.started');
    mapper.onNotification('item/completed', {
      item: { type: 'agentMessage', id: 'm2', text: 'two' },
    });
    const finished = mapper.finish({
      completed: false,
      agentStatus: 'failed',
      failure: null,
      durationMs: null,
    });
    assert.equal(finished.find((e) => e.name === 'agent.message')?.data['final'], false);
    assert.equal(finished.find((e) => e.name === 'item.interrupted')?.data['itemId'], 'c1');
  });
});

describe('diff and usage events', () => {
  it('emits the last diff once, bounded, and a token usage summary at the end of the turn', () => {
    const mapper = new TurnEventMapper('th');
    mapper.turnId = 'tu';
    assert.deepEqual(mapper.onNotification('turn/diff/updated', { diff: 'small' }), []);
    const big = `diff --git a/x b/x\n${'+line\n'.repeat(20_000)}`;
    mapper.onNotification('turn/diff/updated', { diff: big });
    mapper.onNotification('thread/tokenUsage/updated', {
      tokenUsage: {
        total: { totalTokens: 7, inputTokens: 5, outputTokens: 2 },
        last: {},
        modelContextWindow: 100,
      },
    });
    const events = mapper.finish({
      completed: true,
      agentStatus: 'completed',
      failure: null,
      durationMs: 1,
    });
    const diffs = events.filter((e) => e.category === 'diff');
    assert.equal(diffs.length, 1);
    assert.equal(diffs[0]!.data['originalBytes'], Buffer.byteLength(big));
    assert.equal(diffs[0]!.data['outputTruncated'], true);
    assert.ok(Buffer.byteLength(String(diffs[0]!.data['diff'])) <= 60 * 1024);
    const usage = events.find((e) => e.name === 'token.usage')!;
    assert.equal((usage.data['total'] as Record<string, unknown>)['totalTokens'], 7);
  });
});

describe('JSON-RPC client over a real child', () => {
  const child = (script: string) =>
    spawn(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'pipe'] });

  it('answers requests, dispatches notifications, and rejects pending requests on exit', async () => {
    const proc = child(`
      const rl = require('readline').createInterface({ input: process.stdin });
      rl.on('line', (line) => {
        const m = JSON.parse(line);
        if (m.method === 'echo') process.stdout.write(JSON.stringify({ id: m.id, result: m.params }) + '\\n');
        if (m.method === 'fail') process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: m.id, error: { code: -32600, message: 'bad' } }) + '\\n');
        if (m.method === 'note') process.stdout.write(JSON.stringify({ method: 'hello', params: { n: 1 } }) + '\\n');
        if (m.method === 'die') process.exit(3);
      });
      process.stderr.write('diagnostic line\\n');
    `);
    const rpc = new JsonRpcClient(proc);
    const notes: unknown[] = [];
    rpc.onNotification((n) => notes.push(n));
    assert.deepEqual(await rpc.request('echo', { a: 1 }), { a: 1 });
    await assert.rejects(
      rpc.request('fail', {}),
      (e) => e instanceof AgentError && e.kind === 'rpc-error' && e.rpcCode === -32600,
    );
    rpc.notify('note');
    await rpc.request('echo', null);
    assert.deepEqual(notes, [{ method: 'hello', params: { n: 1 } }]);
    const pending = rpc.request('never', {});
    rpc.notify('die');
    await assert.rejects(pending, (e) => e instanceof AgentError && e.kind === 'agent-exited');
    await assert.rejects(rpc.request('echo', {}), /refused/);
    assert.match(rpc.stderr.text(), /diagnostic line/);
  });

  it('times out a request without a reply', async () => {
    const proc = child(`process.stdin.resume(); setTimeout(() => {}, 60000)`);
    const rpc = new JsonRpcClient(proc, { requestTimeoutMs: 100 });
    await assert.rejects(
      rpc.request('slow', {}),
      (e) => e instanceof AgentError && e.kind === 'request-timeout',
    );
    proc.kill('SIGKILL');
    await new Promise((r) => proc.once('exit', r));
  });

  it('kills the child when a line exceeds the cap', async () => {
    const proc = child(
      `process.stdin.resume(); process.stdout.write('x'.repeat(200000)); setTimeout(() => {}, 60000)`,
    );
    const rpc = new JsonRpcClient(proc, { maxLineBytes: 64 * 1024 });
    const pending = rpc.request('anything', {});
    await assert.rejects(
      pending,
      (e) => e instanceof AgentError && e.kind === 'protocol-error' && /exceeds/.test(e.message),
    );
    const [, signal] = await new Promise<[number | null, string | null]>((r) =>
      proc.once('exit', (c, s) => r([c, s])),
    );
    assert.equal(signal, 'SIGKILL');
  });
});

describe('agent environment', () => {
  it('passes only PATH, HOME, CODEX_HOME, given variables and the test tag', () => {
    const env = agentEnvironment(
      { codexHome: '/agent', env: { KEY: 'v' } },
      { PATH: '/bin', HOME: '/root', SECRET_TOKEN: 'no', SVC_TEST_TAG: 'tag1' },
    );
    assert.deepEqual(env, {
      PATH: '/bin',
      HOME: '/root',
      RUST_LOG: 'warn',
      KEY: 'v',
      CODEX_HOME: '/agent',
      SVC_TEST_TAG: 'tag1',
    });
  });
});
