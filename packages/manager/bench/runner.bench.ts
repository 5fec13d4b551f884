/**
 * Runner benchmarks with the real runner and `codex app-server` against the loopback provider,
 * default manager and runner settings. On a warm runner (second and later turns of a run):
 * - dispatch latency: command created -> the provider receives the model request;
 * - completion latency: the provider's last byte -> the command terminal through the API;
 * the runner's overhead over driving `codex app-server` directly on the same trivial turn; and
 * the cost of the local runner sandbox: the same turns, alternating, on runners in their
 * bubblewrap sandboxes and on runners with isolation off, plus the cold start of each.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { CodexAgent, renderAuthJson, renderRunnerConfig } from '@svc/runner';
import { FakeProvider, testServerUrl } from '@svc/testkit';
import { runBody, startTestManager, type TestManager } from '../test/helpers.js';
import { configureProviderProfile } from '../test/e2e-helpers.js';

const TURNS = Number(process.env.BENCH_TURNS ?? 20);
/** Warm runners per side (each gives one cold-start sample and TURNS warm turns). */
const RUNNERS = Number(process.env.BENCH_RUNNERS ?? 2);
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
const apiKey = 'sk-bench-provider-key-00000000000000';
// Two managers in this process: runners in their bubblewrap sandboxes, and runners without.
const sandboxed = await startTestManager({ listen: true, env: { LOG_LEVEL: 'warn' } });
const plain = await startTestManager({
  listen: true,
  env: { LOG_LEVEL: 'warn', SVC_LOCAL_ISOLATION: 'off' },
});
for (const t of [sandboxed, plain])
  await configureProviderProfile(t, 'builtin-a', provider.baseUrl, apiKey);

interface Samples {
  start: number[];
  dispatch: number[];
  agentTurn: number[];
  completion: number[];
  wall: number[];
}

/** One run on `t`, its runner started and kept warm by a first turn; `turn()` measures one more. */
async function warmRun(t: TestManager, samples: Samples) {
  const run = (
    await t.api('POST', '/api/v1/runs', runBody({ executionPolicy: { timeoutMs: 60_000 } }))
  ).body;
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
  const first = (
    await t.api('POST', `/api/v1/runs/${run.runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'warm up' },
    })
  ).body;
  const n = provider.requestsOf().length + 1;
  const created = Date.now();
  await t.api('POST', `/api/v1/runs/${run.runId}/runner-jobs`, { commandId: first.commandId });
  // Cold start: runner Job created -> the agent's first model request (runner, agent, thread).
  samples.start.push(
    (await provider.waitForRequest(n, { timeoutMs: 60_000 })).receivedAt - created,
  );
  await terminal(first.commandId);
  return async (i: number) => {
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
    samples.dispatch.push(request.receivedAt - created);
    samples.completion.push(readable - (request.respondedAt ?? readable));
    samples.wall.push(readable - created);
    const events = (await t.api('GET', `/api/v1/runs/${run.runId}/events?limit=1000`)).body.events;
    const completedEvent = events
      .filter((e: any) => e.commandId === command.commandId && e.name === 'turn.completed')
      .at(-1);
    samples.agentTurn.push(completedEvent.data.durationMs);
  };
}

const empty = (): Samples => ({ start: [], dispatch: [], agentTurn: [], completion: [], wall: [] });
const inSandbox = empty();
const noSandbox = empty();
const loadBefore = loadavg();
try {
  const isolation = (await sandboxed.api('GET', '/health')).body.extra.isolation;
  if (!isolation.available) throw new Error(`no sandbox on this host: ${isolation.reason}`);
  // Turns alternate between the two runners, so both see the same machine.
  const turns: Array<(i: number) => Promise<void>> = [];
  for (let r = 0; r < RUNNERS; r++) {
    turns.push(await warmRun(sandboxed, inSandbox), await warmRun(plain, noSandbox));
  }
  for (let i = 0; i < TURNS; i++) {
    const order = i % 2 ? [...turns].reverse() : turns;
    for (const turn of order) await turn(i);
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

  const agentTurn = inSandbox.agentTurn;
  console.log(
    `${TURNS * RUNNERS} warm turns each way, alternating; default settings; node ${process.version}; load average ${loadBefore.map((l) => l.toFixed(2)).join(' ')} before, ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} after`,
  );
  line(
    'command created -> provider receives the request',
    inSandbox.dispatch,
    'target p50 <= 150 ms',
  );
  line(
    "provider's last byte -> terminal readable via the API",
    inSandbox.completion,
    'target p50 <= 150 ms',
  );
  line('agent turn (turn/start -> turn/completed) under the runner', agentTurn);
  line('the same turn driving codex app-server directly', directAgentTurn);
  const overhead = (pct(agentTurn, 50) - pct(directAgentTurn, 50)) / pct(directAgentTurn, 50);
  console.log(
    `${"runner's overhead on the agent's turn".padEnd(56)} ${(overhead * 100).toFixed(1).padStart(7)} %    target <= 10 %`,
  );
  line('whole turn via manager + runner (created -> terminal)', inSandbox.wall);
  line('whole turn driving the agent directly (start -> outcome)', direct);
  line('direct: turn/start -> provider receives the request', directDispatch);
  console.log('runner in its bubblewrap sandbox against the same runner unsandboxed:');
  line('  whole turn, sandboxed', inSandbox.wall);
  line('  whole turn, isolation off', noSandbox.wall);
  line('  agent turn, sandboxed', inSandbox.agentTurn);
  line('  agent turn, isolation off', noSandbox.agentTurn);
  const sandboxCost = (pct(inSandbox.wall, 50) - pct(noSandbox.wall, 50)) / pct(noSandbox.wall, 50);
  console.log(
    `${"  the sandbox's cost on a whole turn".padEnd(56)} ${(sandboxCost * 100).toFixed(1).padStart(7)} %    target <= 10 %`,
  );
  line('  runner Job created -> first model request, sandboxed', inSandbox.start);
  line('  runner Job created -> first model request, isolation off', noSandbox.start);
} finally {
  await sandboxed.close();
  await plain.close();
  await provider.close();
}
