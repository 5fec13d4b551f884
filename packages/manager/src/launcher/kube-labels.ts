import { sha256Hex } from '@svc/contracts';

/** Labels every object of the service carries; lookups select on these, never on names. */
export const LABELS = {
  name: 'app.kubernetes.io/name',
  component: 'app.kubernetes.io/component',
  partOf: 'app.kubernetes.io/part-of',
  managedBy: 'app.kubernetes.io/managed-by',
  managed: 'svc.dev/managed',
  runId: 'svc.dev/run-id',
  commandId: 'svc.dev/command-id',
  attemptId: 'svc.dev/attempt-id',
  runnerJobId: 'svc.dev/runner-job-id',
  jobName: 'svc.dev/job-name',
  profile: 'svc.dev/profile',
  sessionId: 'svc.dev/session-id',
} as const;

export const RUNNER_APP = 'svc-runner';
export const MANAGER_NAME = 'svc-run-manager';
export const PART_OF = 'agent-run-service';

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/**
 * An id as a label value. Ids are usually valid label values already; a longer caller-chosen
 * id is replaced by a stable digest so the label still selects it (values are at most 63).
 */
export function labelValue(id: string): string {
  if (id.length <= 63 && LABEL_VALUE.test(id)) return id;
  return `sha256-${sha256Hex(id).slice(0, 56)}`;
}

/** The labels that find one runner Job (and its pod and per-job Secret). */
export function runnerSelector(): string {
  return `${LABELS.name}=${RUNNER_APP},${LABELS.managedBy}=${MANAGER_NAME}`;
}
