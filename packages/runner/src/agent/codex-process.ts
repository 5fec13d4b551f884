import { spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import { delimiter } from 'node:path';
import { resolveCodexBinary } from './codex-binary.js';
import { AgentError } from './errors.js';
import { JsonRpcClient, type AgentChild } from './jsonrpc.js';
import { descendantsOf, killProcessTree } from './process-tree.js';
import { readInitialize, type ClientInfo, type InitializeResult } from './protocol.js';
import { provideSandboxHelper } from './sandbox-helper.js';

/**
 * One `codex app-server` process: spawned directly from the platform binary in its own
 * process group, with a controlled environment, and initialized. It owns the JSON-RPC
 * connection and the activity clock (any notification or server request is activity).
 */

export interface CodexProcessOptions {
  /** The agent home (CODEX_HOME); must exist and hold config.toml. */
  codexHome: string;
  /** Absolute path of the agent binary (default: resolved from `@openai/codex`). */
  binaryPath?: string;
  /**
   * Extra environment for the agent, e.g. the provider key named by `env_key`. Nothing else
   * of this process's environment leaks in, apart from PATH, HOME and SVC_TEST_TAG.
   */
  env?: Readonly<Record<string, string>>;
  /** PATH for the agent (default: this process's PATH). */
  path?: string;
  /** HOME for the agent (default: this process's HOME, else the agent home). */
  home?: string;
  /** Working directory of the process (default: the agent home). */
  cwd?: string;
  clientInfo?: ClientInfo;
  /** Notification methods the agent should not send at all. */
  optOutNotificationMethods?: readonly string[];
  requestTimeoutMs?: number;
  initializeTimeoutMs?: number;
  maxLineBytes?: number;
  stderrBytes?: number;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface ShutdownOptions {
  /** Wait after closing stdin before SIGTERM (default 3 s). */
  graceMs?: number;
  /** Wait after SIGTERM before SIGKILL of the tree (default 2 s). */
  termMs?: number;
}

/** Tests tag every process they start; the leak guard finds descendants by it. */
const TEST_TAG_ENV = 'SVC_TEST_TAG';

export const DEFAULT_CLIENT_INFO: ClientInfo = {
  name: 'svc_runner',
  title: 'Agent run service runner',
  version: '0.1.0',
};

export class CodexProcess {
  readonly rpc: JsonRpcClient;
  readonly pid: number;
  readonly exited: Promise<ExitInfo>;
  /** Milliseconds from spawn to the `initialize` reply. */
  initializeMs = 0;
  initializeResult: InitializeResult | null = null;
  lastActivityAt: number;
  lastActivityKind = 'spawn';
  #child: AgentChild;
  #exit: ExitInfo | null = null;

  private constructor(child: AgentChild, options: CodexProcessOptions) {
    this.#child = child;
    if (child.pid === undefined) throw new AgentError('spawn-failed', 'agent did not start');
    this.pid = child.pid;
    this.lastActivityAt = Date.now();
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.#exit = { code, signal };
        resolve(this.#exit);
      });
      child.once('error', () => {
        this.#exit ??= { code: null, signal: null };
        resolve(this.#exit);
      });
    });
    this.rpc = new JsonRpcClient(child, {
      ...(options.maxLineBytes !== undefined && { maxLineBytes: options.maxLineBytes }),
      ...(options.requestTimeoutMs !== undefined && { requestTimeoutMs: options.requestTimeoutMs }),
      ...(options.stderrBytes !== undefined && { stderrBytes: options.stderrBytes }),
      onFatal: () => this.killTree(),
    });
    this.rpc.onNotification((n) => this.#touch(n.method));
    this.rpc.onServerRequest((r) => this.#touch(r.method));
  }

  /** Spawn and initialize. Fails with `spawn-failed`/`setup-failed`, or the agent's error. */
  static async start(options: CodexProcessOptions): Promise<CodexProcess> {
    requireDirectory(options.codexHome, 'agent home (CODEX_HOME)');
    const binary = resolveCodexBinary(options.binaryPath);
    const env = agentEnvironment(options);
    // The agent's sandbox helper must be reachable by name (see sandbox-helper.ts).
    if (process.platform === 'linux') {
      const helperDir = await provideSandboxHelper(options.codexHome, binary);
      env['PATH'] = `${helperDir}${delimiter}${env['PATH']}`;
    }
    const startedAt = performance.now();
    const child = spawn(binary, ['app-server'], {
      cwd: options.cwd ?? options.codexHome,
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
      // Own process group: the whole tree can be signalled at once.
      detached: true,
    });
    const agent = new CodexProcess(child, options);
    try {
      const result = await agent.rpc.request(
        'initialize',
        {
          clientInfo: options.clientInfo ?? DEFAULT_CLIENT_INFO,
          capabilities: {
            experimentalApi: true,
            ...(options.optOutNotificationMethods && {
              optOutNotificationMethods: [...options.optOutNotificationMethods],
            }),
          },
        },
        { timeoutMs: options.initializeTimeoutMs ?? 30_000 },
      );
      agent.initializeMs = performance.now() - startedAt;
      agent.initializeResult = readInitialize(result);
      agent.rpc.notify('initialized');
      return agent;
    } catch (error) {
      agent.killTree();
      await agent.exited;
      const stderr = agent.rpc.stderr.tail(2048).trim();
      throw new AgentError(
        'spawn-failed',
        `agent failed to initialize: ${(error as Error).message}${stderr ? `; stderr tail: ${stderr}` : ''}`,
        { cause: error },
      );
    }
  }

  get running(): boolean {
    return this.#exit === null;
  }

  get exitInfo(): ExitInfo | null {
    return this.#exit;
  }

  /**
   * Stop gracefully: close stdin (the agent ends its sessions and exits), then SIGTERM the
   * group, then SIGKILL the whole tree, each after its timeout.
   */
  async shutdown(options: ShutdownOptions = {}): Promise<ExitInfo> {
    if (this.#exit) return this.#exit;
    // The agent ends the commands it tracks, but not every helper it started (the login
    // shell that snapshots the environment, and what that shell runs). They are in their own
    // sessions and would be re-parented to init once the agent is gone: note them now, while
    // they are still its descendants, and end the survivors afterwards.
    const tree = descendantsOf(this.pid);
    this.#child.stdin.end();
    if (!(await this.#exitsWithin(options.graceMs ?? 3000))) {
      signalGroup(this.pid, 'SIGTERM');
      if (!(await this.#exitsWithin(options.termMs ?? 2000))) this.killTree();
    }
    const exit = await this.exited;
    for (const pid of tree) if (isAlive(pid)) killProcessTree(pid, { group: false });
    return exit;
  }

  /** SIGKILL the agent, its group and every descendant (cancel, wedged agent). */
  killTree(): number[] {
    if (this.#exit) return [];
    return killProcessTree(this.pid);
  }

  #touch(kind: string): void {
    this.lastActivityAt = Date.now();
    this.lastActivityKind = kind;
  }

  async #exitsWithin(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    });
    const exited = await Promise.race([this.exited.then(() => true as const), timeout]);
    clearTimeout(timer);
    return exited;
  }
}

function signalGroup(pid: number, sig: NodeJS.Signals): void {
  signalPid(-pid, sig);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function signalPid(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

function requireDirectory(path: string, what: string): void {
  let isDirectory = false;
  try {
    isDirectory = statSync(path).isDirectory();
  } catch {
    // reported below
  }
  if (!isDirectory) throw new AgentError('setup-failed', `${what} does not exist: ${path}`);
}

/** The agent's whole environment: nothing is inherited implicitly. */
export function agentEnvironment(
  options: Pick<CodexProcessOptions, 'codexHome' | 'env' | 'path' | 'home'>,
  parent: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const env: Record<string, string> = {
    PATH: options.path ?? parent['PATH'] ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: options.home ?? parent['HOME'] ?? options.codexHome,
    // Warnings and errors only: stderr is a bounded diagnostic ring, not a log stream.
    RUST_LOG: 'warn',
    ...options.env,
    CODEX_HOME: options.codexHome,
  };
  // The test leak guard finds descendants by this variable.
  const tag = parent[TEST_TAG_ENV];
  if (tag) env[TEST_TAG_ENV] = tag;
  return env;
}
