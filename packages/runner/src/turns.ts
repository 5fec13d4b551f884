import {
  ApiError,
  isServiceError,
  RUN_BLOCKING_KINDS,
  type Command,
  type CommandStatusBody,
} from '@svc/contracts';
import { isAgentError, type TurnHandle, type TurnOutcome } from './agent/index.js';
import { composeTurnPrompt } from './assembly/index.js';
import type { EventSink } from './event-sink.js';
import { tokenRetired } from './lease-keeper.js';
import type { RunnerLog } from './logging.js';
import type { ManagerClient } from './manager-client.js';
import type { RunContext } from './run-context.js';

/** How long a steer waits for its target turn to start. */
const STEER_TARGET_WAIT_MS = 10_000;

/** Failure kinds that block a run at assembly instead of failing one command. */
export const BLOCKING_KINDS = new Set<string>(RUN_BLOCKING_KINDS);

export interface ActiveTurn {
  command: Command;
  handle: TurnHandle | null;
  cancelRequested: boolean;
  /** How the turn ended, as the manager recorded its report; null until then. */
  reported: TurnEnd | null;
  /** Resolves once the turn has its handle, or ended without one. */
  started: Promise<void>;
  markStarted(): void;
}

export interface TurnEnd {
  state: string;
  failureKind: string | null;
  message: string | null;
}

export function newActiveTurn(command: Command): ActiveTurn {
  let markStarted!: () => void;
  const started = new Promise<void>((r) => (markStarted = r));
  return { command, handle: null, cancelRequested: false, reported: null, started, markStarted };
}

export interface TurnServices {
  client: ManagerClient;
  sink: EventSink;
  ctx: RunContext;
  log: RunnerLog;
  runnerId: string;
  attemptId: string | null;
  /** The thread this run continues when a turn names none (latest known). */
  knownThread(): string | null;
  rememberThread(threadId: string): void;
}

/** The text of a turn or steer payload. */
export function promptOf(command: Command): string {
  for (const key of ['prompt', 'message', 'text']) {
    const value = command.payload[key];
    if (typeof value === 'string' && value.trim() !== '') return value;
  }
  return '';
}

export class TurnOutcomeError extends Error {
  constructor(
    readonly failureKind: string,
    message: string,
    readonly blocksRun: boolean,
  ) {
    super(message);
  }
}

/**
 * One `turn` (or `resume`) command, start to terminal status: assemble on first use, start or
 * resume the thread (thread identity: the command's threadId, else the run's), inject prompts
 * on a new thread only, run the turn, flush its events, then report the outcome.
 */
