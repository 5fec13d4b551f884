import { sql } from 'kysely';
import { OUTCOME_FAILURE_KINDS, ServiceError, type Run, type RunStatusBody } from '@svc/contracts';
import { findCommand, nonTerminalCommands } from '../../store/commands.js';
import { closingOutcome } from './run-outcome.js';
import { runWakeKey } from '../../store/wakeups.js';
import type { Ctx } from '../context.js';
import { assertLeaseOwner } from './lease-checks.js';
import { getRun, isTerminalRun, lockRunOrThrow, terminateRun } from './runs.js';

/**
 * The runner's run-level report. `running` marks progress; a terminal state ends the run with
 * its terminal_status event. `completed` is refused while commands are unfinished: the runner
 * must serve them (or report a failure) before it may close the run. `completed` closes the run
 * in its last turn's outcome (run-outcome.ts): a run whose last turn failed ends failed.
 */
export async function reportRunStatus(
  ctx: Ctx,
  runId: string,
  body: RunStatusBody,
  leaseToken: string | undefined,
): Promise<Run> {
  const row = await ctx.db.transaction().execute(async (trx) => {
    const run = await lockRunOrThrow(trx, runId);
    if (isTerminalRun(run.state)) return run;
    assertLeaseOwner(run, body.runnerId, leaseToken);
    if (body.state === 'running') {
      return trx
        .updateTable('runs')
        .set({ state: 'running', updated_at: sql`now()` } as never)
        .where('run_id', '=', runId)
        .returningAll()
        .executeTakeFirstOrThrow();
    }
    if (body.state === 'completed') {
      const open = await nonTerminalCommands(trx, runId);
      if (open.length > 0) {
        throw new ServiceError(
          'state-conflict',
          `run ${runId} still has unfinished commands; serve them before completing`,
          { commandIds: open.map((c) => c.command_id) },
        );
      }
      if (body.failureKind)
        throw new ServiceError('schema-invalid', 'a completed run carries no failureKind');
      // A runner closes its run when no more work comes; the run ends as its last turn did.
      const ended = closingOutcome(
        run.latest_command_id ? await findCommand(trx, run.latest_command_id) : undefined,
        body.message ?? null,
      );
      if (ended)
        return terminateRun(ctx, trx, run, {
          ...ended,
          source: 'runner-closed-after-last-turn',
        });
    }
    const failureKind =
      body.state === 'completed'
        ? null
        : (body.failureKind ?? (body.state === 'cancelled' ? 'cancelled' : 'backend-failed'));
    if (failureKind && !(OUTCOME_FAILURE_KINDS as readonly string[]).includes(failureKind)) {
      throw new ServiceError('schema-invalid', `failureKind ${failureKind} is not an outcome kind`);
    }
    return terminateRun(ctx, trx, run, {
      state: body.state,
      failureKind,
      message: body.message ?? null,
      ...(body.details ? { details: body.details } : {}),
      source: 'runner',
    });
  });
  if (isTerminalRun(row.state)) await ctx.wakeups.publish(runWakeKey(runId));
  return getRun(ctx, runId);
}
