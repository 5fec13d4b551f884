import { EVENT_NAMES, toError, type Redactor } from '@svc/contracts';
import { summarize } from './bounded.js';
import { classifyAgentError, localFailure, type AgentFailure } from './classify.js';
import type { AgentError } from './errors.js';
import { MESSAGE_CHARS, TurnEventMapper, type AgentEvent } from './events.js';
import type { JsonRpcClient } from './jsonrpc.js';
import { N, readTurn, textInput, turnIdOf, type TurnInfo, type TurnStatus } from './protocol.js';
import { scrubText } from './redact.js';

/**
 * One turn on a thread: routes its notifications through the event mapper, answers steer and
 * interrupt, watches the idle budget, and settles exactly one outcome. A turn is `completed`
 * only when the agent's `turn/completed` says so; an exit, a timeout or partial output never
 * completes it.
 */

export interface TurnHandlers {
  /** Normalized, bounded, scrubbed events, in order. */
  onEvent?: (event: AgentEvent) => void;
  /** Every raw notification routed to this turn (diagnostics; unbounded, unscrubbed). */
  onNotification?: (method: string, params: unknown) => void;
}

export interface TurnOptions extends TurnHandlers {
  /** Interrupt the turn when no notification arrives for this long (0: no watchdog). */
  idleTimeoutMs?: number;
  /** After an interrupt, how long to wait for `turn/completed` before settling anyway. */
  interruptGraceMs?: number;
  /** Stamped on every event. */
  commandId?: string;
}

export interface TurnOutcome {
  status: 'completed' | 'failed' | 'cancelled';
  threadId: string;
  turnId: string | null;
  /** What `turn/completed` said; null when it never came (exit, grace expired). */
  agentStatus: TurnStatus | null;
  failure: AgentFailure | null;
  /** The authoritative reply: the last agent message, only when the turn completed. */
  finalMessage: { itemId: string; text: string } | null;
  /** The last completed agent message whatever the status (a fallback, never authoritative). */
  lastMessage: { itemId: string; text: string } | null;
  durationMs: number;
}

export interface SteerResult {
  /** The steer request was sent to the agent. */
  forwarded: boolean;
  /** The agent accepted it into the active turn. */
  accepted: boolean;
  turnId: string | null;
  error: string | null;
}

export interface TurnContext {
  rpc: JsonRpcClient;
  threadId: string;
  redactor: Redactor;
  /** SIGKILL the agent tree (cancel that must not wait). */
  killTree: () => void;
  /** Called once the outcome is settled (the agent unregisters the turn). */
  onSettled: () => void;
}

export class TurnRun {
  readonly threadId: string;
  readonly outcome: Promise<TurnOutcome>;
  turnId: string | null = null;
  lastActivityAt = Date.now();
  lastActivityKind = 'turn/start';
  #ctx: TurnContext;
  #options: TurnOptions;
  #mapper: TurnEventMapper;
  #resolve!: (outcome: TurnOutcome) => void;
  #settled = false;
  #buffered: Array<[string, unknown]> = [];
  #startedAt = Date.now();
  #cancelRequested = false;
  #idleTripped = false;
  #idleTimer: NodeJS.Timeout | undefined;
  #graceTimer: NodeJS.Timeout | undefined;

