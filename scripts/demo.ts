/**
 * `npm run demo`: one task end to end on this machine. Starts a scripted model provider on
 * loopback, the run manager (embedded store in a temporary directory, local launcher), points
 * the built-in profile at the provider through the provider-profile API, then dispatches a run
 * and prints the agent's reply as a dispatcher would read it.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiClient } from '@svc/contracts';
import { loadConfig, startManager } from '@svc/manager';
import { FakeProvider } from '@svc/testkit';

const say = (text: string) => process.stdout.write(`${text}\n`);
const dataDir = await mkdtemp(join(tmpdir(), 'svc-demo-'));
const provider = await FakeProvider.start({
  defaultText: 'Hello! I am the coding agent, reached through the run manager and a runner.',
});
const manager = await startManager(
  loadConfig({ ...process.env, SVC_DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'warn' }),
);
const base = manager.url;

const api = new ApiClient({ baseUrl: base });
const call = (method: string, path: string, body?: unknown): Promise<any> =>
  api.request(method, path, body);

try {
  say(
    `run manager on ${base} (embedded store in ${dataDir}); scripted provider on ${provider.baseUrl}`,
  );
  await call('PUT', '/api/v1/provider-profiles/builtin-a/credential', {
    apiKey: 'sk-demo-key-not-a-real-secret',
    config: { model: 'demo-model', baseUrl: provider.baseUrl },
    delegatedBy: { system: 'demo', requestId: 'demo-1' },
  });
  say('profile builtin-a configured');
  const run = await call('POST', '/api/v1/runs', {
    tenantId: 'tenant-a',
    projectId: 'demo',
    workspaceRef: { kind: 'opaque' },
    providerId: 'demo',
    backendProfile: 'builtin-a',
    traceSink: null,
  });
  const command = await call('POST', `/api/v1/runs/${run.runId}/commands`, {
    type: 'turn',
    payload: { prompt: 'Say hello.' },
  });
  const job = await call('POST', `/api/v1/runs/${run.runId}/runner-jobs`, {
    commandId: command.commandId,
  });
  say(
    `run ${run.runId}, command ${command.commandId}, runner job ${job.jobName} (log ${job.logPath})`,
  );
  const started = Date.now();
  for (;;) {
    const state = (await call('GET', `/api/v1/runs/${run.runId}/commands/${command.commandId}`))
      .state as string;
    if (['completed', 'failed', 'blocked', 'cancelled', 'expired'].includes(state)) break;
    if (Date.now() - started > 120_000) throw new Error('the turn did not finish within 2 minutes');
    await new Promise((r) => setTimeout(r, 100));
  }
  const result = await call(
    'GET',
    `/api/v1/runs/${run.runId}/commands/${command.commandId}/result`,
  );
  say(
    `status ${result.status} (completed=${result.completed}, ${result.finalResponseAuthority}) after ${Date.now() - started} ms`,
  );
  say(`reply: ${result.reply ?? '(none)'}`);
  if (!result.completed) process.exitCode = 1;
} finally {
  await manager.close();
  await provider.close();
  await rm(dataDir, { recursive: true, force: true });
}
