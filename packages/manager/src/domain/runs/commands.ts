import type { Insertable } from 'kysely';
import {
  newId,
  OUTCOME_FAILURE_KINDS,
  payloadHash,
  RUN_BLOCKING_KINDS,
  ServiceError,
  TERMINAL_COMMAND_STATES,
  TERMINAL_RUN_STATES,
  type Command,
  type CommandCreateBody,
  type CommandStatusBody,
} from '@svc/contracts';
import {
  activeTurn,
  findCommand,
  findCommandByKey,
  insertCommandOfRun,
  updateCommand,
  type CommandRow,
} from '../../store/commands.js';
import { acknowledge } from '../../store/command-ack.js';
import { createFresh } from '../../store/create-fresh.js';
import type { NewEvent } from '../../store/events.js';
import { json } from '../../store/json.js';
import type { CommandsTable } from '../../store/schema.js';
import { lockRunOfCommand, type Executor, type RunRow, type Tx } from '../../store/runs.js';
import { runWakeKey } from '../../store/wakeups.js';
import { commandsCreated } from '../../metrics/registry.js';
import { expireCommands } from './command-expiry.js';
import { finishReported, reportedDetails, reportedSteer } from './command-finish.js';
import { checkCommandPayload, namedProfile } from './command-payload.js';
import type { Ctx } from '../context.js';
import { terminalEvent, writeEvents } from './event-log.js';
import { checkRunnerEvents, runnerEvents, writeRunnerEvents } from './events.js';
import { tokenHash } from '../caller-tokens.js';
import { assertLeaseOwner, leaseConflict } from './lease-checks.js';
import { toCommand } from './records.js';
import { isTerminalRun, lockRunOrThrow, terminateRun } from './runs.js';

export const isTerminalCommand = (state: string) =>
  (TERMINAL_COMMAND_STATES as readonly string[]).includes(state);

export interface CreatedCommand {
  command: Command;
  created: boolean;
}

/**
 * Create a command. An idempotency key makes a retry return the first command when the payload
 * hash matches and fail with `idempotency-conflict` when it does not. The run row lock orders
 * concurrent creations, so two racing requests with one key create one command.
 */
export async function createCommand(
  ctx: Ctx,
  runId: string,
  body: CommandCreateBody,
  options: { requestHash?: string } = {},
): Promise<CreatedCommand> {
  const payload = body.payload ?? {};
  const hash = payloadHash({ type: body.type, payload });
  await ctx.hooks.checkRunStorage?.(runId);
  const fresh = await createPlain(ctx, runId, body, options.requestHash ?? null);
  if (fresh) {
    commandsCreated.inc({ type: fresh.type });
    return { command: toCommand(fresh), created: true };
  }
  const result = await ctx.db.transaction().execute(async (trx) => {
    const run = await lockRunOrThrow(trx, runId);
    if (body.idempotencyKey) {
      const existing = await findCommandByKey(trx, runId, body.idempotencyKey);
      if (existing) {
        if (existing.payload_hash !== hash) {
          throw new ServiceError(
            'idempotency-conflict',
            `idempotency key ${body.idempotencyKey} was used with a different payload`,
            {
              commandId: existing.command_id,
              existingPayloadHash: existing.payload_hash,
              payloadHash: hash,
            },
          );
        }
        return { row: existing, created: false };
      }
    }
    checkCommandPayload(body.type, payload, run.backend_profile);
    if (isTerminalRun(run.state)) {
      throw new ServiceError(
        'run-terminal',
        `run ${runId} is ${run.state}; it accepts no new commands`,
        { runState: run.state },
      );
    }
    await ctx.hooks.beforeCommand?.(trx, run);
    const target = await resolveTarget(trx, run, body.type, payload);
    const seq = run.command_seq + 1;
    const record = commandRowOf(ctx, runId, seq, body, {
      requestHash: options.requestHash ?? null,
      target,
    });
    const latest =
      body.type === 'turn' || body.type === 'resume' ? record.command_id : run.latest_command_id;
    // The command, the run's seq and the runner's wake-up in one statement (NOTIFY is sent on
    // commit): no commit of its own, and a woken long-poll always finds the command.
    const row = await insertCommandOfRun(trx, record, latest, runWakeKey(runId));
    if (latest === row.command_id) await ctx.hooks.afterCommand?.(trx, run, row);
    return { row, created: true };
  });
  if (result.created) commandsCreated.inc({ type: result.row.type });
  return { command: toCommand(result.row), created: result.created };
}