  constructor(ctx: TurnContext, options: TurnOptions) {
    this.#ctx = ctx;
    this.#options = options;
    this.threadId = ctx.threadId;
    this.#mapper = new TurnEventMapper(ctx.threadId, {
      redactor: ctx.redactor,
      ...(options.commandId !== undefined && { commandId: options.commandId }),
    });
    this.outcome = new Promise((resolve) => (this.#resolve = resolve));
    this.#armIdle();
  }

  get settled(): boolean {
    return this.#settled;
  }

  /** Start it: `turn/start` (a new turn) or `thread/compact/start` (a compaction turn). */
  async begin(kind: 'turn' | 'compact', text: string): Promise<void> {
    try {
      if (kind === 'turn') {
        const result = await this.#ctx.rpc.request('turn/start', {
          threadId: this.threadId,
          input: textInput(text),
        });
        const turn = readTurn(result);
        if (turn) this.#learnTurnId(turn.id);
      } else {
        // The reply is empty: the compaction turn is known by its `turn/started`.
        await this.#ctx.rpc.request('thread/compact/start', { threadId: this.threadId });
      }
    } catch (error) {
      this.#stopTimers();
      this.#settled = true;
      this.#ctx.onSettled();
      throw error;
    }
  }

  /** A notification for this thread. */
  handle(method: string, params: unknown): void {
    if (this.#settled) return;
    this.touch(method);
    if (this.turnId === null) {
      // Until the turn id is known, keep what arrives (a compaction turn learns it here).
      this.#buffered.push([method, params]);
      const started = method === N.turnStarted ? readTurn(params) : null;
      if (started) this.#learnTurnId(started.id);
      return;
    }
    const turnId = turnIdOf(params);
    if (turnId !== null && turnId !== this.turnId) return; // an earlier turn's stragglers
    this.#options.onNotification?.(method, params);
    if (method === N.turnCompleted) {
      const turn = readTurn(params);
      if (turn) this.#completed(turn);
      return;
    }
    this.#emit(this.#mapper.onNotification(method, params));
  }

  /** Activity that belongs to no thread (still proof the agent is working). */
  touch(kind: string): void {
    this.lastActivityAt = Date.now();
    this.lastActivityKind = kind;
  }

  /** An approval was declined (or another server request refused) for this turn. */
  serverRequest(method: string, params: unknown, declined: boolean): void {
    if (this.#settled) return;
    this.touch(method);
    this.#emit(this.#mapper.onServerRequest(method, params, declined));
  }

  async steer(text: string): Promise<SteerResult> {
    const refused = (error: string): SteerResult => ({
      forwarded: false,
      accepted: false,
      turnId: this.turnId,
      error,
    });
    if (this.#settled) return refused('the turn has already ended');
    if (this.turnId === null) return refused('the turn has not started yet');
    if (this.#ctx.rpc.closed) return refused('the agent is not running');
    this.touch('turn/steer');
    try {
      const result = (await this.#ctx.rpc.request('turn/steer', {
        threadId: this.threadId,
        expectedTurnId: this.turnId,
        input: textInput(text),
      })) as { turnId?: unknown } | null;
      return {
        forwarded: true,
        accepted: true,
        turnId: typeof result?.turnId === 'string' ? result.turnId : this.turnId,
        error: null,
      };
    } catch (error) {
      return {
        forwarded: true,
        accepted: false,
        turnId: this.turnId,
        error: summarize(scrubText(toError(error).message, this.#ctx.redactor), MESSAGE_CHARS),
      };
    }
  }

  /**
   * Ask the agent to stop the turn; its outcome becomes `cancelled` (unless it completed
   * first). A running shell command survives an interrupt: use `cancel` to end it too.
   */
  async interrupt(): Promise<void> {
    this.#cancelRequested = true;
    await this.#sendInterrupt();
  }

  /**
   * Interrupt, wait up to `graceMs` for the turn to end, then (per `kill`) SIGKILL the agent
   * tree: `always` also ends commands the interrupt left running; `if-unresponsive` only
   * when the turn did not end in time.
   */
  async cancel(
    options: { graceMs?: number; kill?: 'never' | 'if-unresponsive' | 'always' } = {},
  ): Promise<TurnOutcome> {
    await this.interrupt();
    const ended = await settledWithin(this.outcome, options.graceMs ?? 3000);
    const kill = options.kill ?? 'if-unresponsive';
    if (kill === 'always' || (kill === 'if-unresponsive' && !ended)) this.#ctx.killTree();
    return this.outcome;
  }

  /** The agent went away: settle without `turn/completed`. */
  agentClosed(reason: AgentError, diagnostics: string): void {
    if (this.#settled) return;
    if (this.#cancelRequested || this.#idleTripped) return this.#settleLocal(null);
    const failure = localFailure('backend-failed', 'agent-exited', reason.message);
    this.#emit([
      this.#mapper.failureEvent(EVENT_NAMES.transportClosed, failure, {
        ...(diagnostics && { stderrTail: summarize(diagnostics, MESSAGE_CHARS) }),
      }),
    ]);
    this.#settle(null, failure, null);
  }

  #learnTurnId(id: string): void {
    if (this.turnId !== null) return;
    this.turnId = id;
    this.#mapper.turnId = id;
    const buffered = this.#buffered;
    this.#buffered = [];
    for (const [method, params] of buffered) this.handle(method, params);
    if (this.#cancelRequested) void this.#sendInterrupt();
  }

  async #sendInterrupt(): Promise<void> {
    if (this.#settled || this.turnId === null || this.#ctx.rpc.closed) return;
    try {
      await this.#ctx.rpc.request('turn/interrupt', {
        threadId: this.threadId,
        turnId: this.turnId,
      });
    } catch {
      // "no active turn to interrupt": it ended meanwhile and its turn/completed decides.
    }
    if (this.#settled) return;
    this.#graceTimer ??= setTimeout(
      () => this.#settleLocal(null),
      this.#options.interruptGraceMs ?? 5000,
    );
  }

  #armIdle(): void {
    const budget = this.#options.idleTimeoutMs ?? 0;
    if (budget <= 0 || this.#settled || this.#idleTripped) return;
    const wait = Math.max(0, this.lastActivityAt + budget - Date.now());
    this.#idleTimer = setTimeout(() => {
      if (Date.now() - this.lastActivityAt >= budget) this.#tripIdle(budget);
      else this.#armIdle();
    }, wait);
  }

  #tripIdle(budget: number): void {
    if (this.#settled) return;
    this.#idleTripped = true;
    const failure = localFailure(
      'idle-timeout',
      'idle-timeout',
      `no agent activity for ${budget} ms (last: ${this.lastActivityKind})`,
    );
    this.#emit([
      this.#mapper.failureEvent(EVENT_NAMES.idleTimeout, failure, {
        idleMs: Date.now() - this.lastActivityAt,
        lastActivityKind: this.lastActivityKind,
      }),
    ]);
    void this.#sendInterrupt();
  }

  #completed(turn: TurnInfo): void {
    if (turn.status === 'completed') return this.#settle('completed', null, turn.durationMs);
    if (this.#idleTripped || this.#cancelRequested) return this.#settleLocal(turn);
    if (turn.status === 'interrupted') {
      const failure = localFailure('backend-failed', 'interrupted', 'the turn was interrupted');
      return this.#settle('interrupted', failure, turn.durationMs);
    }
    const report = turn.error ?? this.#mapper.lastError?.error ?? null;
    const failure = report
      ? classifyAgentError(report, { compacting: this.#mapper.compacting })
      : localFailure('backend-failed', 'turn-failed', 'the turn failed without an error');
    if (!this.#mapper.lastError) this.#emit([this.#mapper.failureEvent('turn.failed', failure)]);
    this.#settle(turn.status, failure, turn.durationMs);
  }

  /** Settled by our own decision (idle budget, cancel), with or without `turn/completed`. */
  #settleLocal(turn: TurnInfo | null): void {
    const failure = this.#idleTripped
      ? localFailure(
          'idle-timeout',
          'idle-timeout',
          'the idle budget passed with no agent activity',
        )
      : this.#cancelRequested
        ? localFailure('cancelled', 'cancelled', 'the turn was cancelled')
        : localFailure(
            'backend-failed',
            'interrupt-unanswered',
            'the agent did not end the turn after an interrupt',
          );
    this.#settle(turn?.status ?? null, failure, turn?.durationMs ?? null);
  }

  #settle(
    agentStatus: TurnStatus | null,
    failure: AgentFailure | null,
    durationMs: number | null,
  ): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#stopTimers();
    const completed = agentStatus === 'completed' && failure === null;
    const scrubbed = failure && {
      ...failure,
      message: summarize(scrubText(failure.message, this.#ctx.redactor), MESSAGE_CHARS),
    };
    this.#emit(this.#mapper.finish({ completed, agentStatus, failure: scrubbed, durationMs }));
    const message = this.#mapper.lastMessage;
    const last = message && { ...message, text: scrubText(message.text, this.#ctx.redactor) };
    this.#resolve({
      status: completed
        ? 'completed'
        : scrubbed?.failureKind === 'cancelled'
          ? 'cancelled'
          : 'failed',
      threadId: this.threadId,
      turnId: this.turnId,
      agentStatus,
      failure: scrubbed,
      finalMessage: completed ? last : null,
      lastMessage: last,
      durationMs: Date.now() - this.#startedAt,
    });
    this.#ctx.onSettled();
  }

  #stopTimers(): void {
    clearTimeout(this.#idleTimer);
    clearTimeout(this.#graceTimer);
  }

  #emit(events: AgentEvent[]): void {
    for (const event of events) this.#options.onEvent?.(event);
  }
}

async function settledWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  const result = await Promise.race([promise.then(() => true as const), timeout]);
  clearTimeout(timer);
  return result;
}
