import { ServiceError, type RunnerJobCreateBody, type RunnerJobPhase } from '@svc/contracts';
import type { Executor } from '../../store/runs.js';
import type { RunnerJobRow } from './records.js';

/** Phases of a runner Job that may still have a process (or pod) serving its run. */
export const LIVE_JOB_PHASES: RunnerJobPhase[] = ['pending', 'starting', 'running'];

/** The live runner Job of a command, if any. */
export async function liveJobOf(
  db: Executor,
  commandId: string,
): Promise<RunnerJobRow | undefined> {
  return db
    .selectFrom('runner_jobs')
    .selectAll()
    .where('command_id', '=', commandId)
    .where('phase', 'in', LIVE_JOB_PHASES)
    .executeTakeFirst();
}

/**
 * A create for a command whose runner Job is live: the same request (same payload, no other
 * idempotency key) is answered that job; any other is refused, naming it.
 */
export function answerLive(
  live: RunnerJobRow,
  body: RunnerJobCreateBody,
  hash: string,
): RunnerJobRow {
  const sameKey = !body.idempotencyKey || body.idempotencyKey === live.idempotency_key;
  if (live.payload_hash === hash && sameKey) return live;
  throw new ServiceError(
    'state-conflict',
    `command ${live.command_id} already has live runner job ${live.job_name} (${live.phase}); one runner serves a command at a time`,
    {
      runnerJobId: live.runner_job_id,
      jobName: live.job_name,
      attemptId: live.attempt_id,
      phase: live.phase,
    },
  );
}