/**
 * A turn or resume on a plain run, the common case, in one statement (`createFresh`): its
 * payload checked here (it names no profile, so the run's is not needed), the run's state, its
 * lock and the key checked in the statement. Undefined when the general path must decide: a
 * steer or interrupt (their target is resolved under the lock), a payload it refuses (the
 * general path orders a key's answer before the payload's), or any case the statement declines.
 */
async function createPlain(
  ctx: Ctx,
  runId: string,
  body: CommandCreateBody,
  requestHash: string | null,
): Promise<CommandRow | undefined> {
  const payload = body.payload ?? {};
  if (body.type !== 'turn' && body.type !== 'resume') return undefined;
  if (namedProfile(payload) !== undefined) return undefined;
  try {
    checkCommandPayload(body.type, payload, '');
  } catch {
    return undefined;
  }
  const record = commandRowOf(ctx, runId, 0, body, { requestHash, target: null });
  return createFresh(ctx.db, record, payload, true, TERMINAL_RUN_STATES, runWakeKey(runId));
}

/** A new command's record, `accepted`, expiring after the command TTL. */
export function commandRowOf(
  ctx: Ctx,
  runId: string,
  seq: number,
  body: CommandCreateBody,
  extra: { requestHash: string | null; target: string | null },
): Insertable<CommandsTable> {
  const payload = body.payload ?? {};
  return {
    command_id: newId('cmd'),
    run_id: runId,
    seq,
    type: body.type,
    state: 'accepted',
    idempotency_key: body.idempotencyKey ?? null,
    payload_hash: payloadHash({ type: body.type, payload }),
    request_hash: extra.requestHash,
    payload: json(payload),
    target_command_id: extra.target,
    thread_id: typeof payload['threadId'] === 'string' ? payload['threadId'] : null,
    expires_at: new Date(Date.now() + ctx.config.commandTtlMs),
  };
}

async function resolveTarget(
  trx: Tx,
  run: RunRow,
  type: CommandCreateBody['type'],
  payload: Record<string, unknown>,
): Promise<string | null> {
  if (type !== 'steer' && type !== 'interrupt') return null;
  const named = payload['targetCommandId'];
  if (typeof named === 'string') {
    const target = await findCommand(trx, named);
    if (!target || target.run_id !== run.run_id || target.type !== 'turn') {
      throw new ServiceError(
        'schema-invalid',
        `payload.targetCommandId ${named} is not a turn of run ${run.run_id}`,
        { field: 'payload.targetCommandId' },
      );
    }
    return target.command_id;
  }
  return (await activeTurn(trx, run.run_id))?.command_id ?? null;
}

/**
 * Run `fn` on a command with its run's row locked (the lock every writer of a run takes), the
 * command read under the lock so its state is current. All of it in one transaction: the run
 * is found by the command inside the locking statement.
 */
async function withLockedCommand<T>(
  ctx: Ctx,
  commandId: string,
  fn: (trx: Tx, run: RunRow, command: CommandRow) => Promise<T>,
): Promise<T> {
  return ctx.db.transaction().execute(async (trx) => {
    const run = await lockRunOfCommand(trx, commandId);
    if (!run) throw new ServiceError('not-found', `command ${commandId} not found`);
    return fn(trx, run, await getCommandRow(trx, commandId));
  });
}

export async function getCommandRow(
  db: Executor,
  commandId: string,
  runId?: string,
): Promise<CommandRow> {
  const row = await findCommand(db, commandId);
  if (!row || (runId !== undefined && row.run_id !== runId)) {
    throw new ServiceError(
      'not-found',
      runId ? `command ${commandId} not found in run ${runId}` : `command ${commandId} not found`,
    );
  }
  return row;
}

export async function getCommand(ctx: Ctx, runId: string, commandId: string): Promise<Command> {
  await expireCommands(ctx, runId);
  return toCommand(await getCommandRow(ctx.db, commandId, runId));
}

/**
 * Cancel one command. Not yet acknowledged: cancelled at once, and no runner will take it.
 * Acknowledged (running): cancelled durably now; the runner sees it in its control signals,
 * interrupts the agent and records what the turn did until then. Terminal: unchanged.
 */
export async function cancelCommand(
  ctx: Ctx,
  commandId: string,
  reason: string | undefined,
): Promise<Command> {
  const row = await withLockedCommand(ctx, commandId, async (trx, run, command) => {
    if (isTerminalCommand(command.state)) return command;
    return finishCommand(ctx, trx, run, command, {
      state: 'cancelled',
      failureKind: 'cancelled',
      message: reason ? `cancelled: ${reason}` : 'cancelled',
      via: 'command-cancel',
      extra: { cancel_requested_at: new Date() },
    });
  });
  await ctx.wakeups.publish(runWakeKey(row.run_id));
  return toCommand(row);
}

