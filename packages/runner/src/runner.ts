import { hostname } from 'node:os';
import {
  ApiError,
  EVENT_NAMES,
  newId,
  Redactor,
  OUTCOME_FAILURE_KINDS,
  type Command,
  type RunControlSignals,
  type RunStatusBody,
} from '@svc/contracts';
import { checkWorkReady, DEFAULT_BASE_TOOLS, detectWorkReady } from './assembly/index.js';
import type { RunnerConfig } from './config.js';
import { EventSink } from './event-sink.js';
import { LeaseKeeper, RunnerStop, tokenRetired } from './lease-keeper.js';
import { RunnerLog } from './logging.js';
import { ManagerClient } from './manager-client.js';
import { RunContext } from './run-context.js';
import { wipeSecretMaterial } from './secret-cleanup.js';
import {
  executeInterrupt,
  executeSteer,
  executeTurn,
  newActiveTurn,
  TurnOutcomeError,
  type ActiveTurn,
  type TurnEnd,
  type TurnServices,
} from './turns.js';

const VERSION = '0.1.0';
const MAX_POLL_WAIT_MS = 20_000;
const TERMINAL = new Set(['completed', 'failed', 'blocked', 'cancelled', 'expired']);

type StopReason = 'idle' | 'served' | 'run-terminal' | 'lease-lost' | 'blocked';

/**
 * The runner's lifecycle: register, claim (waiting out an old lease), smoke-check the image,
 * then serve the run's commands until it has been idle for `idleExitMs`: turns one at a time,
 * steers and interrupts against the active turn, cancels from control signals. On idle it
 * closes the run and exits 0. A single-turn run (a queue task's: no follow-up can come) is
 * closed as soon as its turn ended, in that turn's outcome, so its capacity is free at once.
 */
export class Runner {
  readonly redactor = new Redactor();
  readonly runnerId: string;
  readonly client: ManagerClient;
  #sink!: EventSink;
  #lease!: LeaseKeeper;
  #ctx!: RunContext;
  #active: ActiveTurn | null = null;
  #queue: Command[] = [];
  #pumping: Promise<void> | null = null;
  #afterSeq = 0;
  #thread: string | null = null;
  #lastWork = Date.now();
  #stop = new AbortController();
  #stopReason: StopReason | null = null;
  /** Single-turn: how the last turn ended, until the run is closed in that outcome. */
  #served: TurnEnd | null = null;
  /** Ends the poll in flight early (a single-turn run's turn ended: close it now). */
  #nudge = new AbortController();

  readonly log: RunnerLog;

  constructor(private readonly config: RunnerConfig) {
    // One redactor for everything the runner writes: it learns every secret it touches.
    this.runnerId = config.runnerId ?? newId('rnr');
    this.log = new RunnerLog(this.redactor, {
      level:
        (['debug', 'info', 'warn', 'error'] as const).find((l) => l === config.logLevel) ?? 'info',
      format: config.logFormat,
      base: {
        runId: config.runId,
        runnerId: this.runnerId,
        ...(config.attemptId ? { attemptId: config.attemptId } : {}),
        ...(config.jobName ? { jobName: config.jobName } : {}),
      },
    });
    this.redactor.add(config.managerToken);
    for (const { value } of config.transientEnv) this.redactor.add(value);
    this.client = new ManagerClient(config.managerUrl, config.managerToken, config.runId);
  }

  /** Serve the run, then remove its secret material from disk, whatever way serving ended. */
  async run(): Promise<number> {
    try {
      return await this.#serve();
    } finally {
      wipeSecretMaterial(this.config);
    }
  }

