/**
 * Broker overhead per read: the same issue read through the broker and straight from the fake
 * code host, over loopback HTTP, interleaved so both see the same machine load. Prints p50 and
 * p99 of each and the added p50 (target: at most 2 ms).
 * Run: node scripts/bench.mjs auth-broker
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { destination } from 'pino';
import { loadConfig, startBroker } from '../src/index.js';
import { FakeGithub } from '../test/fake-github.js';

const WARMUP = 300;
const SAMPLES = Number(process.env['BENCH_SAMPLES'] ?? 3000);
const TARGET_ADDED_P50_MS = 2;
const REPO = 'acme/widgets';

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function main(): Promise<void> {
  const token = 'ghp_benchtoken0000000000000000000000';
  const fake = await FakeGithub.start({ token });
  fake.addRepo(REPO);
  fake.addIssue(REPO, { title: 'Crash on start', body: 'Steps to reproduce', labels: ['bug'] });
  const dir = await mkdtemp(join(tmpdir(), 'auth-broker-bench-'));
  await writeFile(join(dir, 'token'), token);
  const env = {
    AUTH_BROKER_PORT: '0',
    AUTH_BROKER_CODEHOST_CREDENTIAL_REF: `file:${join(dir, 'token')}`,
    AUTH_BROKER_ALLOWED_REPOS: REPO,
    AUTH_BROKER_AUDIT_LOG: join(dir, 'audit.jsonl'),
    AUTH_BROKER_CODEHOST_API_URL: fake.url,
  };
  // Production settings: info logging (to /dev/null here) and a file audit line per request.
  const broker = await startBroker(loadConfig(env), {
    env,
    logDestination: destination({ dest: '/dev/null', sync: false }),
  });

  const direct = async () => {
    const res = await fetch(`${fake.url}/repos/${REPO}/issues/1`, {
      headers: { authorization: `token ${token}`, accept: 'application/vnd.github+json' },
    });
    await res.json();
    if (res.status !== 200) throw new Error(`direct read failed: ${res.status}`);
  };
  const body = JSON.stringify({
    repo: REPO,
    operation: 'codehost.issue.read',
    params: { number: 1 },
  });
  const viaBroker = async () => {
    const res = await fetch(`${broker.url}/v1/codehost/cli`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    await res.json();
    if (res.status !== 200) throw new Error(`broker read failed: ${res.status}`);
  };

  const time = async (fn: () => Promise<void>) => {
    const start = performance.now();
    await fn();
    return performance.now() - start;
  };
  for (let i = 0; i < WARMUP; i++) {
    await direct();
    await viaBroker();
  }
  const directMs: number[] = [];
  const brokerMs: number[] = [];
  const started = performance.now();
  for (let i = 0; i < SAMPLES; i++) {
    directMs.push(await time(direct));
    brokerMs.push(await time(viaBroker));
  }
  const seconds = (performance.now() - started) / 1000;
  directMs.sort((a, b) => a - b);
  brokerMs.sort((a, b) => a - b);

  const row = (name: string, xs: number[]) =>
    `${name.padEnd(26)} p50 ${percentile(xs, 50).toFixed(3).padStart(7)} ms   p99 ${percentile(xs, 99).toFixed(3).padStart(7)} ms`;
  const added = percentile(brokerMs, 50) - percentile(directMs, 50);
  console.log(`issue read, ${SAMPLES} samples each, interleaved, ${seconds.toFixed(1)} s`);
  console.log(row('direct to code host', directMs));
  console.log(row('through the broker', brokerMs));
  console.log(
    `added p50: ${added.toFixed(3)} ms (target <= ${TARGET_ADDED_P50_MS} ms: ${added <= TARGET_ADDED_P50_MS ? 'met' : 'NOT met'})`,
  );
  console.log(`added p99: ${(percentile(brokerMs, 99) - percentile(directMs, 99)).toFixed(3)} ms`);

  await broker.close();
  await fake.close();
  await rm(dir, { recursive: true, force: true });
}

await main();
