/**
 * Defaults of a runner pod's size and lifetime on Kubernetes, shared by the configuration
 * (SVC_RUNNER_* variables override them) and the Job renderer.
 */
export const RUNNER_POD_DEFAULTS = {
  requests: { cpu: '250m', memory: '512Mi', 'ephemeral-storage': '1Gi' },
  // No CPU limit by default: throttling a build or test run costs more than sharing a node.
  limits: { memory: '4Gi', 'ephemeral-storage': '10Gi' },
  /**
   * The run's timeout is an idle budget, not a wall-clock limit (spec/2), so a Job that keeps
   * working may outlive it; the Job's hard deadline is this many budgets, plus the start-up
   * allowance below.
   */
  deadlineFactor: 6,
  startupAllowanceSeconds: 600,
} as const;

export interface RunnerPodSettings {
  resources: { requests: Record<string, string>; limits: Record<string, string> };
  deadlineFactor: number;
}

/** activeDeadlineSeconds of a runner Job for a run with this idle budget. */
export function jobDeadlineSeconds(timeoutMs: number, factor: number): number {
  return Math.ceil((timeoutMs * factor) / 1000) + RUNNER_POD_DEFAULTS.startupAllowanceSeconds;
}
