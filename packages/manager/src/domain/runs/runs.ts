import {
  newId,
  ServiceError,
  TERMINAL_RUN_STATES,
  type Run,
  type RunCreateBody,
  type RunState,
  type SessionRef,
} from '@svc/contracts';
import type { Insertable } from 'kysely';
import type { RunsTable } from '../../store/schema.js';
import { json } from '../../store/json.js';
import { findRun, insertRun, lockRun, type RunRow, type Tx } from '../../store/runs.js';
import { findRunView, NO_FACTS } from '../../store/run-view.js';
import { nonTerminalCommands, updateCommand } from '../../store/commands.js';
import { checkRunSources } from './bundle-policy.js';
import type { Ctx } from '../context.js';
import { dispatchScope } from '../dispatch-scope.js';
import { managerEvent, terminalEvent, writeEvents } from './event-log.js';
import { toRun } from './records.js';
import { checkProjectBoundary, completeExecutionPolicy, resolveProfile } from './run-policy.js';
import { runWakeKey } from '../../store/wakeups.js';
import { runsCreated } from '../../metrics/registry.js';

export const isTerminalRun = (state: string) =>
  (TERMINAL_RUN_STATES as readonly string[]).includes(state);

/** The rules every new run meets: tenant and project boundary, policy ceiling, bundle form. */
export function checkRunRules(ctx: Ctx, body: RunCreateBody, profile: string): void {
  checkProjectBoundary(body, ctx.config.tenants);
  completeExecutionPolicy(body.executionPolicy, profile, ctx.config.policy);
  checkRunSources(body, ctx.config.repoUrlPrefixes);
}

/**
 * What the service itself says of a new run, never taken from a request: the queue task whose
 * work it is (an attempt's or a judge's run), whose capacity its runner Jobs take and whose
 * runner serves one turn and closes the run.
 */
export interface RunOrigin {
  queueTaskId?: string | null;
}

/** A new run's record, `pending`, its execution policy completed (rules checked by the caller). */
export function runRowOf(
  ctx: Ctx,
  body: RunCreateBody,
  profile: string,
  sessionRef: SessionRef | null,
  origin: RunOrigin = {},
): Insertable<RunsTable> {
  return {
    run_id: newId('run'),
    tenant_id: body.tenantId,
    project_id: body.projectId,
    provider_id: body.providerId,
    backend_profile: profile,
    workspace_ref: json(body.workspaceRef),
    execution_policy: json(
      completeExecutionPolicy(body.executionPolicy, profile, ctx.config.policy),
    ),
    trace_sink: json(body.traceSink),
    resource_bundle_ref: body.resourceBundleRef ? json(body.resourceBundleRef) : null,
    session_ref: sessionRef ? json(sessionRef) : null,
    session_id: sessionRef?.sessionId ?? null,
    metadata: json(body.metadata ?? {}),
    queue_task_id: origin.queueTaskId ?? null,
    state: 'pending',
  };
}

/** Validate every rule of a new run, then persist it as `pending`. */
export async function createRun(
  ctx: Ctx,
  body: RunCreateBody,
  origin: RunOrigin = {},
): Promise<Run> {
  const profile = resolveProfile(body);
  checkRunRules(ctx, body, profile);
  await ctx.hooks.assertProfileUsable(profile);
  const sessionRef =
    body.sessionRef && ctx.hooks.completeSessionRef
      ? await ctx.hooks.completeSessionRef(body.sessionRef, profile)
      : (body.sessionRef ?? null);

  const row = await insertRun(ctx.db, runRowOf(ctx, body, profile, sessionRef, origin));
  runsCreated.inc();
  if (row.session_id) dispatchScope()?.noteRun(row.run_id, row.session_id);
  return toRun({ ...row, ...NO_FACTS }, new Date());
}

export async function getRunRow(ctx: Pick<Ctx, 'db'>, runId: string): Promise<RunRow> {
  const row = await findRun(ctx.db, runId);
  if (!row) throw new ServiceError('not-found', `run ${runId} not found`);
  return row;
}