export async function executeTurn(s: TurnServices, active: ActiveTurn): Promise<void> {
  const { command } = active;
  const report = async (body: Omit<CommandStatusBody, 'runnerId'>) => {
    // The turn's last events ride with its terminal status, stored in one transaction, sent
    // as soon as the turn ends (no wait for the sink's batch timer).
    const recorded = await reportWithEvents(s, command.commandId, body);
    // As the manager recorded it: a turn cancelled meanwhile stays cancelled.
    active.reported = {
      state: recorded?.state ?? body.state,
      failureKind: recorded ? recorded.failureKind : (body.failureKind ?? null),
      message: recorded ? recorded.message : (body.message ?? null),
    };
    await s.ctx
      .reportStorage(s.client, s.runnerId)
      .catch((error: unknown) =>
        s.log.warn('storage summary not reported', { err: String(error) }),
      );
  };
  try {
    await s.ctx.prepare(command.commandId);
    const agent = await s.ctx.startAgent(command.commandId, s.attemptId);
    if (active.cancelRequested)
      return await report({
        state: 'cancelled',
        failureKind: 'cancelled',
        message: 'cancelled before the turn started',
      });

    const named =
      typeof command.payload['threadId'] === 'string' ? command.payload['threadId'] : null;
    let threadId = named ?? s.knownThread() ?? s.ctx.run.sessionRef?.threadId ?? null;
    let isNew = false;
    if (threadId && !s.ctx.loadedThreads.has(threadId)) {
      const resumed = await agent.resumeThread(threadId).catch((error: unknown) => {
        if (
          isAgentError(error) &&
          (error.kind === 'rollout-not-found' || error.kind === 'thread-resume-failed')
        ) {
          // Only a mounted session volume turns "no rollout" into eviction; never a new thread instead.
          const kind =
            error.kind === 'rollout-not-found' && s.ctx.hasSessionVolume
              ? 'session-store-evicted'
              : 'thread-resume-failed';
          throw new TurnOutcomeError(kind, error.message, false);
        }
        throw error;
      });
      s.sink.push({ ...resumed.event, commandId: command.commandId });
      s.ctx.loadedThreads.add(threadId);
    } else if (!threadId) {
      const started = await agent.startThread({
        cwd: s.ctx.workspaceDir,
        approvalPolicy: s.ctx.policy.approval === 'on-request' ? 'on-request' : 'never',
        sandbox: s.ctx.policy.sandbox,
      });
      threadId = started.thread.id;
      isNew = true;
      s.ctx.loadedThreads.add(threadId);
      s.sink.push({ ...started.event, commandId: command.commandId });
    }
    s.rememberThread(threadId);
    if (command.type === 'resume') return await report({ state: 'completed', threadId });

    const prompt = composeTurnPrompt({
      userPrompt: promptOf(command),
      threadId: isNew ? null : threadId,
      prompts: s.ctx.assembly?.prompts ?? [],
      skills: s.ctx.assembly?.summary.skills.skills ?? [],
      promptFacts: s.ctx.assembly?.summary.prompts.facts ?? [],
    });
    s.sink.push({
      commandId: command.commandId,
      category: 'backend_status',
      name: 'turn.prompt',
      data: {
        threadId,
        newThread: isNew,
        initialPromptInjected: prompt.initialPromptInjected,
        injectedPromptNames: prompt.injectedPromptNames,
        injectedSkillNames: prompt.injectedSkillNames,
        prompts: prompt.promptFacts,
        promptBytes: Buffer.byteLength(prompt.text),
      },
    });
    const handle = await agent.runTurn(threadId, prompt.text, {
      commandId: command.commandId,
      idleTimeoutMs: s.ctx.policy.timeoutMs,
      onEvent: (event) => s.sink.push({ ...event, commandId: command.commandId }),
    });
    active.handle = handle;
    active.markStarted();
    await s.client
      .commandStatus(command.commandId, {
        runnerId: s.runnerId,
        state: 'running',
        threadId,
        ...(handle.turnId ? { turnId: handle.turnId } : {}),
      })
      .catch(() => undefined);
    if (active.cancelRequested) void handle.cancel({ graceMs: 2000, kill: 'always' });
    const outcome = await handle.outcome;
    await report(statusOf(outcome));
  } catch (error) {
    // The manager retired the job's token: the run ended, there is no one to report the turn to.
    if (tokenRetired(error)) throw error;
    const failure = describe(error);
    s.log.warn('turn failed', {
      commandId: command.commandId,
      failureKind: failure.failureKind,
      message: failure.message,
    });
    if (failure.failureKind === 'lease-lost') throw error;
    s.sink.push({
      commandId: command.commandId,
      category: 'error',
      name: 'turn.failed',
      data: {
        failureKind: failure.failureKind,
        message: failure.message,
        retryable: false,
        classification: failure.blocksRun ? 'assembly' : 'runner',
        ...(failure.details ? { details: failure.details } : {}),
      },
    });
    await report({
      state: failure.blocksRun ? 'blocked' : 'failed',
      failureKind: failure.failureKind,
      message: failure.message.slice(0, 3900),
      ...(failure.details ? { details: failure.details } : {}),
    });
    if (failure.blocksRun) throw new TurnOutcomeError(failure.failureKind, failure.message, true);
  }
}

/**
 * A command status carrying the events not yet sent. A refusal of the events themselves (a
 * 400) must not leave the command unfinished: the status is then sent alone.
 */
async function reportWithEvents(
  s: TurnServices,
  commandId: string,
  body: Omit<CommandStatusBody, 'runnerId'>,
): Promise<Command | undefined> {
  const status = (events: CommandStatusBody['events'] = []) =>
    s.client.commandStatus(commandId, {
      runnerId: s.runnerId,
      ...body,
      ...(events.length > 0 ? { events } : {}),
    });
  let recorded: Command | undefined;
  await s.sink.carry(async (events) => {
    try {
      recorded = await status(events);
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 400 || events.length === 0) throw error;
      s.log.warn('final events refused; reporting the status alone', {
        commandId,
        err: error.message,
      });
      recorded = await status();
    }
  });
  return recorded;
}

function statusOf(outcome: TurnOutcome): Omit<CommandStatusBody, 'runnerId'> {
  const ids = { threadId: outcome.threadId, ...(outcome.turnId ? { turnId: outcome.turnId } : {}) };
  if (outcome.status === 'completed') return { state: 'completed', ...ids };
  if (outcome.status === 'cancelled')
    return {
      state: 'cancelled',
      failureKind: 'cancelled',
      message: 'the turn was interrupted',
      ...ids,
    };
  return {
    state: 'failed',
    failureKind: outcome.failure?.failureKind ?? 'backend-failed',
    message: (outcome.failure?.message ?? 'the turn failed').slice(0, 3900),
    ...ids,
  };
}

