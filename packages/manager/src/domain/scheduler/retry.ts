import { DEFAULT_RETRYABLE_KINDS } from '@svc/contracts';
import { sql } from 'kysely';
import type { Ctx } from '../context.js';
import { refreshTask } from '../queue/refresh.js';
import { ATTEMPTS_LEFT_SQL, attemptsLeft, attemptsSinceRetry } from '../queue/budget.js';
import { changeTask, lockTask } from '../queue/store.js';
import { backoffDelay, retryPolicyOf } from './task-policy.js';

const TERMINAL_COMMANDS = ['completed', 'failed', 'blocked', 'cancelled', 'expired'];
const TERMINAL_RUNS = ['completed', 'failed', 'blocked', 'cancelled'];

/**
 * Attempts whose command or run ended but whose record still says in flight get their
 * outcome written (the same code as `queue refresh`). Outcomes are normally written when the
 * terminal status arrives; this catches any that were not (an older replica, a crash between).
 */
export async function settleEnded(ctx: Ctx, limit = 200): Promise<number> {
  const rows = await ctx.db
    .selectFrom('queue_attempts as a')
    .leftJoin('commands as c', 'c.command_id', 'a.command_id')
    .leftJoin('runs as r', 'r.run_id', 'a.run_id')
    .select('a.task_id')
    .where('a.state', 'in', ['dispatched', 'running'])
    .where((eb) =>
      eb.or([eb('c.state', 'in', TERMINAL_COMMANDS), eb('r.state', 'in', TERMINAL_RUNS)]),
    )
    .limit(limit)
    .execute();
  for (const { task_id } of rows) await refreshTask(ctx, task_id, false);
  return rows.length;
}

/**
 * Failed tasks with attempts left whose last failure is retryable go back to `queued`, to
 * start after their backoff. Which kinds are retried is the task's policy (default: infra,
 * provider availability, a lost runner); a schema, policy, auth or prompt failure never is.
 */
export async function requeueRetries(ctx: Ctx, limit = 200): Promise<number> {
  const rows = await sql<{ task_id: string }>`
    SELECT t.task_id FROM queue_tasks t
    JOIN queue_attempts a ON a.attempt_id = t.latest_attempt_id
    WHERE t.state = 'failed' AND a.state = 'failed' AND ${sql.raw(ATTEMPTS_LEFT_SQL('t'))}
      AND CASE WHEN t.retry_policy->'retryOn' IS NOT NULL
        THEN jsonb_exists(t.retry_policy->'retryOn', a.failure_kind)
        ELSE a.failure_kind = ANY(${[...DEFAULT_RETRYABLE_KINDS]}::text[]) END
    LIMIT ${limit}`.execute(ctx.db);
  let requeued = 0;
  for (const { task_id } of rows.rows) {
    const done = await ctx.db.transaction().execute(async (trx) => {
      const task = await lockTask(trx, task_id);
      if (!task || task.state !== 'failed' || !attemptsLeft(task)) return false;
      const delay = backoffDelay(
        retryPolicyOf(task, ctx.config.scheduler),
        attemptsSinceRetry(task),
      );
      await changeTask(trx, task_id, {
        state: 'queued',
        run_after: sql`now() + make_interval(secs => ${delay / 1000})`,
      });
      return true;
    });
    if (done) requeued++;
  }
  return requeued;
}
