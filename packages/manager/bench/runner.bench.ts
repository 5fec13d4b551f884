/**
 * Runner benchmarks with the real runner and `codex app-server` against the loopback provider,
 * default manager and runner settings. On a warm runner (second and later turns of a run):
 * - dispatch latency: command created -> the provider receives the model request;
 * - completion latency: the provider's last byte -> the command terminal through the API;
 * and the runner's overhead over driving `codex app-server` directly on the same trivial turn.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CodexAgent, renderAuthJson, renderRunnerConfig } from '@svc/runner';
import { FakeProvider, testServerUrl } from '@svc/testkit';
import { runBody, startTestManager } from '../test/helpers.js';
import { configureProviderProfile } from '../test/e2e-helpers.js';

const TURNS = Number(process.env.BENCH_TURNS ?? 20);
const pct = (values: number[], p: number) =>
  [...values].sort((a, b) => a - b)[
    Math.min(values.length - 1, Math.floor((p / 100) * values.length))
  ] ?? 0;
const line = (label: string, values: number[], target = '') =>
  console.log(
    `${label.padEnd(56)} p50 ${pct(values, 50).toFixed(1).padStart(7)} ms  p90 ${pct(values, 90).toFixed(1).padStart(7)} ms  ${target}`,
  );

if (!(await testServerUrl())) {
  console.log('no PostgreSQL server reachable: set TEST_DATABASE_URL; benchmark skipped');
  process.exit(0);
}
const provider = await FakeProvider.start({ defaultText: 'ok' });
const t = await startTestManager({ listen: true, env: { LOG_LEVEL: 'warn' } });
const apiKey = 'sk-bench-provider-key-00000000000000';
await configureProviderProfile(t, 'builtin-a', provider.baseUrl, apiKey);

try {
  // Runner path: one run, its runner kept warm by a first turn.
  const run = (
    await t.api('POST', '/api/v1/runs', runBody({ executionPolicy: { timeoutMs: 60_000 } }))
  ).body;
  const first = (
    await t.api('POST', `/api/v1/runs/${run.runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'warm up' },
    })
  ).body;
  await t.api('POST', `/api/v1/runs/${run.runId}/runner-jobs`, { commandId: first.commandId });
  // As a client would: long-poll the command's result (answered by the commit that makes it
  // terminal), then read the command. Polling in a loop would load the manager under test.
  const terminal = async (commandId: string) => {
    let readable: number;
    for (;;) {
      const result = (
        await t.api('GET', `/api/v1/runs/${run.runId}/result?commandId=${commandId}&waitMs=30000`)
      ).body;
      readable = Date.now();
      if (result.terminalStatus !== null || result.status === 'expired') break;
    }
    const command = (await t.api('GET', `/api/v1/runs/${run.runId}/commands/${commandId}`)).body;
    return { ...command, readable };
  };
  await terminal(first.commandId);

  const dispatch: number[] = [];
  const agentTurn: number[] = [];
  const completion: number[] = [];
  const wall: number[] = [];
  for (let i = 0; i < TURNS; i++) {
    const n = provider.requestsOf().length + 1;
    const created = Date.now();
    const command = (
      await t.api('POST', `/api/v1/runs/${run.runId}/commands`, {
        type: 'turn',
        payload: { prompt: `turn ${i}` },
      })
    ).body;
    const request = await provider.waitForRequest(n, { timeoutMs: 30_000 });
    const done = await terminal(command.commandId);
    const readable = done.readable;
    if (done.state !== 'completed') throw new Error(`turn ${i} ended ${done.state}`);
    dispatch.push(request.receivedAt - created);
    completion.push(readable - (request.respondedAt ?? readable));
    wall.push(readable - created);
    const events = (
      await t.api(
        'GET',
        `/api/v1/runs/${run.runId}/events?afterSeq=${done.createdAt ? 0 : 0}&limit=1000`,
      )
    ).body.events;
    const completedEvent = events
      .filter((e: any) => e.commandId === command.commandId && e.name === 'turn.completed')
      .at(-1);
    agentTurn.push(completedEvent.data.durationMs);
  }

  // Direct path: the same trivial turn, driving the agent without runner or manager.
  const home = await mkdtemp(join(tmpdir(), 'svc-bench-home-'));
  const cwd = await mkdtemp(join(tmpdir(), 'svc-bench-ws-'));
  await writeFile(join(home, 'auth.json'), renderAuthJson(apiKey));
  await writeFile(
    join(home, 'config.toml'),
    renderRunnerConfig({
      model: 'test-model',
      provider: { id: 'svc', baseUrl: provider.baseUrl, auth: { openaiAuth: true } },
      trustedProjects: [cwd],
    }),
  );
  const agent = await CodexAgent.start({ codexHome: home, home, cwd });
  const { thread } = await agent.startThread({ cwd });
  const direct: number[] = [];
  const directDispatch: number[] = [];
  const directAgentTurn: number[] = [];
  for (let i = -1; i < TURNS; i++) {
    const n = provider.requestsOf().length + 1;
    const started = Date.now();
    const handle = await agent.runTurn(thread.id, `turn ${i}`);
    const outcome = await handle.outcome;
    if (outcome.status !== 'completed') throw new Error('direct turn failed');
    if (i >= 0) {
      direct.push(Date.now() - started);
      directDispatch.push(provider.requestsOf()[n - 1]!.receivedAt - started);
      directAgentTurn.push(outcome.durationMs);
    }
  }
  await agent.shutdown();
  await rm(home, { recursive: true, force: true });
  await rm(cwd, { recursive: true, force: true });

  console.log(`${TURNS} warm turns each; default settings; node ${process.version}`);
  line('command created -> provider receives the request', dispatch, 'target p50 <= 150 ms');
  line("provider's last byte -> terminal readable via the API", completion, 'target p50 <= 150 ms');
  line('agent turn (turn/start -> turn/completed) under the runner', agentTurn);
  line('the same turn driving codex app-server directly', directAgentTurn);
  const overhead = (pct(agentTurn, 50) - pct(directAgentTurn, 50)) / pct(directAgentTurn, 50);
  console.log(
    `${"runner's overhead on the agent's turn".padEnd(56)} ${(overhead * 100).toFixed(1).padStart(7)} %    target <= 10 %`,
  );
  line('whole turn via manager + runner (created -> terminal)', wall);
  line('whole turn driving the agent directly (start -> outcome)', direct);
  line('direct: turn/start -> provider receives the request', directDispatch);
} finally {
  await t.close();
  await provider.close();
}