/**
 * Runner acknowledgement: accepted/delivered -> confirmed, and the run claimed -> running, in
 * one statement (`acknowledge`). A replacement runner (now the lease owner) takes over a
 * command its predecessor had acknowledged and never finished. A command of a queue attempt
 * still `dispatched` is acknowledged in a transaction with its attempt and task, which then
 * read `running` (the work started), as they follow a terminal status. Only a refusal reads
 * again, to tell a repeated ack (answered with the command) from a state conflict.
 */
export async function ackCommand(
  ctx: Ctx,
  commandId: string,
  runnerId: string,
  leaseToken: string | undefined,
): Promise<Command> {
  const hash = tokenHash(leaseToken ?? '');
  let outcome = await acknowledge(ctx.db, commandId, runnerId, hash, true);
  if (outcome.kind === 'follow')
    outcome = await ctx.db.transaction().execute(async (trx) => {
      const acked = await acknowledge(trx, commandId, runnerId, hash, false);
      if (acked.kind === 'acknowledged')
        await ctx.hooks.onAcknowledged?.(trx, { runId: acked.command.run_id, commandId });
      return acked;
    });
  if (outcome.kind === 'not-found')
    throw new ServiceError('not-found', `command ${commandId} not found`);
  if (outcome.kind === 'lease-conflict') throw leaseConflict(outcome.run);
  if (outcome.kind === 'acknowledged') return toCommand(outcome.command);
  const command = await getCommandRow(ctx.db, commandId);
  if (command.state === 'confirmed' && command.runner_id === runnerId) return toCommand(command);
  throw new ServiceError(
    'state-conflict',
    `command ${commandId} is ${command.state}; only accepted, delivered or orphaned commands can be acknowledged`,
    { state: command.state },
  );
}

/**
 * The runner's terminal report. `completed` needs an acknowledged command. The terminal_status
 * event is written here, in the same transaction as the state, so the two never disagree; the
 * runner's last events (`events`, under the append route's rules) go in the same transaction,
 * before it, so a reader never sees the command terminal without them. A command already
 * terminal (for example cancelled meanwhile) is returned unchanged, its events still stored.
 */
export async function reportCommandStatus(
  ctx: Ctx,
  commandId: string,
  body: CommandStatusBody,
  leaseToken: string | undefined,
): Promise<Command> {
  const state = body.state;
  const events = statusEvents(body);
  if (state === 'running') return reportProgress(ctx, commandId, body, events, leaseToken);
  const failureKind = normalizeOutcome(state, body.failureKind);
  const fast = await finishReported(
    ctx,
    commandId,
    body,
    { state, failureKind },
    events,
    leaseToken,
  );
  if (fast) return toCommand(fast);
  const row = await withLockedCommand(ctx, commandId, async (trx, run, command) => {
    if (events.length > 0) assertLeaseOwner(run, body.runnerId, leaseToken);
    if (isTerminalCommand(command.state)) {
      if (events.length > 0) await writeRunnerEvents(trx, run, events, commandId);
      return command;
    }
    assertLeaseOwner(run, body.runnerId, leaseToken);
    if (state === 'completed' && command.state !== 'confirmed') {
      throw new ServiceError(
        'state-conflict',
        `command ${commandId} is ${command.state}; acknowledge it before reporting completed`,
        { state: command.state },
      );
    }
    if (events.length > 0) await checkRunnerEvents(trx, run, events, commandId);
    const steer = reportedSteer(body);
    const details = reportedDetails(body);
    const finished = await finishCommand(ctx, trx, run, command, {
      state,
      failureKind,
      message: body.message ?? null,
      via: 'runner',
      threadId: body.threadId ?? null,
      turnId: body.turnId ?? null,
      ...(details ? { details } : {}),
      // The runner's last events and the terminal_status event: one write, in that order.
      leading: events,
      extra: {
        runner_id: body.runnerId,
        ...(body.threadId ? { thread_id: body.threadId } : {}),
        ...(body.turnId ? { turn_id: body.turnId } : {}),
        ...(steer ? { steer_delivery: steer } : {}),
      },
    });
    // An assembly that blocks one turn blocks every turn of the run: the run is blocked in the
    // same transaction, so no reader sees a blocked command under a `running` run (and a
    // runner that dies before its own run report leaves nothing behind).
    if (state === 'blocked' && isRunBlocking(failureKind)) {
      await terminateRun(ctx, trx, await lockRunOrThrow(trx, run.run_id), {
        state: 'blocked',
        failureKind,
        message: body.message ?? null,
        ...(details ? { details } : {}),
        source: 'runner-command-blocked',
      });
    }
    return finished;
  });
  return toCommand(row);
}

