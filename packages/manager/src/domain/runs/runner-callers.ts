import { TERMINAL_JOB_PHASES, TERMINAL_RUN_STATES } from '@svc/contracts';
import type { Executor } from '../../store/runs.js';
import { tokenHash } from '../caller-tokens.js';
import { PREPARED } from '../../store/prepared.js';

/** A runner Job, identified by its own token. */
export interface RunnerCaller {
  kind: 'runner';
  runnerJobId: string;
  runnerId: string;
  runId: string;
  /** The session of the job's run, if any (its storage summary is the runner's to report). */
  sessionId: string | null;
}

/** A runner caller and the run its request's path is about. */
export interface RunnerCallerLookup {
  caller: RunnerCaller;
  /**
   * `:runId` itself, or a `:commandId`'s run; null for an unknown command (nobody's run, which
   * a runner may not touch); undefined when the path names neither (the body must, then).
   */
  pathRunId: string | null | undefined;
}

/**
 * The live runner Job holding this token: one indexed lookup by the token's digest. A token is
 * dead once its job reached a terminal phase or its run a terminal state. The run a path's
 * command belongs to is read in the same statement: a runner's ack and status reports pay
 * one round trip for authentication, not two.
 */
export async function findRunnerCaller(
  db: Executor,
  token: string,
  params: Record<string, unknown>,
): Promise<RunnerCallerLookup | null> {
  const commandId = typeof params['runId'] === 'string' ? undefined : params['commandId'];
  const row = await db
    .selectFrom('runner_jobs as j')
    .innerJoin('runs as r', 'r.run_id', 'j.run_id')
    .select(['j.runner_job_id', 'j.runner_id', 'j.run_id', 'j.phase', 'r.state', 'r.session_id'])
    .select((eb) =>
      eb
        .selectFrom('commands as c')
        .select('c.run_id')
        .where('c.command_id', '=', typeof commandId === 'string' ? commandId : '')
        .as('command_run_id'),
    )
    .where('j.token_hash', '=', tokenHash(token))
    .modifyEnd(PREPARED)
    .executeTakeFirst();
  if (!row) return null;
  if ((TERMINAL_JOB_PHASES as readonly string[]).includes(row.phase)) return null;
  if ((TERMINAL_RUN_STATES as readonly string[]).includes(row.state)) return null;
  return {
    caller: {
      kind: 'runner',
      runnerJobId: row.runner_job_id,
      runnerId: row.runner_id,
      runId: row.run_id,
      sessionId: row.session_id,
    },
    pathRunId:
      typeof params['runId'] === 'string'
        ? params['runId']
        : typeof commandId === 'string'
          ? (row.command_run_id ?? null)
          : undefined,
  };
}
