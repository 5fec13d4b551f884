import type { TaskRow } from './store.js';

/**
 * A task's attempt budget. A retry (queue/retry-task.ts) starts a fresh one: the attempts made
 * before it stay (and keep their numbers), but only those since it count against maxAttempts.
 */
export const attemptsSinceRetry = (task: Pick<TaskRow, 'attempt_count' | 'retry_base'>) =>
  task.attempt_count - task.retry_base;

export const attemptsLeft = (
  task: Pick<TaskRow, 'attempt_count' | 'retry_base' | 'max_attempts'>,
) => attemptsSinceRetry(task) < task.max_attempts;

/** The same rule in SQL, for a `queue_tasks` alias. */
export const ATTEMPTS_LEFT_SQL = (alias: string) =>
  `${alias}.attempt_count - ${alias}.retry_base < ${alias}.max_attempts`;
