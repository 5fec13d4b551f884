import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { after, before, describe, it } from 'node:test';
import { runBody, startTestManager, TestRunner, type TestManager } from './helpers.js';

/**
 * Refused credential writes register nothing: thousands of them (a careless client retrying,
 * or someone trying to make the masker shred ordinary words) leave the mask set, the memory and
 * the cost of an append as they were, and later requests unaffected.
 */

const BASE = '/api/v1/provider-profiles';
const delegatedBy = { system: 'lab-backend', requestId: 'poison-1' };
let t: TestManager;

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
function heapUsed(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

before(async () => {
  t = await startTestManager();
  const ok = await t.api('PUT', `${BASE}/builtin-a/credential`, {
    apiKey: `sk-${randomBytes(24).toString('hex')}`,
    config: { model: 'm', baseUrl: 'https://provider.example/v1' },
    delegatedBy,
  });
  assert.equal(ok.status, 201, ok.raw);
});
after(() => t?.close());

async function appendTimes(runner: TestRunner, commandId: string, n: number, tag: string) {
  const times: number[] = [];
  const text = `output line with ordinary words tenant-a proj-1 true 12345678 `.repeat(200);
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    const res = await runner.append([
      { key: `${tag}-${i}`, commandId, category: 'command_output', data: { text } },
    ]);
    times.push(performance.now() - started);
    assert.ok(res.status < 300, res.raw);
  }
  return times.sort((a, b) => a - b)[Math.floor(n / 2)]!;
}

describe('refused credential writes', () => {
  it('leave the mask set, memory and append latency unchanged', async () => {
    const run = await t.api('POST', '/api/v1/runs', runBody());
    assert.equal(run.status, 201, run.raw);
    const runId = run.body.runId as string;
    const cmd = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'hello' },
    });
    const commandId = cmd.body.commandId as string;
    const runner = new TestRunner(t, 'rnr-poison01', runId);
    await runner.claim();
    await runner.ack(commandId);

    const size = t.manager.redactor.size;
    const forms = t.manager.redactor.formCount;
    await appendTimes(runner, commandId, 10, 'warm');
    const before = await appendTimes(runner, commandId, 30, 'before');
    const heapBefore = heapUsed();

    const refusals = [
      (apiKey: string) => ({ apiKey, config: { baseUrl: 'not a url' }, delegatedBy }),
      (apiKey: string) => ({ apiKey, config: { baseUrl: 'ftp://x.example/v1' }, delegatedBy }),
      (apiKey: string) => ({ apiKey, delegatedBy, secretRef: { name: 'other-secret' } }),
      (apiKey: string) => ({ apiKey, config: { model: 'm', baseUrl: 'https://p.example' } }),
      (apiKey: string) => ({ apiKey, delegatedBy, unknownField: true }),
    ];
    const profiles = ['builtin-a', 'builtin-b', 'runtime-default', 'Bad_Slug', 'dyn-x'];
    for (let i = 0; i < 3000; i++) {
      const apiKey = i % 10 === 0 ? 'tenant-a' : `sk-poison-${randomBytes(16).toString('hex')}`;
      const body = refusals[i % refusals.length]!(apiKey);
      const profile = profiles[i % profiles.length]!;
      const res = await t.api('PUT', `${BASE}/${profile}/credential`, body);
      assert.ok(res.status >= 400 && res.status < 500, `${profile} ${res.status} ${res.raw}`);
    }
    // A write that succeeds with a value that is no secret registers nothing either.
    for (const apiKey of ['tenant-a', 'builtin-a', '1234567890', 'postgres', 'aaaaaaaaaaaa']) {
      const res = await t.api('PUT', `${BASE}/dyn-common/credential`, {
        apiKey,
        config: { model: 'm', baseUrl: 'https://provider.example/v1' },
        delegatedBy,
      });
      assert.ok(res.status === 200 || res.status === 201, res.raw);
    }

    assert.equal(t.manager.redactor.size, size, 'no value registered');
    assert.equal(t.manager.redactor.formCount, forms);
    const heapGrowth = heapUsed() - heapBefore;
    assert.ok(heapGrowth < 16 * 1024 * 1024, `heap grew by ${heapGrowth} bytes`);
    const afterAppend = await appendTimes(runner, commandId, 30, 'after');
    assert.ok(
      afterAppend < before * 3 + 20,
      `append p50 ${afterAppend.toFixed(1)} ms after, ${before.toFixed(1)} ms before`,
    );

    // Later requests are unaffected: ordinary words arrive and are stored as sent.
    const later = await t.api(
      'POST',
      '/api/v1/runs',
      runBody({ metadata: { note: 'tenant-a proj-1 true 1234567890' } }),
    );
    assert.equal(later.status, 201, later.raw);
    assert.equal(later.body.tenantId, 'tenant-a');
    const shown = await t.api('GET', `/api/v1/runs/${later.body.runId as string}`);
    assert.equal(shown.body.metadata.note, 'tenant-a proj-1 true 1234567890');
    const events = await t.api('GET', `/api/v1/runs/${runId}/events?limit=5`);
    assert.doesNotMatch(events.raw, /\[redacted\]/);
  });
});
