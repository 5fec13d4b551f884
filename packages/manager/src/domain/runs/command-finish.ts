import { TERMINAL_COMMAND_STATES, type CommandStatusBody } from '@svc/contracts';
import type { CommandRow } from '../../store/commands.js';
import type { NewEvent } from '../../store/events.js';
import { finishFresh, type FreshFinish } from '../../store/finish-fresh.js';
import { json } from '../../store/json.js';
import { lockRunOfCommand } from '../../store/runs.js';
import { eventsAppended } from '../../metrics/registry.js';
import { tokenHash } from '../caller-tokens.js';
import type { Ctx } from '../context.js';
import { terminalEvent, terminalKeyOf } from './event-log.js';

const TERMINAL = new Set<string>(TERMINAL_COMMAND_STATES);

/**
 * A runner's terminal report on an acknowledged command, the common case, in one statement:
 * lease held, every event the command's own (or the run's) with a new key, no run blocked.
 * A run with a session, or a command with an open queue attempt or judge run, takes the same
 * statement inside a transaction that then runs those records' hooks. Undefined when the
 * report needs the general path (a refusal to explain, a repeat, a blocked run).
 */
export async function finishReported(
  ctx: Ctx,
  commandId: string,
  body: CommandStatusBody,
  outcome: { state: CommandStatusBody['state']; failureKind: string | null },
  events: readonly NewEvent[],
  leaseToken: string | undefined,
): Promise<CommandRow | undefined> {
  const { state } = outcome;
  if (state === 'running' || state === 'blocked' || leaseToken === undefined) return undefined;
  const terminalKey = terminalKeyOf(commandId);
  const keys = events.map((e) => e.key).filter((k): k is string => k !== null);
  if (
    events.some((e) => e.commandId !== null && e.commandId !== commandId) ||
    keys.includes(terminalKey) ||
    new Set(keys).size !== keys.length
  )
    return undefined;
  const details = reportedDetails(body);
  const finish: FreshFinish = {
    commandId,
    runnerId: body.runnerId,
    tokenHash: tokenHash(leaseToken),
    state,
    failureKind: outcome.failureKind,
    message: body.message ?? null,
    threadId: body.threadId ?? null,
    turnId: body.turnId ?? null,
    steerDelivery: reportedSteer(body) ?? null,
    events: [
      ...events,
      // Null ids are filled from the command in the same statement.
      terminalEvent(commandId, {
        status: state,
        failureKind: outcome.failureKind,
        message: body.message ?? null,
        threadId: body.threadId ?? null,
        turnId: body.turnId ?? null,
        ...(details ? { details } : {}),
        via: 'runner',
      }),
    ],
  };
  const row = await finishFresh(ctx.db, finish, true);
  if (!row) return undefined;
  const finished = TERMINAL.has(row.state) ? row : await finishLinked(ctx, finish);
  if (finished) eventsAppended.inc(finish.events.length);
  return finished;
}

/** The same statement in a transaction that runs the terminal hooks (session, queue, judge). */
async function finishLinked(ctx: Ctx, finish: FreshFinish): Promise<CommandRow | undefined> {
  return ctx.db.transaction().execute(async (trx) => {
    const run = await lockRunOfCommand(trx, finish.commandId);
    if (!run) return undefined;
    const row = await finishFresh(trx, finish, false);
    if (!row || !TERMINAL.has(row.state)) return undefined;
    await ctx.hooks.onTerminal(trx, {
      runId: run.run_id,
      commandId: finish.commandId,
      state: finish.state,
      threadId: row.thread_id,
      sessionId: run.session_id,
    });
    return row;
  });
}

/** The steer delivery a runner reports, as the command stores it (JSON), if any. */
export function reportedSteer(body: CommandStatusBody): string | undefined {
  const steer = body.steerDelivery;
  if (!steer) return undefined;
  return json({
    forwarded: steer.forwarded,
    accepted: steer.accepted,
    targetTurnId: steer.targetTurnId ?? null,
    message: steer.message ?? null,
  });
}

/** The details a report gives its terminal event: only for an outcome other than completed. */
export function reportedDetails(body: CommandStatusBody): Record<string, unknown> | undefined {
  return body.state !== 'completed' && body.details ? { ...body.details } : undefined;
}
