import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import type { FakeKube } from '@svc/testkit';
import { canary, findCanaries, type KubeRequest } from '@svc/testkit';
import {
  runBody,
  startTestManager,
  TestRunner,
  type ApiResponse,
  type TestManager,
} from './helpers.js';
import { eventually, startFakeKube } from './kube-helpers.js';

const NS = 'svc-v01';
const apiKey = canary('apikey');
const providerKey = canary('provider');
const toolToken = canary('tool');
const labKey = canary('lab');
const labUrl = `https://lab.example/${canary('url')}`;
const echoed = canary('echoed');
let fake: FakeKube;
/** A manager on the fake Kubernetes API: its launcher and its Secret store. */
const kubeEnv = () => ({
  SVC_API_KEY: apiKey,
  LOG_LEVEL: 'debug',
  SVC_LAUNCHER: 'kubernetes',
  SVC_SECRET_STORE: 'kubernetes',
  SVC_KUBE_API_URL: fake.url,
  SVC_MANAGER_PUBLIC_URL: 'http://svc-run-manager.svc-v01.svc:8080',
  SVC_KUBE_POLL_INTERVAL_MS: '100',
});
let t: TestManager;
const responses: ApiResponse[] = [];

before(async () => {
  fake = await startFakeKube();
  t = await startTestManager({
    env: kubeEnv(),
  });
  await t.manager.secrets.put('svc-v01-provider-builtin-a', {
    'auth.json': Buffer.from(JSON.stringify({ OPENAI_API_KEY: providerKey })),
    'config.toml': Buffer.from('model = "m"\n'),
  });
  await t.manager.secrets.put('svc-v01-tool-codehost', { token: Buffer.from(toolToken) });
});
after(async () => {
  await t.close();
  await fake.close();
});

async function call(method: string, path: string, body?: unknown) {
  const response = await t.api(method, path, body);
  responses.push(response);
  return response;
}

/**
 * What the fake received, minus the one place values belong: the `data` of a Secret write
 * (the per-job Secret, and the store's own profile and tool Secrets).
 */
function requestsWithoutSecretData(requests: readonly KubeRequest[]): string {
  return JSON.stringify(
    requests.map((r) => {
      const body = r.body as Record<string, unknown> | null;
      const isSecretWrite = r.path.includes('/secrets') && ['POST', 'PUT'].includes(r.method);
      if (!isSecretWrite || !body) return [r.method, r.path, r.query, body];
      const { data: _data, ...rest } = body;
      return [r.method, r.path, r.query, rest];
    }),
  );
}

