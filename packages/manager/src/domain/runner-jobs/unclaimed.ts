import { sql } from 'kysely';
import { EVENT_NAMES } from '@svc/contracts';
import { runWakeKey } from '../../store/wakeups.js';
import { finishCommand, getCommandRow, isTerminalCommand } from '../runs/commands.js';
import type { Ctx } from '../context.js';
import { isTerminalRun, lockRunOrThrow, terminateRun } from '../runs/runs.js';
import type { RunnerJobRow } from './records.js';

/**
 * A runner Job that ended before its runner claimed the run will never serve its command: the
 * command fails at once as `infra-failed` with the launcher's reason, not after the command
 * expiry. A run nobody ever claimed fails with it, since no runner is coming. A job whose
 * runner did claim belongs to the lease rules (expiry, replacement), and a command another live
 * job of the run may still serve is left alone. Returns whether it failed anything.
 */
export async function failUnclaimedCommand(ctx: Ctx, job: RunnerJobRow): Promise<boolean> {
  const [claimed, sibling] = await Promise.all([
    ctx.db
      .selectFrom('events')
      .select('seq')
      .where('run_id', '=', job.run_id)
      .where('name', '=', EVENT_NAMES.claimed)
      .where(sql<string>`data->>'runnerId'`, '=', job.runner_id)
      .executeTakeFirst(),
    ctx.db
      .selectFrom('runner_jobs')
      .select('runner_job_id')
      .where('run_id', '=', job.run_id)
      .where('runner_job_id', '<>', job.runner_job_id)
      .where('phase', 'in', ['pending', 'starting', 'running'])
      .executeTakeFirst(),
  ]);
  if (claimed || sibling) return false;
  const summary = (job.terminal_summary ?? {}) as Record<string, unknown>;
  const message = `runner job ${job.job_name} ended (${job.phase}) before claiming its run: ${describe(summary)}`;
  const details = {
    runnerJobId: job.runner_job_id,
    jobName: job.job_name,
    phase: job.phase,
    launcher: summary,
  };
  const failed = await ctx.db.transaction().execute(async (trx) => {
    const run = await lockRunOrThrow(trx, job.run_id);
    if (isTerminalRun(run.state) || run.lease_owner === job.runner_id) return false;
    const command = await getCommandRow(trx, job.command_id);
    if (isTerminalCommand(command.state) || command.state === 'confirmed') return false;
    if (run.state === 'pending')
      await terminateRun(ctx, trx, run, {
        state: 'failed',
        failureKind: 'infra-failed',
        message,
        details,
        source: 'runner-job-ended',
      });
    else
      await finishCommand(ctx, trx, run, command, {
        state: 'failed',
        failureKind: 'infra-failed',
        message,
        details,
        via: 'runner-job-ended',
      });
    return true;
  });
  if (failed) {
    await ctx.wakeups.publish(runWakeKey(job.run_id));
    ctx.logger.warn(
      { runId: job.run_id, jobName: job.job_name },
      'runner job ended before claiming',
    );
  }
  return failed;
}

const LABELS = [
  ['reason', 'reason'],
  ['message', 'message'],
  ['exitCode', 'exit code'],
  ['signal', 'signal'],
] as const;

/** The launcher's reason in one line: a pod condition, an exit code or signal. */
function describe(summary: Record<string, unknown>): string {
  const parts: string[] = [];
  for (const [key, label] of LABELS) {
    const value = summary[key];
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean')
      parts.push(`${label} ${String(value)}`);
  }
  const condition = summary['condition'] as Record<string, unknown> | null | undefined;
  if (condition && typeof condition === 'object') parts.push(describe(condition));
  return parts.join(', ') || 'no reason reported';
}
