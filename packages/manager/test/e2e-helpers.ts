import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach } from 'node:test';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import {
  ensureTestTag,
  FakeProvider,
  killTagged,
  processesWithTag,
  waitForNoTaggedProcesses,
} from '@svc/testkit';
import {
  createSession as createTestSession,
  runBody,
  SESSION_RUN_BASE,
  startTestManager,
  type TestManager,
  type TestManagerOptions,
} from './helpers.js';

/**
 * End-to-end rig: a listening manager whose local launcher starts real runner processes, which
 * drive the real `codex app-server` against a scripted loopback provider.
 */
export interface E2E {
  t: TestManager;
  provider: FakeProvider;
  providerKey: string;
  close(): Promise<void>;
}

export async function startE2E(
  options: TestManagerOptions & { profile?: string; providerKey?: string } = {},
): Promise<E2E> {
  const provider = await FakeProvider.start();
  const t = await startTestManager({
    ...options,
    listen: true,
    env: {
      SVC_RUNNER_IDLE_EXIT_MS: '3000',
      SVC_RUNNER_KILL_GRACE_MS: '1000',
      SVC_LEASE_TTL_MS: '6000',
      SVC_HEARTBEAT_INTERVAL_MS: '1000',
      ...options.env,
    },
  });
  const providerKey = options.providerKey ?? 'sk-test-e2e-provider-key-000000000000';
  await configureProviderProfile(t, options.profile ?? 'builtin-a', provider.baseUrl, providerKey);
  return {
    t,
    provider,
    providerKey,
    async close() {
      try {
        await t.close();
      } finally {
        await provider.close();
      }
    },
  };
}

/**
 * A provider profile pointing at a loopback provider. `noRetries`: the agent gives up on the
 * first failed request, so a provider error fails the turn at once (retry tests).
 */
export async function configureProviderProfile(
  t: TestManager,
  profile: string,
  baseUrl: string,
  apiKey: string,
  options: { noRetries?: boolean } = {},
): Promise<void> {
  await t.manager.secrets.put(`svc-v01-provider-${profile}`, {
    'auth.json': Buffer.from(JSON.stringify({ OPENAI_API_KEY: apiKey, auth_mode: 'apikey' })),
    'config.toml': Buffer.from(
      [
        'model = "test-model"',
        'model_provider = "svc"',
        '',
        '[model_providers.svc]',
        'name = "svc"',
        `base_url = "${baseUrl}"`,
        'wire_api = "responses"',
        'requires_openai_auth = true',
        ...(options.noRetries ? ['request_max_retries = 0', 'stream_max_retries = 0'] : []),
        '',
      ].join('\n'),
    ),
  });
}

/**
 * Register the standard rig for a test file: one E2E per file, and a leak guard afterwards
 * (no runner, agent or shell process of this file may outlive it).
 */
export function useE2E(options: Parameters<typeof startE2E>[0] = {}): { readonly e: E2E } {
  const tag = ensureTestTag();
  const holder: { e?: E2E } = {};
  before(async () => {
    holder.e = await startE2E(options);
  });
  after(async () => {
    await holder.e?.close();
    const left = await waitForNoTaggedProcesses(tag, 10_000);
    killTagged(tag);
    assert.deepEqual(left, [], 'no runner, agent or shell process outlives the tests');
  });
  return {
    get e(): E2E {
      if (!holder.e) throw new Error('the e2e rig is not started yet');
      return holder.e;
    },
  };
}

/**
 * Make each test of a file start alone: the provider forgets the steps an earlier test left
 * unused, and after each test every run it left open is cancelled and its runner and agent
 * are waited out. Otherwise an earlier test's idle runner (alive for its idle exit) holds an
 * agent that shares the provider's script and the machine with the next test.
 */
export function isolateTests(rig: { readonly e: E2E }): void {
  const tag = ensureTestTag();
  beforeEach(() => {
    rig.e.provider.dropSteps();
  });
  afterEach(async () => {
    const open = await rig.e.t.api('GET', '/api/v1/runs?state=pending,claimed,running&limit=200');
    assert.equal(open.status, 200, open.raw);
    for (const run of open.body.runs as { runId: string }[])
      await rig.e.t.api('POST', `/api/v1/runs/${run.runId}/cancel`, { reason: 'test ended' });
    rig.e.provider.release();
    const left = await waitForNoTaggedProcesses(tag, 30_000);
    assert.deepEqual(left, [], 'every runner and agent of the test has exited');
  });
}

