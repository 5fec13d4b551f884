import { TERMINAL_JOB_PHASES, TERMINAL_RUN_STATES } from '@svc/contracts';
import type { Executor } from '../store/runs.js';
import { tokenHash } from './caller-tokens.js';

/** A runner Job, identified by its own token. */
export interface RunnerCaller {
  kind: 'runner';
  runnerJobId: string;
  runnerId: string;
  runId: string;
  /** The session of the job's run, if any (its storage summary is the runner's to report). */
  sessionId: string | null;
}

/**
 * The live runner Job holding this token: one indexed lookup by the token's digest. A token is
 * dead once its job reached a terminal phase or its run a terminal state.
 */
export async function findRunnerCaller(db: Executor, token: string): Promise<RunnerCaller | null> {
  const row = await db
    .selectFrom('runner_jobs as j')
    .innerJoin('runs as r', 'r.run_id', 'j.run_id')
    .select(['j.runner_job_id', 'j.runner_id', 'j.run_id', 'j.phase', 'r.state', 'r.session_id'])
    .where('j.token_hash', '=', tokenHash(token))
    .executeTakeFirst();
  if (!row) return null;
  if ((TERMINAL_JOB_PHASES as readonly string[]).includes(row.phase)) return null;
  if ((TERMINAL_RUN_STATES as readonly string[]).includes(row.state)) return null;
  return {
    kind: 'runner',
    runnerJobId: row.runner_job_id,
    runnerId: row.runner_id,
    runId: row.run_id,
    sessionId: row.session_id,
  };
}

/**
 * The run a request's path is about: `:runId` itself, a command's run, or the run a session's
 * storage report comes from. `undefined` when the path names none (the body must, then); an
 * unknown command or session is nobody's run (null), which a runner may not touch.
 */
export async function runOfPath(
  db: Executor,
  params: Record<string, unknown>,
): Promise<string | null | undefined> {
  if (typeof params['runId'] === 'string') return params['runId'];
  if (typeof params['commandId'] === 'string') {
    const row = await db
      .selectFrom('commands')
      .select('run_id')
      .where('command_id', '=', params['commandId'])
      .executeTakeFirst();
    return row?.run_id ?? null;
  }
  return undefined;
}
