import { isServiceError } from '@svc/contracts';
import { sql } from 'kysely';
import type { SchedulerSettings } from '../../config.js';
import { runWakeKey } from '../../store/wakeups.js';
import { finishCommand, getCommandRow, isTerminalCommand } from '../runs/commands.js';
import type { Ctx } from '../context.js';
import { createRunnerJob, type RunnerJobDeps } from '../runner-jobs/runner-jobs.js';
import { lockRunOrThrow } from '../runs/runs.js';

interface LostRun {
  run_id: string;
  session_id: string | null;
  command_id: string;
  command_state: string;
  replacements: number;
  last_finished_at: Date | null;
}

/**
 * Runs whose lease expired with a command unfinished and no runner Job alive: the runner was
 * lost (killed, its node gone). Each gets a replacement runner Job, at most `maxPerRun`, the
 * n-th after a backoff of n times the base. The replacement claims as a replacement and
 * continues the same session, thread and volume claim (spec/3). A run with no session has no
 * stored thread to resume, so its started command fails `thread-resume-failed` instead; a run
 * out of replacements fails its commands `infra-failed` (retryable by the queue).
 */
export async function replaceLostRunners(
  ctx: Ctx,
  deps: RunnerJobDeps,
  settings: SchedulerSettings,
): Promise<number> {
  const lost = await sql<LostRun>`
    SELECT DISTINCT ON (r.run_id) r.run_id, r.session_id, c.command_id, c.state AS command_state,
      (SELECT count(*)::int FROM runner_jobs j WHERE j.run_id = r.run_id AND j.replacement) AS replacements,
      (SELECT max(j.finished_at) FROM runner_jobs j WHERE j.run_id = r.run_id) AS last_finished_at
    FROM runs r
    JOIN commands c ON c.run_id = r.run_id
    WHERE r.state IN ('claimed', 'running') AND r.lease_expires_at < now()
      AND c.state IN ('accepted', 'delivered', 'confirmed') AND c.type IN ('turn', 'resume')
      AND NOT EXISTS (
        SELECT 1 FROM runner_jobs j
        WHERE j.run_id = r.run_id AND j.phase IN ('pending', 'starting', 'running'))
    ORDER BY r.run_id, c.seq
    LIMIT 50`.execute(ctx.db);
  let replaced = 0;
  for (const run of lost.rows) {
    if (!run.session_id && run.command_state === 'confirmed') {
      await failLost(
        ctx,
        run,
        'thread-resume-failed',
        'the runner was lost mid-turn and the run has no session to resume its thread from',
      );
      continue;
    }
    if (run.replacements >= settings.replacement.maxPerRun) {
      await failLost(
        ctx,
        run,
        'infra-failed',
        `the runner was lost and ${run.replacements} replacement runner jobs did not finish the command`,
      );
      continue;
    }
    const waitMs = settings.replacement.backoffMs * run.replacements;
    if (run.last_finished_at && Date.now() - new Date(run.last_finished_at).getTime() < waitMs)
      continue;
    try {
      const created = await createRunnerJob(ctx, deps, run.run_id, {
        commandId: run.command_id,
        // One key per replacement number: replicas racing for the same run make one Job.
        idempotencyKey: `replacement-${run.replacements + 1}`,
      });
      if (created.created) {
        await ctx.db
          .updateTable('runner_jobs')
          .set({ replacement: true } as never)
          .where('runner_job_id', '=', created.job.runnerJobId)
          .execute();
        replaced++;
        ctx.logger.info(
          {
            runId: run.run_id,
            commandId: run.command_id,
            jobName: created.job.jobName,
            replacement: run.replacements + 1,
          },
          'replacement runner job started for a lost runner',
        );
      }
    } catch (error) {
      ctx.logger.warn(
        {
          runId: run.run_id,
          failureKind: isServiceError(error) ? error.failureKind : 'infra-failed',
          err: String(error),
        },
        'replacement runner job could not be started',
      );
    }
  }
  return replaced;
}

async function failLost(ctx: Ctx, lost: LostRun, failureKind: string, message: string) {
  await ctx.db.transaction().execute(async (trx) => {
    const run = await lockRunOrThrow(trx, lost.run_id);
    const command = await getCommandRow(trx, lost.command_id);
    if (isTerminalCommand(command.state)) return;
    await finishCommand(ctx, trx, run, command, {
      state: 'failed',
      failureKind,
      message,
      via: 'scheduler',
    });
  });
  await ctx.wakeups.publish(runWakeKey(lost.run_id));
}
