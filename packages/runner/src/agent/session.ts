import { Redactor, toError } from '@svc/contracts';
import { summarize } from './bounded.js';
import { isRolloutNotFound } from './classify.js';
import {
  CodexProcess,
  type CodexProcessOptions,
  type ExitInfo,
  type ShutdownOptions,
} from './codex-process.js';
import { AgentError, isAgentError } from './errors.js';
import type { AgentEvent } from './events.js';
import type { JsonRpcServerRequest } from './jsonrpc.js';
import {
  APPROVAL_REQUESTS,
  readThread,
  threadIdOf,
  type ApprovalPolicy,
  type SandboxMode,
  type ThreadInfo,
} from './protocol.js';
import { scrubDeep, scrubText } from './redact.js';
import { TurnRun, type TurnOptions } from './turn.js';

/**
 * The agent API a runner uses for one run: start or resume a thread, run turns on it (steer,
 * interrupt, idle budget, outcome), and stop the agent. One process serves one run; one turn
 * at a time per thread (a second `turn/start` would silently steer the first).
 */

export interface CodexAgentOptions extends CodexProcessOptions {
  /** Preloaded with the run's secret values; applied to every string that leaves. */
  redactor?: Redactor;
  /** Default turn options (idle budget, interrupt grace). */
  turnDefaults?: Pick<TurnOptions, 'idleTimeoutMs' | 'interruptGraceMs'>;
}

export interface StartThreadOptions {
  cwd: string;
  model?: string;
  approvalPolicy?: ApprovalPolicy;
  sandbox?: SandboxMode;
  developerInstructions?: string;
  baseInstructions?: string;
}

export interface ThreadResult {
  thread: ThreadInfo;
  resumed: boolean;
  /** `backend_status` event (`thread.started` / `thread.resumed`) for the caller to append. */
  event: AgentEvent;
}

export type TurnHandle = Pick<
  TurnRun,
  | 'threadId'
  | 'turnId'
  | 'outcome'
  | 'steer'
  | 'interrupt'
  | 'cancel'
  | 'lastActivityAt'
  | 'lastActivityKind'
>;

/** The activity kind recorded while the runner holds the agent's output. */
export const HELD_ACTIVITY = 'runner-backpressure';

export class CodexAgent {
  readonly process: CodexProcess;
  readonly redactor: Redactor;
  #turns = new Map<string, TurnRun>();
  #holding: NodeJS.Timeout | null = null;
  #defaults: CodexAgentOptions['turnDefaults'];