interface FailureFacts {
  failureKind: string;
  message: string;
  blocksRun: boolean;
  details?: CommandStatusBody['details'];
}

function describe(error: unknown): FailureFacts {
  if (error instanceof TurnOutcomeError)
    return { failureKind: error.failureKind, message: error.message, blocksRun: error.blocksRun };
  if (error instanceof ApiError && error.failureKind === 'runner-lease-conflict')
    return { failureKind: 'lease-lost', message: error.message, blocksRun: false };
  if (isServiceError(error))
    return {
      failureKind: error.failureKind,
      message: error.message,
      blocksRun: BLOCKING_KINDS.has(error.failureKind),
      ...(BLOCKING_KINDS.has(error.failureKind) && error.details
        ? { details: namesOnly(error.details) }
        : {}),
    };
  // The agent layer's own kind says what failed (a bad config is the caller's input, a binary
  // that will not start is infrastructure): reporting all of them as backend-failed would
  // retry input errors and hide infrastructure ones.
  if (isAgentError(error))
    return { failureKind: error.failureKind(), message: error.message, blocksRun: false };
  return {
    failureKind: 'backend-failed',
    message: error instanceof Error ? error.message : String(error),
    blocksRun: false,
  };
}

/** A steer joins the active turn (never a new turn); its delivery is reported on the command. */
export async function executeSteer(
  s: TurnServices,
  command: Command,
  active: () => ActiveTurn | null,
): Promise<void> {
  // A steer can arrive while its target turn is still starting: wait (bounded) for it to start.
  let target = active();
  if (target && !target.handle) {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      target.started,
      new Promise<void>((r) => (timer = setTimeout(r, STEER_TARGET_WAIT_MS))),
    ]);
    clearTimeout(timer);
    target = active();
  }
  const matches =
    target?.handle &&
    (!command.targetCommandId || command.targetCommandId === target.command.commandId);
  if (!target || !target.handle || !matches) {
    await s.client.commandStatus(command.commandId, {
      runnerId: s.runnerId,
      state: 'failed',
      failureKind: 'backend-failed',
      message: 'no active turn to steer',
      steerDelivery: {
        forwarded: false,
        accepted: false,
        targetTurnId: null,
        message: 'no active turn to steer',
      },
    });
    return;
  }
  const result = await target.handle.steer(promptOf(command));
  s.sink.push({
    commandId: command.commandId,
    category: 'backend_status',
    name: 'steer.delivered',
    data: {
      targetCommandId: target.command.commandId,
      forwarded: result.forwarded,
      accepted: result.accepted,
      targetTurnId: result.turnId,
      error: result.error,
    },
  });
  await reportWithEvents(s, command.commandId, {
    state: result.accepted ? 'completed' : 'failed',
    ...(result.accepted
      ? {}
      : { failureKind: 'backend-failed', message: result.error ?? 'steer refused' }),
    steerDelivery: {
      forwarded: result.forwarded,
      accepted: result.accepted,
      targetTurnId: result.turnId,
      message: result.error,
    },
  });
}

/** `interrupt` keeps durable command semantics: the target turn ends as cancelled. */
export async function executeInterrupt(
  s: TurnServices,
  command: Command,
  active: ActiveTurn | null,
): Promise<void> {
  if (
    !active?.handle ||
    (command.targetCommandId && command.targetCommandId !== active.command.commandId)
  ) {
    await s.client.commandStatus(command.commandId, {
      runnerId: s.runnerId,
      state: 'failed',
      failureKind: 'backend-failed',
      message: 'no active turn to interrupt',
    });
    return;
  }
  active.cancelRequested = true;
  await active.handle.interrupt();
  const turnId = active.handle.turnId;
  await s.client.commandStatus(command.commandId, {
    runnerId: s.runnerId,
    state: 'completed',
    ...(turnId ? { turnId } : {}),
  });
}

/**
 * The details a blocked assembly reports: names and counts (required, missing, available
 * skills), bounded to what the status body accepts. Anything else is left out.
 */
function namesOnly(details: Readonly<Record<string, unknown>>): CommandStatusBody['details'] {
  const out: NonNullable<CommandStatusBody['details']> = {};
  for (const [key, value] of Object.entries(details).slice(0, 16)) {
    if (key.length > 64) continue;
    if (Array.isArray(value))
      out[key] = value
        .filter((v): v is string => typeof v === 'string')
        .slice(0, 200)
        .map((v) => v.slice(0, 256));
    else if (typeof value === 'string') out[key] = value.slice(0, 512);
    else if (typeof value === 'boolean' || Number.isInteger(value)) out[key] = value as number;
  }
  return out;
}
