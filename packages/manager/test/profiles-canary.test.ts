import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import {
  canary,
  ensureTestTag,
  findCanaries,
  killTagged,
  waitForNoTaggedProcesses,
} from '@svc/testkit';
import type { ApiResponse } from './helpers.js';
import { startE2E, validateProfile, type E2E } from './e2e-helpers.js';

/**
 * A provider key planted through the profile API, used for real by a validation canary (the
 * provider receives it), must appear in no response, log line, event, stored row, Secret
 * label or annotation, or Secret metadata file, nor in any of its common encodings.
 */

const tag = ensureTestTag();
const apiKey = canary('provider-key');
const authJson = JSON.stringify({ OPENAI_API_KEY: apiKey, auth_mode: 'apikey' });
const BASE = '/api/v1/provider-profiles';
const responses: ApiResponse[] = [];
let e: E2E;

before(async () => {
  e = await startE2E({ env: { LOG_LEVEL: 'debug' } });
});
after(async () => {
  await e?.close();
  const left = await waitForNoTaggedProcesses(tag, 15_000);
  killTagged(tag);
  assert.deepEqual(left, [], 'no runner or agent process outlives the tests');
});

async function call(method: string, path: string, body?: unknown): Promise<ApiResponse> {
  const response = await e.t.api(method, path, body);
  responses.push(response);
  return response;
}

async function everyTable(): Promise<string> {
  const db = e.t.manager.store.db;
  const tables = await sql<{ table_name: string }>`
    SELECT table_name FROM information_schema.tables
    WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`.execute(db);
  assert.ok(tables.rows.some((r) => r.table_name === 'provider_profile_audit'));
  const dumps: string[] = [];
  for (const { table_name } of tables.rows) {
    const rows = await sql`SELECT * FROM ${sql.table(table_name)}`.execute(db);
    dumps.push(`${table_name}: ${JSON.stringify(rows.rows)}`);
  }
  return dumps.join('\n');
}

describe('provider key canary', () => {
  it('uses the key for real and never shows it or its auth.json anywhere else', async () => {
    const delegatedBy = { system: 'lab-backend', userId: 'u-1', username: 'ops', requestId: 'r-1' };
    const body = {
      apiKey,
      config: { model: 'canary-model', baseUrl: e.provider.baseUrl },
      delegatedBy,
      reason: `rotating to ${apiKey}`,
    };
    assert.equal((await call('PUT', `${BASE}/canary-dyn/credential`, body)).status, 201);
    // Resent, refused for a bad URL, refused for an unknown field: none may echo the key.
    assert.equal((await call('PUT', `${BASE}/canary-dyn/credential`, body)).status, 200);
    assert.equal(
      (
        await call('PUT', `${BASE}/canary-dyn/credential`, {
          ...body,
          config: { baseUrl: `https://x:${apiKey}@host/v1` },
        })
      ).status,
      400,
    );
    assert.equal(
      (await call('PUT', `${BASE}/canary-dyn/credential`, { ...body, extra: apiKey })).status,
      400,
    );
    await call('GET', BASE);
    await call('GET', `${BASE}/canary-dyn`);
    const config = await call('GET', `${BASE}/canary-dyn/config`);
    await call('PUT', `${BASE}/canary-dyn/config`, { configToml: config.body.configToml });

    // The model echoes the key: the event and the reply must carry it redacted.
    e.provider.enqueue({ kind: 'text', text: `ready ${apiKey}` });
    const { started, outcome } = await validateProfile(e.t, 'canary-dyn');
    assert.equal(outcome.status, 'completed', JSON.stringify(outcome));
    assert.equal(e.provider.requestsOf().at(-1)!.bearer, apiKey, 'the provider got the key');
    await call('GET', started.pollUrl);
    await call('GET', `/api/v1/runs/${started.runId}/events?limit=1000`);
    await call('GET', `/api/v1/runs/${started.runId}/result`);
    await call('GET', `/api/v1/runs/${started.runId}/runner-jobs`);
    await call('GET', `${BASE}/canary-dyn`);

    const jobs = responses.at(-2)!.body.runnerJobs as any[];
    const runnerLog = await readFile(jobs[0].logPath, 'utf8');
    const secretDir = join(e.t.dataDir, 'secrets');
    const metas = await Promise.all(
      (await readdir(secretDir)).map((name) =>
        readFile(join(secretDir, name, 'current', '..meta.json'), 'utf8').catch(() => ''),
      ),
    );
    assert.ok(
      metas.some((m) => m.includes('canary-dyn')),
      'the profile Secret metadata is read',
    );
    await call('DELETE', `${BASE}/canary-dyn`);
    const everything = [
      ...responses.map((r) => `${r.raw}\n${JSON.stringify(r.headers)}`),
      ...e.t.logs,
      runnerLog,
      await everyTable(),
      ...metas,
    ].join('\n');
    assert.deepEqual(findCanaries(everything, [apiKey, authJson]), []);
    assert.match(everything, /\[redacted\]/, 'the redacted places still say something was there');
    assert.ok(runnerLog.length > 0 && e.t.logs.length > 20, 'logs were captured');
  });

  it('keeps the key out of the Secret metadata while the profile exists', async () => {
    const res = await e.t.api('PUT', `${BASE}/canary-meta/credential`, {
      apiKey,
      config: { model: 'canary-model', baseUrl: e.provider.baseUrl },
      delegatedBy: { system: 'lab-backend', requestId: 'r-2' },
    });
    assert.equal(res.status, 201, res.raw);
    const meta = await readFile(
      join(e.t.dataDir, 'secrets', 'svc-v01-provider-canary-meta', 'current', '..meta.json'),
      'utf8',
    );
    const secret = (await e.t.manager.secrets.get('svc-v01-provider-canary-meta'))!;
    assert.equal(JSON.parse(secret.data['auth.json']!.toString()).OPENAI_API_KEY, apiKey);
    const labelsAndAnnotations = JSON.stringify([secret.labels, secret.annotations]);
    assert.deepEqual(findCanaries(`${meta}\n${labelsAndAnnotations}`, [apiKey, authJson]), []);
  });
});
