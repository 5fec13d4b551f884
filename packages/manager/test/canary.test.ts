import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { canary, createTestStore, findCanaries, type TestStore } from '@svc/testkit';
import {
  managerTemplate,
  runBody,
  startTestManager,
  TestRunner,
  type TestManager,
  type ApiResponse,
} from './helpers.js';

const apiKey = canary('apikey');
const dbPassword = canary('dbpw');
let store: TestStore;
let t: TestManager;
const responses: ApiResponse[] = [];

before(async () => {
  store = await createTestStore(managerTemplate);
  const env: Record<string, string> = { SVC_API_KEY: apiKey, LOG_LEVEL: 'debug' };
  if (store.kind === 'postgres') {
    // Trust authentication accepts any password, so the canary rides in a working URL.
    const url = new URL(store.url);
    url.password = dbPassword;
    env.DATABASE_URL = url.toString();
  }
  t = await startTestManager({ store, env });
  await t.configureProfile('builtin-a');
});
after(async () => {
  await t.close();
  await store.drop();
});

async function call(
  method: string,
  path: string,
  body?: unknown,
  headers?: Record<string, string>,
) {
  const response = await t.api(method, path, body, headers);
  responses.push(response);
  return response;
}

describe('secret canaries', () => {
  it('never shows the API key or the store password in a response, event, log line or stored row', async () => {
    const run = await call(
      'POST',
      '/api/v1/runs',
      runBody({ metadata: { note: `pasted ${apiKey}` } }),
    );
    const runId = run.body.runId;
    const cmd = await call('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'turn',
      payload: { prompt: `use key ${apiKey} and ${Buffer.from(apiKey).toString('base64')}` },
    });
    const runner = new TestRunner(t, 'rnr-canary01', runId);
    responses.push(await runner.claim(), await runner.poll(), await runner.ack(cmd.body.commandId));
    responses.push(
      await runner.append([
        {
          key: 'leak1',
          commandId: cmd.body.commandId,
          category: 'command_output',
          data: { text: `env: SVC_API_KEY=${apiKey} DATABASE_URL=postgres://u:${dbPassword}@h/db` },
        },
        {
          key: 'leak2',
          commandId: cmd.body.commandId,
          category: 'assistant_message',
          data: {
            text: `the key is ${encodeURIComponent(apiKey)}`,
            final: true,
            replyAuthority: true,
          },
        },
      ]),
    );
    responses.push(
      await runner.finish(cmd.body.commandId, 'failed', {
        failureKind: 'backend-failed',
        message: `crashed near ${apiKey}`,
      }),
    );
    await call('GET', `/api/v1/runs/${runId}/events?limit=1000`);
    await call('GET', `/api/v1/runs/${runId}/result`);
    await call('GET', `/api/v1/runs/${runId}/commands/${cmd.body.commandId}`);
    await call('GET', '/health');
    await call('GET', '/health/readiness');
    await call('GET', '/api/v1/backends');
    await call('GET', '/api/v1/runs/run-000000000000', undefined, {
      authorization: `Bearer ${apiKey}x`,
    });
    await call('POST', '/api/v1/runs', { ...runBody(), tenantId: apiKey });

    const everything = [
      ...responses.map((r) => `${r.raw}\n${JSON.stringify(r.headers)}`),
      ...t.logs,
      JSON.stringify((await sql`SELECT * FROM runs`.execute(t.manager.store.db)).rows),
      JSON.stringify((await sql`SELECT * FROM commands`.execute(t.manager.store.db)).rows),
      JSON.stringify((await sql`SELECT * FROM events`.execute(t.manager.store.db)).rows),
      JSON.stringify((await sql`SELECT * FROM runners`.execute(t.manager.store.db)).rows),
    ].join('\n');
    assert.deepEqual(findCanaries(everything, [apiKey, dbPassword]), []);
    // The redacted output still says something was there.
    assert.match(everything, /\[redacted\]/);
    assert.ok(t.logs.length > 10, 'logs were captured');
  });
});
