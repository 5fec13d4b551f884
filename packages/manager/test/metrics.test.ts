import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { runBody, startTestManager, TestRunner, type TestManager } from './helpers.js';

const KEY = 'metrics-test-key-0123456789';
let t: TestManager;
before(async () => {
  t = await startTestManager({
    env: { SVC_API_KEY: KEY, SVC_METRICS_COUNTS_MAX_AGE_MS: '0' },
  });
  await t.configureProfile('builtin-a');
});
after(() => t.close());

async function scrape(): Promise<string> {
  const response = await t.api('GET', '/metrics');
  assert.equal(response.status, 200, response.raw);
  assert.match(String(response.headers['content-type']), /^text\/plain/);
  return response.raw;
}

/** The value of one series; labels must match exactly those given. */
function value(text: string, name: string, labels: Record<string, string> = {}): number {
  const want = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort()
    .join(',');
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = (match[2] ?? '').split(',').filter(Boolean).sort().join(',');
    if (have === want) return Number(match[3]);
  }
  return 0;
}

/** Scrape until `check` passes: store counts refresh behind the scrape, never within it. */
async function eventually(check: (text: string) => boolean): Promise<string> {
  let text = '';
  for (let i = 0; i < 50; i++) {
    text = await scrape();
    if (check(text)) return text;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`metrics did not move:\n${text.slice(0, 3000)}`);
}

describe('/metrics', () => {
  it('is protected by the API key', async () => {
    const none = await t.api('GET', '/metrics', undefined, { authorization: '' });
    assert.equal(none.status, 401);
    assert.equal(none.body.failureKind, 'auth-failed');
    const wrong = await t.api('GET', '/metrics?x=1', undefined, { authorization: 'Bearer nope' });
    assert.equal(wrong.status, 401);
    assert.ok(!none.raw.includes('svc_runs'));
  });

  it('shows process, pool, HTTP and per-state series, and never the key', async () => {
    await t.api('GET', '/api/v1/runs/run-doesnotexist00');
    const text = await scrape();
    for (const name of [
      'process_cpu_user_seconds_total',
      'nodejs_heap_size_used_bytes',
      'svc_http_request_duration_seconds_bucket',
      'svc_runs',
      'svc_commands',
      'svc_runner_jobs',
      'svc_queue_tasks',
      'svc_open_long_polls',
      'svc_open_event_streams',
      'svc_events_appended_total',
      'svc_lease_claims_total',
      'svc_db_pool_connections',
    ])
      assert.match(text, new RegExp(`^${name}`, 'm'), name);
    // Route patterns, never raw URLs: one series per route, not per run.
    assert.ok(
      value(text, 'svc_http_request_duration_seconds_count', {
        method: 'GET',
        route: '/api/v1/runs/:runId',
        status_code: '404',
      }) >= 1,
    );
    assert.ok(!text.includes('run-doesnotexist00'));
    assert.ok(!text.includes(KEY));
    assert.ok(value(text, 'svc_db_pool_connections', { state: 'total' }) >= 1);
    assert.equal(value(text, 'svc_runner_jobs', { phase: 'succeeded' }), 0);
  });

  it('moves when runs, commands, events and leases do', async () => {
    const before = await eventually((text) => text.includes('svc_runs{state="pending"}'));
    const created = await t.api('POST', '/api/v1/runs', runBody());
    const runId = created.body.runId;
    const command = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'count me' },
    });
    assert.equal(command.status, 201, command.raw);
    const first = new TestRunner(t, 'rnr-metrics01', runId);
    assert.equal((await first.claim()).status, 200);
    const second = new TestRunner(t, 'rnr-metrics02', runId);
    assert.equal((await second.claim()).status, 409);
    // The first runner stops heartbeating: its lease expires and the second takes over.
    await sql`UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE run_id = ${runId}`.execute(
      t.manager.store.db,
    );
    assert.equal((await second.claim()).status, 200);
    const moved = await eventually(
      (text) =>
        value(text, 'svc_runs', { state: 'claimed' }) >
          value(before, 'svc_runs', { state: 'claimed' }) &&
        value(text, 'svc_commands', { state: 'accepted' }) >
          value(before, 'svc_commands', { state: 'accepted' }),
    );
    const delta = (name: string, labels: Record<string, string> = {}) =>
      value(moved, name, labels) - value(before, name, labels);
    assert.equal(delta('svc_runs_created_total'), 1);
    assert.equal(delta('svc_commands_created_total', { type: 'turn' }), 1);
    assert.equal(delta('svc_lease_claims_total', { outcome: 'granted' }), 2);
    assert.equal(delta('svc_lease_claims_total', { outcome: 'conflict' }), 1);
    assert.equal(delta('svc_lease_takeovers_total'), 1);
    assert.equal(delta('svc_lease_expiries_total'), 1);
    // claimed, claim-recovered and claimed again: manager events of the run's log.
    assert.ok(delta('svc_events_appended_total') >= 3);
  });

  it('counts open long-polls while they wait', async () => {
    const created = await t.api('POST', '/api/v1/runs', runBody());
    const waiting = t.api(
      'GET',
      `/api/v1/runs/${created.body.runId}/events?afterSeq=0&waitMs=1500`,
    );
    await eventually((text) => value(text, 'svc_open_long_polls', { kind: 'client' }) >= 1);
    await waiting;
    await eventually((text) => value(text, 'svc_open_long_polls', { kind: 'client' }) === 0);
  });
});