describe('secret canaries on the Kubernetes launcher', () => {
  it('transientEnv values, the manager token and Secret contents appear nowhere but Secret data', async () => {
    const run = await call(
      'POST',
      '/api/v1/runs',
      runBody({
        executionPolicy: {
          secretScope: {
            providerCredentials: [{ profile: 'builtin-a' }],
            toolCredentials: [
              {
                tool: 'codehost',
                purpose: 'pull-request',
                secretRef: { name: 'svc-v01-tool-codehost', keys: ['token'] },
                projection: { kind: 'env', envName: 'GH_TOKEN' },
              },
            ],
          },
        },
      }),
    );
    assert.equal(run.status, 201, run.raw);
    const runId = run.body.runId as string;
    const command = await call('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'work' },
    });
    const transientEnv = [
      { name: 'LAB_API_KEY', value: labKey },
      { name: 'LAB_RUNTIME_API_URL', value: labUrl },
    ];
    const body = { commandId: command.body.commandId, transientEnv };
    const dry = await call('POST', `/api/v1/runs/${runId}/runner-jobs`, { ...body, dryRun: true });
    assert.equal(dry.status, 200, dry.raw);
    const created = await call('POST', `/api/v1/runs/${runId}/runner-jobs`, body);
    assert.equal(created.status, 201, created.raw);
    const jobName = created.body.jobName as string;
    fake.setJobState(NS, jobName, 'failed', { exitCode: 2 });
    await eventually(async () => {
      const job = await call(
        'GET',
        `/api/v1/runs/${runId}/runner-jobs/${created.body.runnerJobId}`,
      );
      return job.body.phase === 'failed' ? true : undefined;
    });
    await call('GET', `/api/v1/runs/${runId}/runner-jobs`);
    await call('GET', `/api/v1/runs/${runId}`);
    await call('GET', `/api/v1/runs/${runId}/events?limit=1000`);
    await call('GET', `/api/v1/runs/${runId}/result`);
    await call('GET', '/api/v1/provider-profiles/builtin-a');
    await call('GET', '/health/readiness');

    // The values did reach the runner: inside the per-job Secret, and nowhere else.
    const jobSecret = fake.get('secrets', NS, `${jobName}-env`);
    const decoded = Object.values(jobSecret?.data ?? {})
      .map((v) => Buffer.from(v, 'base64').toString())
      .join('\n');
    assert.ok(decoded.includes(labKey) && decoded.includes(labUrl));
    // The runner's credential is its own run-scoped token; the API key never leaves the manager.
    assert.ok(!decoded.includes(apiKey));
    const runnerToken = /svcr_[A-Za-z0-9_-]+/.exec(decoded)?.[0];
    assert.ok(runnerToken, 'the per-job Secret carries a runner token');

    const db = t.manager.store.db;
    const rows = async (table: string) =>
      JSON.stringify((await sql`SELECT * FROM ${sql.table(table)}`.execute(db)).rows);
    const everything = [
      ...responses.map((r) => `${r.raw}\n${JSON.stringify(r.headers)}`),
      ...t.logs,
      await rows('runner_jobs'),
      await rows('runs'),
      await rows('commands'),
      await rows('events'),
      JSON.stringify(fake.list('jobs', NS)),
      JSON.stringify(fake.list('pods', NS)),
      requestsWithoutSecretData(fake.requests),
    ].join('\n');
    assert.deepEqual(
      findCanaries(everything, [apiKey, providerKey, toolToken, labKey, labUrl, runnerToken]),
      [],
    );
    assert.ok(t.logs.length > 5, 'logs were captured');
  });

  it('masks transientEnv values a runner echoes, and again after a manager restart', async () => {
    const run = await t.api('POST', '/api/v1/runs', runBody());
    const runId = run.body.runId as string;
    const command = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'print your environment' },
    });
    const commandId = command.body.commandId as string;
    const created = await t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, {
      commandId,
      transientEnv: [{ name: 'LAB_SESSION_SECRET', value: echoed }],
    });
    assert.equal(created.status, 201, created.raw);
    const runner = new TestRunner(t, created.body.runnerId as string, runId);
    assert.equal((await runner.claim()).status, 200);
    await runner.ack(commandId);
    // What an agent printing its environment would send, in the forms a value travels in.
    const leak = (key: string) => ({
      key,
      commandId,
      category: 'command_output',
      data: {
        text: `LAB_SESSION_SECRET=${echoed} b64=${Buffer.from(echoed).toString('base64')}`,
      },
    });
    assert.equal((await runner.append([leak('before-restart')])).status, 200);

    // The next job given the same value (a task's next attempt) is sent it intact.
    const next = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'again' },
    });
    const second = await t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, {
      commandId: next.body.commandId,
      transientEnv: [{ name: 'LAB_SESSION_SECRET', value: echoed }],
    });
    assert.equal(second.status, 201, second.raw);
    const secret = fake.get('secrets', NS, `${second.body.jobName as string}-env`);
    const sent = Buffer.from(secret?.data?.['transient-env.json'] ?? '', 'base64').toString();
    assert.deepEqual(JSON.parse(sent), [{ name: 'LAB_SESSION_SECRET', value: echoed }]);

    // A second manager process on the same database: it has never seen the value written.
    const restarted = await startTestManager({
      store: t.store,
      env: kubeEnv(),
    });
    try {
      const again = new TestRunner(restarted, runner.runnerId, runId);
      again.leaseToken = runner.leaseToken;
      const appended = await again.append([leak('after-restart')]);
      assert.equal(appended.status, 200, appended.raw);
      const events = await restarted.api('GET', `/api/v1/runs/${runId}/events?limit=100`);
      const texts = (events.body.events as Array<{ data: { text?: string } }>)
        .map((e) => e.data.text ?? '')
        .filter((text) => text.startsWith('LAB_SESSION_SECRET='));
      assert.equal(texts.length, 2, events.raw);
      for (const text of texts)
        assert.match(text, /^LAB_SESSION_SECRET=\[redacted\] b64=\[redacted\]/);
      const db = restarted.manager.store.db;
      const stored = JSON.stringify((await sql`SELECT * FROM events`.execute(db)).rows);
      assert.deepEqual(
        findCanaries([events.raw, stored, ...t.logs, ...restarted.logs].join('\n'), [echoed]),
        [],
      );
    } finally {
      await restarted.close();
    }
  });
});
