import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { canary, createTestStore, type TestStore } from '@svc/testkit';
import {
  managerTemplate,
  runBody,
  startTestManager,
  TestRunner,
  type ApiResponse,
  type TestManager,
} from './helpers.js';
import { leaksIn, pastedForms, pgDump } from './leak-forms.js';

/**
 * A provider key written through the API and a tool credential planted in its Secret are masked
 * by a manager that has just started and never read either Secret: pasted back in plain and
 * encoded forms into prompts, metadata, names, event payloads and tool arguments, they show up
 * in no response, log line or row of the database.
 */

const providerKey = `sk-proj-${canary('restart')}`;
const toolToken = canary('tool-token');
const secrets = [providerKey, toolToken];
let store: TestStore;
let dataDir: string;
let first: TestManager;
let t: TestManager;
const responses: ApiResponse[] = [];

async function call(method: string, url: string, body?: unknown): Promise<ApiResponse> {
  const response = await t.api(method, url, body);
  responses.push(response);
  return response;
}

/** One text holding every planted form of every secret. */
function pasted(label: string): string {
  return secrets
    .flatMap((value) =>
      Object.entries(pastedForms(value)).map(([f, text]) => `${label}/${f}: ${text}`),
    )
    .join('\n');
}

before(async () => {
  store = await createTestStore(managerTemplate);
  dataDir = await mkdtemp(join(tmpdir(), 'svc-masking-'));
  const env = { LOG_LEVEL: 'debug' };
  first = await startTestManager({ store, dataDir, env });
  const written = await first.api('PUT', '/api/v1/provider-profiles/builtin-a/credential', {
    apiKey: providerKey,
    config: { model: 'gpt-test', baseUrl: 'https://provider.example/v1' },
    delegatedBy: { system: 'lab-backend', requestId: 'setup-1' },
  });
  assert.equal(written.status, 201, written.raw);
  await first.manager.secrets.put('svc-v01-tool-lab', { token: Buffer.from(toolToken) });
  await first.close();
  t = await startTestManager({ store, dataDir, env });
});
after(async () => {
  await t?.close();
  await store?.drop();
  await rm(dataDir, { recursive: true, force: true });
});

describe('masking after a restart', () => {
  it('masks a key written before the restart in every form, everywhere', async () => {
    assert.ok(t.manager.redactor.size >= 2, 'the Secrets were loaded at start');
    const run = await call(
      'POST',
      '/api/v1/runs',
      runBody({ metadata: { note: pasted('metadata'), [providerKey]: 'as a key' } }),
    );
    assert.equal(run.status, 201, run.raw);
    const runId = run.body.runId as string;
    const cmd = await call('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'turn',
      payload: { prompt: pasted('prompt'), conversation: { title: providerKey } },
    });
    assert.equal(cmd.status, 201, cmd.raw);
    const commandId = cmd.body.commandId as string;

    const runner = new TestRunner(t, 'rnr-masking01', runId);
    responses.push(await runner.claim(), await runner.poll(), await runner.ack(commandId));
    const appended = await runner.append([
      {
        key: 'tool-1',
        commandId,
        category: 'tool_call',
        data: {
          itemId: 'i1',
          status: 'completed',
          toolName: `lab-${toolToken}`,
          arguments: { command: `curl -H 'x-key: ${providerKey}'`, env: pasted('tool-args') },
        },
      },
      { key: 'out-1', commandId, category: 'command_output', data: { text: pasted('output') } },
      {
        key: 'msg-1',
        commandId,
        category: 'assistant_message',
        data: { text: pasted('reply'), final: true, replyAuthority: true },
      },
    ]);
    responses.push(appended);
    assert.ok(appended.status < 300, appended.raw);
    responses.push(await runner.finish(commandId, 'completed'));

    const task = await call('POST', '/api/v1/queue/tasks', {
      tenantId: 'tenant-a',
      projectId: 'proj-1',
      queue: 'main',
      title: `title ${providerKey}`,
      summary: pasted('summary').slice(0, 1000),
      payload: { prompt: pasted('task-prompt') },
      metadata: { names: [toolToken, Buffer.from(toolToken).toString('base64')] },
    });
    assert.equal(task.status, 201, task.raw);

    await call('GET', `/api/v1/runs/${runId}`);
    await call('GET', `/api/v1/runs/${runId}/events?limit=1000`);
    await call('GET', `/api/v1/runs/${runId}/result`);
    await call('GET', `/api/v1/runs/${runId}/commands/${commandId}`);
    await call('GET', `/api/v1/queue/tasks/${task.body.taskId as string}`);
    await call('GET', '/api/v1/provider-profiles/builtin-a');
    await call('GET', '/health');

    const dump = store.kind === 'postgres' ? await pgDump(store.url) : '';
    if (store.kind === 'postgres') assert.match(dump, /COPY public\.events/);
    const everything = [
      ...responses.map((r) => `${r.raw}\n${JSON.stringify(r.headers)}`),
      ...first.logs,
      ...t.logs,
      dump,
    ].join('\n');
    assert.deepEqual(leaksIn(everything, secrets), []);
    // Masked, not dropped: the places that held the values say so.
    const events = responses.find((r) => r.raw.includes('"tool_call"'))?.raw ?? '';
    assert.match(events, /lab-\[redacted\]/);
    assert.match(everything, /prompt\/base64@2: [A-Za-z0-9+/]*\[redacted\]/);
  });
});