/** Create a run, a turn command and a runner job; returns their ids. */
export async function dispatch(
  e: E2E,
  prompt: string,
  runOverrides: Record<string, unknown> = {},
  jobOverrides: Record<string, unknown> = {},
  payloadExtra: Record<string, unknown> = {},
) {
  const run = await e.t.api(
    'POST',
    '/api/v1/runs',
    runBody({ executionPolicy: { timeoutMs: 60_000 }, ...runOverrides }),
  );
  assert.equal(run.status, 201, run.raw);
  const command = await e.t.api('POST', `/api/v1/runs/${run.body.runId}/commands`, {
    type: 'turn',
    payload: { prompt, ...payloadExtra },
  });
  assert.equal(command.status, 201, command.raw);
  const job = await e.t.api('POST', `/api/v1/runs/${run.body.runId}/runner-jobs`, {
    commandId: command.body.commandId,
    ...jobOverrides,
  });
  assert.equal(job.status, 201, job.raw);
  return {
    runId: run.body.runId as string,
    commandId: command.body.commandId as string,
    job: job.body,
  };
}

/** Poll a command until it is terminal (as a dispatcher would). */
export async function waitForCommand(
  t: TestManager,
  runId: string,
  commandId: string,
  timeoutMs = 60_000,
): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const command = await t.api('GET', `/api/v1/runs/${runId}/commands/${commandId}`);
    if (['completed', 'failed', 'blocked', 'cancelled', 'expired'].includes(command.body.state))
      return command.body;
    if (Date.now() > deadline)
      throw new Error(`command ${commandId} still ${command.body.state} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A JSON file a job writes, once it is there whole: null while it is missing or still being
 * written (a reader can catch a plain write half done), for `waitFor` to try again.
 */
export async function jsonFileOnceWhole(path: string): Promise<any> {
  try {
    return JSON.parse(await readFile(path, 'utf8'));
  } catch {
    return null;
  }
}

export async function waitFor<T>(
  what: string,
  probe: () => T | null | undefined | false | Promise<T | null | undefined | false>,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Events of a run (first 1000). */
export async function runEvents(t: TestManager, runId: string): Promise<any[]> {
  return (await t.api('GET', `/api/v1/runs/${runId}/events?limit=1000`)).body.events;
}

/** Add a turn to an existing run (served by its runner while it polls). */
export async function addTurn(t: TestManager, runId: string, prompt: string): Promise<string> {
  const command = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
    type: 'turn',
    payload: { prompt },
  });
  assert.equal(command.status, 201, command.raw);
  return command.body.commandId as string;
}

/**
 * The host pid of a job's agent (`codex app-server`, its CODEX_HOME in the job's directory).
 * The pid in `backend.initialized` is the runner's view: inside a sandbox's own PID namespace
 * it names another process, or none, on the host.
 */
export function agentPidOf(jobName: string): number | null {
  const tag = ensureTestTag();
  for (const p of processesWithTag(tag)) {
    if (!p.command.includes('app-server')) continue;
    try {
      const env = readFileSync(`/proc/${p.pid}/environ`, 'latin1').split('\0');
      if (env.some((v) => v.startsWith('CODEX_HOME=') && v.includes(`/${jobName}/`))) return p.pid;
    } catch {
      // gone meanwhile
    }
  }
  return null;
}

/** SIGKILL a process group, ignoring one that is already gone. */
export function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

/** Send to a session; the answer names the decision, the run and the command. */
export async function sendToSession(
  t: TestManager,
  sessionId: string,
  body: Record<string, unknown>,
): Promise<any> {
  return (await t.api('POST', `/api/v1/sessions/${sessionId}/send`, body)).body;
}

/** A session on the e2e profile (opaque workspace, a 60 s turn timeout). */
export function createSession(t: TestManager, extra: Record<string, unknown> = {}): Promise<any> {
  return createTestSession(t, {
    runBase: { ...SESSION_RUN_BASE, executionPolicy: { timeoutMs: 60_000 } },
    ...extra,
  });
}

/** Write a profile's key and provider through the profile API, as the business backend does. */
export async function putProfileCredential(
  t: TestManager,
  profile: string,
  apiKey: string,
  config: { model?: string; baseUrl?: string },
  extra: Record<string, unknown> = {},
): Promise<any> {
  const res = await t.api('PUT', `/api/v1/provider-profiles/${profile}/credential`, {
    apiKey,
    config,
    delegatedBy: { system: 'e2e-backend', requestId: `req-${profile}` },
    ...extra,
  });
  assert.ok(res.status === 200 || res.status === 201, res.raw);
  return res.body;
}

/** Start a provider validation and poll it until it is no longer running. */
export async function validateProfile(
  t: TestManager,
  profile: string,
  timeoutMs = 90_000,
): Promise<{ started: any; outcome: any }> {
  const started = await t.api('POST', `/api/v1/provider-profiles/${profile}/validate`);
  assert.equal(started.status, 202, started.raw);
  const outcome = await waitFor(
    `validation of ${profile}`,
    async () => {
      const v = await t.api('GET', started.body.pollUrl);
      return v.body.status !== 'running' ? v.body : null;
    },
    timeoutMs,
  );
  return { started: started.body, outcome };
}