  async #serve(): Promise<number> {
    const specs = DEFAULT_BASE_TOOLS.map((tool) => ({
      ...tool,
      required: this.config.requiredTools.includes(tool.name),
    }));
    const workReady = await detectWorkReady({
      tools: specs,
      cacheFile: this.config.workReadyCache,
    });
    const registration = await this.client.register({
      runId: this.config.runId,
      runnerId: this.runnerId,
      attemptId: this.config.attemptId,
      runnerJobId: this.config.runnerJobId,
      hostname: hostname(),
      pid: process.pid,
      version: VERSION,
      workReady: workReady as unknown as Record<string, unknown>,
    });
    this.#lease = new LeaseKeeper(this.client, this.runnerId, this.config.attemptId, this.log);
    let claim;
    try {
      claim = await this.#lease.claim(registration.leaseTtlMs * 4);
    } catch (error) {
      if (error instanceof RunnerStop) {
        this.log.info('not claiming the run', { reason: error.reason, message: error.message });
        return error.reason === 'run-terminal' ? 0 : 1;
      }
      throw error;
    }
    this.#sink = new EventSink(this.client, this.runnerId, this.config.attemptId ?? this.runnerId);
    this.#sink.push({
      category: 'system',
      name: EVENT_NAMES.runnerStartup,
      data: {
        runnerId: this.runnerId,
        attemptId: this.config.attemptId,
        jobName: this.config.jobName,
        image: this.config.image,
        hostname: hostname(),
        pid: process.pid,
        version: VERSION,
        recovered: claim.recovered,
        workReady,
      },
    });
    try {
      checkWorkReady(workReady);
    } catch (error) {
      return this.#failRun('infra-failed', error instanceof Error ? error.message : String(error));
    }
    this.#ctx = new RunContext(this.config, claim.run, this.#sink, this.redactor, this.log);
    this.#lease.start(
      registration.heartbeatIntervalMs,
      () =>
        this.#ctx.agent
          ? { at: this.#ctx.agent.lastActivityAt, kind: this.#ctx.agent.lastActivityKind }
          : null,
      (control) => this.#control(control),
      (stop) =>
        stop.reason === 'run-terminal'
          ? this.#ended(stop.message)
          : this.#halt(stop.reason, stop.message),
    );
    try {
      await this.#loop(Math.min(registration.pollWaitMs, MAX_POLL_WAIT_MS));
    } finally {
      this.#lease.stop();
      await this.#pumping?.catch(() => undefined);
      await this.#sink.flush().catch(() => undefined);
      await this.#ctx.shutdown();
    }
    this.log.info('runner exiting', { reason: this.#stopReason });
    return this.#stopReason === 'lease-lost' ? 1 : 0;
  }

  /** Immediate stop (the Job is being deleted): kill the agent tree, do not wait. */
  terminate(): void {
    this.#ctx?.agent?.killTree();
    wipeSecretMaterial(this.config);
  }

  async #loop(maxWaitMs: number): Promise<void> {
    while (!this.#stop.signal.aborted) {
      const busy = this.#active !== null || this.#queue.length > 0;
      const idleFor = busy ? 0 : Date.now() - this.#lastWork;
      const served = this.#served;
      if (!busy && served) {
        this.#served = null; // refused (a command came meanwhile): tried again after the next turn
        if (await this.#closeRun(runOutcomeOf(served))) return;
      }
      if (!busy && idleFor >= this.config.idleExitMs) {
        if (await this.#closeRun()) return;
      }
      const waitMs = busy
        ? maxWaitMs
        : Math.max(0, Math.min(maxWaitMs, this.config.idleExitMs - idleFor));
      let page;
      if (this.#nudge.signal.aborted) this.#nudge = new AbortController();
      try {
        page = await this.client.poll(
          this.runnerId,
          this.#afterSeq,
          waitMs,
          AbortSignal.any([this.#stop.signal, this.#nudge.signal]),
        );
      } catch (error) {
        if (this.#stop.signal.aborted) return;
        if (this.#nudge.signal.aborted) continue;
        if (error instanceof ApiError && error.failureKind === 'runner-lease-conflict')
          return this.#halt('lease-lost', error.message);
        const retired = tokenRetired(error);
        if (retired) return this.#ended(retired.message);
        throw error;
      }
      for (const command of page.commands) {
        this.#afterSeq = Math.max(this.#afterSeq, command.seq);
        this.#dispatch(command);
      }
      this.#control(page.control);
    }
  }

  #services(): TurnServices {
    return {
      client: this.client,
      sink: this.#sink,
      ctx: this.#ctx,
      log: this.log,
      runnerId: this.runnerId,
      attemptId: this.config.attemptId,
      knownThread: () => this.#thread,
      rememberThread: (threadId) => (this.#thread = threadId),
    };
  }

  #dispatch(command: Command): void {
    if (command.threadId && (command.type === 'turn' || command.type === 'resume'))
      this.#thread = command.threadId;
    if (TERMINAL.has(command.state)) return;
    if (command.state === 'confirmed' && command.runnerId === this.runnerId) return;
    // accepted/delivered for us, or confirmed by a previous runner that never finished it.
    if (command.type === 'turn' || command.type === 'resume') {
      this.#queue.push(command);
      this.#pumping ??= this.#pump().finally(() => (this.#pumping = null));
      return;
    }
    void this.#acked(command).then((ok) => {
      if (!ok) return;
      const work =
        command.type === 'steer'
          ? executeSteer(this.#services(), command, () => this.#active)
          : executeInterrupt(this.#services(), command, this.#active);
      return work.catch((error: unknown) =>
        this.log.warn(`${command.type} failed`, {
          commandId: command.commandId,
          err: String(error),
        }),
      );
    });
  }

  async #acked(command: Command): Promise<boolean> {
    try {
      await this.client.ack(this.runnerId, command.commandId);
      return true;
    } catch (error) {
      if (error instanceof ApiError && error.failureKind === 'state-conflict') return false; // cancelled meanwhile
      throw error;
    }
  }

  async #pump(): Promise<void> {
    while (this.#queue.length > 0 && !this.#stop.signal.aborted) {
      const command = this.#queue.shift()!;
      if (!(await this.#acked(command))) continue;
      this.#active = newActiveTurn(command);
      this.#lastWork = Date.now();
      try {
        await executeTurn(this.#services(), this.#active);
      } catch (error) {
        if (error instanceof TurnOutcomeError && error.blocksRun) {
          await this.#reportRun('blocked', error.failureKind, error.message);
          this.#halt('blocked', error.message);
        } else if (error instanceof ApiError && error.failureKind === 'runner-lease-conflict') {
          this.#halt('lease-lost', error.message);
        } else {
          const retired = tokenRetired(error);
          if (retired) this.#ended(retired.message);
          else
            this.log.error('turn crashed', {
              err: error instanceof Error ? error.message : String(error),
            });
        }
      } finally {
        this.#active.markStarted(); // a steer waiting for this turn stops waiting
        if (this.config.singleTurn && this.#active.reported) {
          this.#served = this.#active.reported;
          this.#nudge.abort();
        }
        this.#active = null;
        this.#lastWork = Date.now();
      }
    }
  }

  /** Cancel signals: a cancelled active command, or the whole run ending. */
  #control(control: RunControlSignals): void {
    const active = this.#active;
    if (
      active &&
      control.cancelledCommandIds.includes(active.command.commandId) &&
      !active.cancelRequested
    ) {
      active.cancelRequested = true;
      this.log.info('cancelling the active turn', { commandId: active.command.commandId });
      // Interrupt, then end whatever it left running (shell commands survive an interrupt).
      void active.handle?.cancel({ graceMs: 2000, kill: 'always' });
    }
    this.#queue = this.#queue.filter((c) => !control.cancelledCommandIds.includes(c.commandId));
    if (TERMINAL.has(control.runState)) this.#ended(`run is ${control.runState}`);
  }

  /** The run ended (a control signal, or the manager retired the token): stop its turn, exit 0. */
  #ended(message: string): void {
    const active = this.#active;
    if (active && !active.cancelRequested) {
      active.cancelRequested = true;
      void active.handle?.cancel({ graceMs: 2000, kill: 'always' });
    }
    this.#halt('run-terminal', message);
  }

  #halt(reason: StopReason, message: string): void {
    if (this.#stopReason) return;
    this.#stopReason = reason;
    this.log.info('runner stopping', { reason, message });
    this.#stop.abort();
    if (reason === 'lease-lost') this.#ctx?.agent?.killTree();
  }

  /**
   * Idle long enough, or a single-turn run served (`outcome`): close the run. Refused while
   * commands are unfinished (keep serving).
   */
  async #closeRun(outcome?: Omit<RunStatusBody, 'runnerId'>): Promise<boolean> {
    await this.#sink.flush();
    try {
      await this.client.runStatus({
        runnerId: this.runnerId,
        ...(outcome ?? {
          state: 'completed',
          message: `runner idle for ${this.config.idleExitMs} ms`,
        }),
      });
    } catch (error) {
      if (error instanceof ApiError && error.failureKind === 'state-conflict') return false;
      const retired = tokenRetired(error);
      if (!retired) throw error;
      this.#ended(retired.message);
      return true;
    }
    this.#stopReason = outcome ? 'served' : 'idle';
    return true;
  }

  async #reportRun(
    state: 'blocked' | 'failed',
    failureKind: string,
    message: string,
  ): Promise<void> {
    await this.#sink.flush().catch(() => undefined);
    await this.client
      .runStatus({ runnerId: this.runnerId, state, failureKind, message: message.slice(0, 3900) })
      .catch((error: unknown) => this.log.warn('run status failed', { err: String(error) }));
  }

  async #failRun(failureKind: string, message: string): Promise<number> {
    this.log.error('runner cannot serve the run', { failureKind, message });
    await this.#reportRun('failed', failureKind, message);
    return 1;
  }
}

/** A single-turn run ends as its turn did (a failure kind the run may carry, else backend-failed). */
function runOutcomeOf(turn: TurnEnd): Omit<RunStatusBody, 'runnerId'> {
  const message = `the run's turn ${turn.state}${turn.message ? `: ${turn.message}` : ''}`.slice(
    0,
    3900,
  );
  if (turn.state === 'completed') return { state: 'completed', message };
  if (turn.state === 'cancelled') return { state: 'cancelled', failureKind: 'cancelled', message };
  const kind = turn.failureKind ?? 'backend-failed';
  return {
    state: turn.state === 'blocked' ? 'blocked' : 'failed',
    failureKind: (OUTCOME_FAILURE_KINDS as readonly string[]).includes(kind)
      ? kind
      : 'backend-failed',
    message,
  };
}
