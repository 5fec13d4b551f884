/**
 * Agent layer timings against the real agent binary and the loopback fake provider: spawn to
 * `initialize`, `thread/start`, a trivial turn (first and second on the thread) and shutdown,
 * driven through `CodexAgent` and through a bare JSON-RPC loop, median of several runs on a
 * warm agent home. Prints figures only; nothing is asserted.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { FakeProvider } from '@svc/testkit';
import { CodexAgent, renderRunnerConfig, resolveCodexBinary } from '../src/agent/index.js';

const RUNS = Number(process.env['AGENT_BENCH_RUNS'] ?? 6);
const KEY_VAR = 'SVC_PROVIDER_API_KEY';

type Sample = Record<'initialize' | 'threadStart' | 'turn1' | 'turn2' | 'shutdown', number>;

const provider = await FakeProvider.start();
const home = await mkdtemp(join(tmpdir(), 'svc-bench-home-'));
const userHome = await mkdtemp(join(tmpdir(), 'svc-bench-user-'));
const workspace = await mkdtemp(join(tmpdir(), 'svc-bench-ws-'));
await writeFile(
  join(home, 'config.toml'),
  renderRunnerConfig({
    model: 'gpt-test',
    provider: { baseUrl: provider.baseUrl, auth: { envKey: KEY_VAR } },
    sandboxMode: 'danger-full-access',
    trustedProjects: [workspace],
    requestMaxRetries: 0,
    streamMaxRetries: 0,
  }),
);
const env = { [KEY_VAR]: 'bench-key-0000' };

async function viaApi(): Promise<Sample> {
  let t = performance.now();
  const agent = await CodexAgent.start({ codexHome: home, home: userHome, env });
  const initialize = performance.now() - t;
  t = performance.now();
  const { thread } = await agent.startThread({ cwd: workspace });
  const threadStart = performance.now() - t;
  t = performance.now();
  await (
    await agent.runTurn(thread.id, 'hello')
  ).outcome;
  const turn1 = performance.now() - t;
  t = performance.now();
  await (
    await agent.runTurn(thread.id, 'again')
  ).outcome;
  const turn2 = performance.now() - t;
  t = performance.now();
  await agent.shutdown();
  return { initialize, threadStart, turn1, turn2, shutdown: performance.now() - t };
}

/** The same sequence over a bare line loop: the floor any client pays. */
async function viaRawJsonRpc(): Promise<Sample> {
  let t = performance.now();
  const child = spawn(resolveCodexBinary(), ['app-server'], {
    env: {
      PATH: process.env['PATH'] ?? '',
      HOME: userHome,
      CODEX_HOME: home,
      RUST_LOG: 'warn',
      ...env,
    },
    stdio: ['pipe', 'pipe', 'ignore'],
    detached: true,
  });
  const waiters = new Map<number, (m: any) => void>();
  let onNote: (m: any) => void = () => undefined;
  createInterface({ input: child.stdout }).on('line', (line) => {
    const m = JSON.parse(line);
    if (m.method === undefined) waiters.get(m.id)?.(m);
    else if (m.id === undefined) onNote(m);
  });
  let id = 0;
  const call = (method: string, params: unknown) =>
    new Promise<any>((resolve) => {
      waiters.set(++id, resolve);
      child.stdin.write(`${JSON.stringify({ id, method, params })}\n`);
    });
  const turn = (threadId: string, text: string) =>
    new Promise<void>((resolve) => {
      onNote = (m) => m.method === 'turn/completed' && resolve();
      void call('turn/start', { threadId, input: [{ type: 'text', text, text_elements: [] }] });
    });
  await call('initialize', {
    clientInfo: { name: 'bench', title: 'bench', version: '0' },
    capabilities: { experimentalApi: true },
  });
  child.stdin.write('{"method":"initialized"}\n');
  const initialize = performance.now() - t;
  t = performance.now();
  const threadId = (await call('thread/start', { cwd: workspace })).result.thread.id as string;
  const threadStart = performance.now() - t;
  t = performance.now();
  await turn(threadId, 'hello');
  const turn1 = performance.now() - t;
  t = performance.now();
  await turn(threadId, 'again');
  const turn2 = performance.now() - t;
  t = performance.now();
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.stdin.end();
  await exited;
  return { initialize, threadStart, turn1, turn2, shutdown: performance.now() - t };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

async function measure(name: string, run: () => Promise<Sample>): Promise<Record<string, string>> {
  await run(); // warm the agent home and the page cache
  const samples: Sample[] = [];
  for (let i = 0; i < RUNS; i++) samples.push(await run());
  const row: Record<string, string> = { client: name };
  for (const key of Object.keys(samples[0]!) as Array<keyof Sample>)
    row[key] = `${median(samples.map((s) => s[key])).toFixed(0)} ms`;
  return row;
}

const started = Date.now();
try {
  const rows = [await measure('CodexAgent', viaApi), await measure('raw JSON-RPC', viaRawJsonRpc)];
  console.log(`agent layer, median of ${RUNS} runs (warm agent home, loopback fake provider)`);
  console.table(rows);
  console.log(
    `model requests served: ${provider.requests.length}; total ${Date.now() - started} ms`,
  );
} finally {
  await provider.close();
  for (const dir of [home, userHome, workspace]) await rm(dir, { recursive: true, force: true });
}