/** The run record: its row, activity and latest turn, and the database clock, in one read. */
export async function getRun(ctx: Pick<Ctx, 'db'>, runId: string): Promise<Run> {
  const row = await findRunView(ctx.db, runId);
  if (!row) throw new ServiceError('not-found', `run ${runId} not found`);
  return toRun(row, row.view_now);
}

export async function lockRunOrThrow(trx: Tx, runId: string): Promise<RunRow> {
  const row = await lockRun(trx, runId);
  if (!row) throw new ServiceError('not-found', `run ${runId} not found`);
  return row;
}

/**
 * Move a locked run to a terminal state: every unfinished command converges to the same end
 * (cancelled for a cancel, failed or blocked for a runner failure), each with its
 * terminal_status event, then the run-level terminal_status event.
 */
export async function terminateRun(
  ctx: Ctx,
  trx: Tx,
  run: RunRow,
  outcome: {
    state: Exclude<RunState, 'pending' | 'claimed' | 'running'>;
    failureKind: string | null;
    message: string | null;
    details?: Record<string, unknown>;
    source: string;
  },
): Promise<RunRow> {
  const commandState = outcome.state === 'completed' ? 'cancelled' : outcome.state;
  const commandFailure = outcome.state === 'completed' ? 'cancelled' : outcome.failureKind;
  for (const command of await nonTerminalCommands(trx, run.run_id)) {
    await updateCommand(trx, command.command_id, {
      state: commandState,
      failure_kind: commandFailure,
      message: outcome.message ?? `run ${outcome.state}`,
      terminal_at: new Date(),
      ...(outcome.state === 'cancelled' ? { cancel_requested_at: new Date() } : {}),
    });
    await writeEvents(trx, run, [
      terminalEvent(command.command_id, {
        status: commandState,
        failureKind: commandFailure,
        message: outcome.message,
        via: outcome.source,
      }),
    ]);
    await ctx.hooks.onTerminal(trx, {
      runId: run.run_id,
      commandId: command.command_id,
      state: commandState,
      threadId: command.thread_id,
    });
  }
  await writeEvents(trx, run, [
    managerEvent('terminal_status', 'run.terminal', `run-terminal:${run.run_id}`, null, {
      status: outcome.state,
      failureKind: outcome.failureKind,
      message: outcome.message,
      ...(outcome.details ? { details: outcome.details } : {}),
      via: outcome.source,
    }),
  ]);
  const updated = await trx
    .updateTable('runs')
    .set({
      state: outcome.state,
      failure_kind: outcome.failureKind,
      message: outcome.message,
      failure_details: outcome.details ? json(outcome.details) : null,
      terminal_at: new Date(),
      updated_at: new Date(),
      ...(outcome.state === 'cancelled' ? { cancel_requested_at: new Date() } : {}),
    } as never)
    .where('run_id', '=', run.run_id)
    .returningAll()
    .executeTakeFirstOrThrow();
  await ctx.hooks.onTerminal(trx, {
    runId: run.run_id,
    commandId: null,
    state: outcome.state,
    threadId: null,
  });
  return updated;
}

/** Cancel a run: any non-terminal state -> cancelled; a terminal run is returned unchanged. */
export async function cancelRun(ctx: Ctx, runId: string, reason: string | undefined): Promise<Run> {
  const row = await ctx.db.transaction().execute(async (trx) => {
    const run = await lockRunOrThrow(trx, runId);
    if (isTerminalRun(run.state)) return run;
    await trx
      .updateTable('runs')
      .set({ cancel_reason: reason ?? null } as never)
      .where('run_id', '=', runId)
      .execute();
    return terminateRun(ctx, trx, run, {
      state: 'cancelled',
      failureKind: 'cancelled',
      message: reason ? `cancelled: ${reason}` : 'cancelled',
      source: 'run-cancel',
    });
  });
  await ctx.wakeups.publish(runWakeKey(runId));
  if (row.state === 'cancelled') ctx.hooks.afterRunCancelled?.(runId);
  return getRun(ctx, runId);
}
