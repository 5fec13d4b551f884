import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redactor } from '@svc/contracts';
import {
  FakeProvider,
  canary,
  ensureTestTag,
  killTagged,
  waitForNoTaggedProcesses,
  type FakeProviderOptions,
} from '@svc/testkit';
import {
  CodexAgent,
  renderRunnerConfig,
  type AgentEvent,
  type CodexAgentOptions,
  type RunnerConfigOptions,
} from '../src/agent/index.js';

/**
 * One agent home, one workspace and one fake provider per test: the real agent binary talks
 * to the fake over loopback. Config keeps the agent fast and offline: no plugins, analytics or
 * update checks, no retries, the workspace pre-trusted.
 */

export const KEY_VAR = 'SVC_PROVIDER_API_KEY';

export interface AgentFixture {
  provider: FakeProvider;
  home: string;
  workspace: string;
  /** HOME of the agent and its shells (empty: no shell profile runs). */
  userHome: string;
  apiKey: string;
  redactor: Redactor;
  agents: CodexAgent[];
  start(options?: Partial<CodexAgentOptions>): Promise<CodexAgent>;
  cleanup(): Promise<void>;
}

export async function agentFixture(
  options: {
    config?: Partial<Omit<RunnerConfigOptions, 'provider'>>;
    /** Provider display name ("OpenAI" switches the agent to remote compaction). */
    providerName?: string;
    provider?: FakeProviderOptions;
  } = {},
): Promise<AgentFixture> {
  const provider = await FakeProvider.start(options.provider);
  const home = await mkdtemp(join(tmpdir(), 'svc-agent-home-'));
  const workspace = await mkdtemp(join(tmpdir(), 'svc-agent-ws-'));
  // A clean HOME: the agent's login shells must not run this machine's shell profile.
  const userHome = await mkdtemp(join(tmpdir(), 'svc-agent-user-'));
  const apiKey = canary('provider-key');
  const redactor = new Redactor().add(apiKey);
  const removeAll = async () => {
    await provider.close();
    await rm(home, { recursive: true, force: true });
    await rm(workspace, { recursive: true, force: true });
    await rm(userHome, { recursive: true, force: true });
  };
  try {
    await writeFile(
      join(home, 'config.toml'),
      renderRunnerConfig({
        model: 'gpt-test',
        provider: {
          baseUrl: provider.baseUrl,
          auth: { envKey: KEY_VAR },
          ...(options.providerName !== undefined && { name: options.providerName }),
        },
        sandboxMode: 'danger-full-access',
        trustedProjects: [workspace],
        requestMaxRetries: 0,
        streamMaxRetries: 0,
        streamIdleTimeoutMs: 20_000,
        ...options.config,
      }),
    );
  } catch (error) {
    await removeAll();
    throw error;
  }
  const agents: CodexAgent[] = [];
  return {
    provider,
    home,
    workspace,
    userHome,
    apiKey,
    redactor,
    agents,
    async start(extra = {}) {
      const agent = await CodexAgent.start({
        codexHome: home,
        home: userHome,
        env: { [KEY_VAR]: apiKey },
        redactor,
        ...extra,
      });
      agents.push(agent);
      return agent;
    },
    async cleanup() {
      await Promise.all(agents.map((a) => a.shutdown({ graceMs: 2000, termMs: 1000 })));
      await removeAll();
    },
  };
}

/** Collects a turn's events. */
export function recorder(): { events: AgentEvent[]; onEvent: (e: AgentEvent) => void } {
  const events: AgentEvent[] = [];
  return { events, onEvent: (e) => events.push(e) };
}

export function named(events: AgentEvent[], name: string): AgentEvent[] {
  return events.filter((e) => e.name === name);
}

/** Per test file: every process the file started must be gone when it ends. */
export function leakGuard(): { tag: string; check(): Promise<void> } {
  const tag = ensureTestTag();
  return {
    tag,
    async check() {
      const left = await waitForNoTaggedProcesses(tag, 5000);
      killTagged(tag);
      assert.deepEqual(left, [], `processes left behind: ${JSON.stringify(left)}`);
    },
  };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export async function waitUntil(
  predicate: () => boolean,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}