  private constructor(process: CodexProcess, options: CodexAgentOptions) {
    this.process = process;
    this.redactor = options.redactor ?? new Redactor();
    this.#defaults = options.turnDefaults;
    const rpc = process.rpc;
    rpc.onNotification(({ method, params }) => {
      const threadId = threadIdOf(params);
      if (threadId === null) {
        for (const turn of this.#turns.values()) turn.touch(method);
        return;
      }
      this.#turns.get(threadId)?.handle(method, params);
    });
    rpc.onServerRequest((request) => this.#answer(request));
    rpc.onClose((reason) => {
      if (this.#holding) clearInterval(this.#holding);
      this.#holding = null;
      const tail = scrubText(process.rpc.stderr.tail(1024), this.redactor);
      for (const turn of [...this.#turns.values()]) turn.agentClosed(reason, tail);
    });
  }

  /** Spawn the agent in the run's agent home and initialize it. */
  static async start(options: CodexAgentOptions): Promise<CodexAgent> {
    try {
      return new CodexAgent(await CodexProcess.start(options), options);
    } catch (error) {
      // Start-up failures quote the agent's stderr, which may echo configuration.
      if (!isAgentError(error) || !options.redactor) throw error;
      throw new AgentError(error.kind, scrubText(error.message, options.redactor), {
        cause: error,
      });
    }
  }

  /** When the agent last showed activity (any notification or request), epoch ms. */
  get lastActivityAt(): number {
    return this.process.lastActivityAt;
  }

  get lastActivityKind(): string {
    return this.process.lastActivityKind;
  }

  get running(): boolean {
    return this.process.running;
  }

  async startThread(options: StartThreadOptions): Promise<ThreadResult> {
    const result = await this.process.rpc.request('thread/start', {
      cwd: options.cwd,
      ...(options.model !== undefined && { model: options.model }),
      ...(options.approvalPolicy !== undefined && { approvalPolicy: options.approvalPolicy }),
      ...(options.sandbox !== undefined && { sandbox: options.sandbox }),
      ...(options.developerInstructions !== undefined && {
        developerInstructions: options.developerInstructions,
      }),
      ...(options.baseInstructions !== undefined && { baseInstructions: options.baseInstructions }),
    });
    const thread = readThread(result);
    if (!thread) throw new AgentError('protocol-error', 'thread/start returned no thread');
    return { thread, resumed: false, event: this.#threadEvent('thread.started', thread) };
  }

  /**
   * Resume a thread from its rollout (required after a restart). Fails with
   * `rollout-not-found` when the agent has no rollout for it, else `thread-resume-failed`;
   * never starts a new thread instead.
   */
  async resumeThread(
    threadId: string,
    overrides: Partial<Omit<StartThreadOptions, 'baseInstructions'>> = {},
  ): Promise<ThreadResult> {
    let result: unknown;
    try {
      result = await this.process.rpc.request('thread/resume', {
        threadId,
        excludeTurns: true,
        ...overrides,
      });
    } catch (error) {
      const message = scrubText(toError(error).message, this.redactor);
      const kind = isRolloutNotFound(message) ? 'rollout-not-found' : 'thread-resume-failed';
      throw new AgentError(kind, `thread/resume ${threadId}: ${summarize(message, 500)}`, {
        cause: error,
        ...(isAgentError(error) && error.rpcCode !== undefined && { rpcCode: error.rpcCode }),
      });
    }
    const thread = readThread(result);
    if (!thread) throw new AgentError('thread-resume-failed', 'thread/resume returned no thread');
    return { thread, resumed: true, event: this.#threadEvent('thread.resumed', thread) };
  }

  /**
   * Start a turn; resolves once the agent accepted it (the handle then knows its `turnId`).
   * Events flow to `options.onEvent` until the outcome settles.
   */
  async runTurn(threadId: string, text: string, options: TurnOptions = {}): Promise<TurnHandle> {
    return this.#begin(threadId, 'turn', text, options);
  }

  /** Compact the thread's history now (a compaction turn, with its own outcome). */
  async compactThread(threadId: string, options: TurnOptions = {}): Promise<TurnHandle> {
    return this.#begin(threadId, 'compact', '', options);
  }

  activeTurn(threadId: string): TurnHandle | undefined {
    return this.#turns.get(threadId);
  }

  /** Graceful stop (stdin end, SIGTERM, SIGKILL on timeouts). */
  shutdown(options?: ShutdownOptions): Promise<ExitInfo> {
    return this.process.shutdown(options);
  }

  /** SIGKILL the agent and every process it started. */
  killTree(): number[] {
    return this.process.killTree();
  }

  /**
   * Hold the agent's output (true) while the runner cannot pass it on (its event buffer is
   * full), release it (false). The agent then waits on its own writes; that wait is the
   * runner's, not the agent's idleness, so it counts as activity for the idle budget.
   */
  holdOutput(held: boolean): void {
    if (held === (this.#holding !== null)) return;
    this.process.rpc.pauseReading(held);
    if (!held) {
      clearInterval(this.#holding!);
      this.#holding = null;
      return;
    }
    const touch = () => {
      for (const turn of this.#turns.values()) turn.touch(HELD_ACTIVITY);
    };
    touch();
    this.#holding = setInterval(touch, 1000);
    this.#holding.unref();
  }

  async #begin(
    threadId: string,
    kind: 'turn' | 'compact',
    text: string,
    options: TurnOptions,
  ): Promise<TurnHandle> {
    if (this.#turns.has(threadId)) {
      throw new AgentError('turn-active', `a turn is already running on thread ${threadId}`);
    }
    const turn: TurnRun = new TurnRun(
      {
        rpc: this.process.rpc,
        threadId,
        redactor: this.redactor,
        killTree: () => this.killTree(),
        onSettled: () => {
          if (this.#turns.get(threadId) === turn) this.#turns.delete(threadId);
        },
      },
      { ...this.#defaults, ...options },
    );
    this.#turns.set(threadId, turn);
    await turn.begin(kind, text);
    return turn;
  }

  /** Headless: approvals are declined, anything else that needs a person is refused. */
  #answer(request: JsonRpcServerRequest): void {
    const turn = this.#turns.get(threadIdOf(request.params) ?? '');
    const decision = (APPROVAL_REQUESTS as Record<string, unknown>)[request.method];
    if (decision !== undefined) {
      this.process.rpc.respond(request.id, decision);
      turn?.serverRequest(request.method, request.params, true);
      return;
    }
    if (request.method === 'mcpServer/elicitation/request') {
      this.process.rpc.respond(request.id, { action: 'decline', content: null, _meta: null });
    } else {
      this.process.rpc.respondError(
        request.id,
        -32601,
        `${request.method} is not supported by this runner`,
      );
    }
    turn?.serverRequest(request.method, request.params, false);
  }

  #threadEvent(name: string, thread: ThreadInfo): AgentEvent {
    return {
      category: 'backend_status',
      name,
      data: scrubDeep(
        {
          threadId: thread.id,
          model: thread.model,
          modelProvider: thread.modelProvider,
          backendKind: 'codex-app-server',
          protocol: 'json-rpc-stdio',
          agentVersion: this.process.initializeResult?.userAgent ?? null,
        },
        this.redactor,
      ),
      observedAt: new Date().toISOString(),
    };
  }
}
