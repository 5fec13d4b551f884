import type { V1Job, V1Pod } from '@kubernetes/client-node';
import { TERMINAL_JOB_PHASES, type RunnerJobPhase } from '@svc/contracts';

export interface ObservedJob {
  phase: RunnerJobPhase;
  /** The condition that made it terminal (Complete, Failed) with its reason and message. */
  condition: { type: string; reason: string | null; message: string | null } | null;
}

const ORDER: readonly RunnerJobPhase[] = ['pending', 'starting', 'running'];

/** Phases only move forward; a terminal phase is final. */
export function isAdvance(from: RunnerJobPhase, to: RunnerJobPhase): boolean {
  if (isTerminal(from)) return false;
  if (isTerminal(to)) return true;
  return ORDER.indexOf(to) > ORDER.indexOf(from);
}

export const isTerminal = (phase: RunnerJobPhase) => TERMINAL_JOB_PHASES.includes(phase);

/**
 * A Job's phase from its status, as the Job controller writes it: a true Complete or
 * SuccessCriteriaMet condition is success, Failed or FailureTarget is failure; otherwise an
 * active pod that is ready is running, and anything else is still starting (the Job exists,
 * its pod is being scheduled, pulled or mounted).
 */
export function observeJob(job: V1Job): ObservedJob {
  const conditions = (job.status?.conditions ?? []).filter((c) => c.status === 'True');
  // The final condition (Complete, Failed) names the outcome better than its *Target forerunner.
  const find = (...types: string[]) =>
    types.map((t) => conditions.find((c) => c.type === t)).find((c) => c !== undefined);
  const failed = find('Failed', 'FailureTarget');
  if (failed) return { phase: 'failed', condition: describe(failed) };
  const complete = find('Complete', 'SuccessCriteriaMet');
  if (complete) return { phase: 'succeeded', condition: describe(complete) };
  const active = job.status?.active ?? 0;
  // `ready` is absent on API servers older than 1.24; an active pod then counts as running.
  const ready = job.status?.ready ?? active;
  if (active > 0 && ready > 0) return { phase: 'running', condition: null };
  return { phase: 'starting', condition: null };
}

function describe(condition: { type: string; reason?: string; message?: string }) {
  return {
    type: condition.type,
    reason: condition.reason ?? null,
    message: condition.message ?? null,
  };
}

/** The runner container's exit code and the pod's name, from the Job's pods. */
export function runnerExit(pods: readonly V1Pod[]): {
  exitCode: number | null;
  pod: string | null;
} {
  for (const pod of pods) {
    const status = pod.status?.containerStatuses?.find((c) => c.name === 'runner');
    const exitCode = status?.state?.terminated?.exitCode;
    if (exitCode !== undefined) return { exitCode, pod: pod.metadata?.name ?? null };
  }
  return { exitCode: null, pod: pods[0]?.metadata?.name ?? null };
}
