import {
  DEFAULT_RETRYABLE_KINDS,
  NEVER_RETRYABLE_KINDS,
  ServiceError,
  type TaskScheduling,
  type TaskSubmitBody,
} from '@svc/contracts';
import type { SchedulerSettings } from '../../config.js';
import { iso } from '../../store/json.js';
import { resolveProfile } from '../runs/run-policy.js';
import type { TaskRow } from '../queue/store.js';

export interface EffectiveRetryPolicy {
  backoffMs: number;
  maxBackoffMs: number;
  retryOn: string[];
}

/** The scheduling columns of a submitted task, checked before it is stored. */
export function schedulingColumns(body: TaskSubmitBody, profile: string) {
  const never = (body.retryPolicy?.retryOn ?? []).filter((kind) =>
    (NEVER_RETRYABLE_KINDS as readonly string[]).includes(kind),
  );
  if (never.length > 0)
    throw new ServiceError(
      'schema-invalid',
      `retryPolicy.retryOn names kinds that are never retried: ${never.join(', ')}`,
      { field: 'retryPolicy.retryOn', kinds: never },
    );
  const runAfter = body.runAfter ? new Date(body.runAfter) : null;
  if (runAfter && Number.isNaN(runAfter.getTime()))
    throw new ServiceError('schema-invalid', 'runAfter is not a timestamp', { field: 'runAfter' });
  const judge = body.judge
    ? {
        prompt: body.judge.prompt,
        backendProfile: resolveProfile({ backendProfile: body.judge.backendProfile ?? profile }),
      }
    : null;
  return {
    run_after: runAfter,
    retry_policy: body.retryPolicy ? JSON.stringify(body.retryPolicy) : null,
    judge: judge ? JSON.stringify(judge) : null,
  };
}

export function retryPolicyOf(task: TaskRow, settings: SchedulerSettings): EffectiveRetryPolicy {
  const given = (task.retry_policy ?? {}) as {
    backoffMs?: number;
    maxBackoffMs?: number;
    retryOn?: string[];
  };
  return {
    backoffMs: given.backoffMs ?? settings.retry.backoffMs,
    maxBackoffMs: given.maxBackoffMs ?? settings.retry.maxBackoffMs,
    retryOn: given.retryOn ?? [...DEFAULT_RETRYABLE_KINDS],
  };
}

/**
 * Exponential backoff with jitter: the n-th retry (n from 1) waits backoff * 2^(n-1), capped,
 * times a factor in [0.8, 1.2). The jitter spreads retries of tasks that failed together (a
 * provider outage) while each task's waits still grow.
 */
export function backoffDelay(policy: EffectiveRetryPolicy, retry: number, random = Math.random) {
  const base = Math.min(policy.maxBackoffMs, policy.backoffMs * 2 ** Math.max(0, retry - 1));
  return Math.round(base * (0.8 + 0.4 * random()));
}

export function schedulingOf(task: TaskRow, settings: SchedulerSettings): TaskScheduling {
  const refusal = task.last_refusal as {
    failureKind: string;
    message: string;
    at: string;
  } | null;
  return {
    runAfter: iso(task.run_after),
    retryPolicy: retryPolicyOf(task, settings),
    judge: (task.judge as TaskScheduling['judge']) ?? null,
    retryNote: task.retry_note,
    deferrals: task.deferrals,
    lastRefusal: refusal,
  };
}