/**
 * The events a status report carries, checked before any transaction opens. The route keeps
 * U+0000 for event data (replaced there, as on append); anywhere else in the body it is
 * refused, as on every other route.
 */
function statusEvents(body: CommandStatusBody): NewEvent[] {
  const { events, ...rest } = body;
  // JSON spells U+0000 as an escape, so one scan of the small remainder finds any.
  if (JSON.stringify(rest).includes('\\u0000'))
    throw new ServiceError('schema-invalid', 'U+0000 is not allowed outside event data');
  return events ? runnerEvents(events) : [];
}

/** Thread and turn ids of an acknowledged command, recorded as soon as the agent knows them. */
async function reportProgress(
  ctx: Ctx,
  commandId: string,
  body: CommandStatusBody,
  events: NewEvent[],
  leaseToken: string | undefined,
): Promise<Command> {
  const row = await withLockedCommand(ctx, commandId, async (trx, run, command) => {
    if (events.length > 0) {
      assertLeaseOwner(run, body.runnerId, leaseToken);
      await writeRunnerEvents(trx, run, events, commandId);
    }
    if (isTerminalCommand(command.state)) return command;
    assertLeaseOwner(run, body.runnerId, leaseToken);
    if (command.state !== 'confirmed') {
      throw new ServiceError(
        'state-conflict',
        `command ${commandId} is ${command.state}; acknowledge it before reporting progress`,
        { state: command.state },
      );
    }
    return updateCommand(trx, commandId, {
      ...(body.threadId ? { thread_id: body.threadId } : {}),
      ...(body.turnId ? { turn_id: body.turnId } : {}),
    });
  });
  return toCommand(row);
}

const isRunBlocking = (kind: string | null): boolean =>
  kind !== null && (RUN_BLOCKING_KINDS as readonly string[]).includes(kind);

function normalizeOutcome(
  state: Exclude<CommandStatusBody['state'], 'running'>,
  failureKind: string | undefined,
): string | null {
  if (state === 'completed') {
    if (failureKind)
      throw new ServiceError('schema-invalid', 'a completed command carries no failureKind');
    return null;
  }
  const kind =
    failureKind ??
    (state === 'cancelled' ? 'cancelled' : state === 'failed' ? 'backend-failed' : undefined);
  if (!kind) throw new ServiceError('schema-invalid', `state ${state} needs a failureKind`);
  if (!(OUTCOME_FAILURE_KINDS as readonly string[]).includes(kind)) {
    throw new ServiceError(
      'schema-invalid',
      `failureKind ${kind} is not an outcome kind (${OUTCOME_FAILURE_KINDS.join(', ')})`,
    );
  }
  return kind;
}

/** Move a command to a terminal state with its terminal_status event (run row locked). */
export async function finishCommand(
  ctx: Ctx,
  trx: Tx,
  run: RunRow,
  command: CommandRow,
  outcome: {
    state: 'completed' | 'failed' | 'blocked' | 'cancelled';
    failureKind: string | null;
    message: string | null;
    via: string;
    threadId?: string | null;
    turnId?: string | null;
    details?: Record<string, unknown>;
    /** Events written just before the terminal_status event (checked by the caller). */
    leading?: NewEvent[];
    extra?: Record<string, unknown>;
  },
): Promise<CommandRow> {
  await writeEvents(trx, run, [
    ...(outcome.leading ?? []),
    terminalEvent(command.command_id, {
      status: outcome.state,
      failureKind: outcome.failureKind,
      message: outcome.message,
      threadId: outcome.threadId ?? command.thread_id,
      turnId: outcome.turnId ?? command.turn_id,
      ...(outcome.details ? { details: outcome.details } : {}),
      via: outcome.via,
    }),
  ]);
  const updated = await updateCommand(trx, command.command_id, {
    state: outcome.state,
    failure_kind: outcome.failureKind,
    message: outcome.message,
    terminal_at: new Date(),
    ...outcome.extra,
  });
  await ctx.hooks.onTerminal(trx, {
    runId: run.run_id,
    commandId: command.command_id,
    state: outcome.state,
    threadId: updated.thread_id,
    sessionId: run.session_id,
  });
  return updated;
}
