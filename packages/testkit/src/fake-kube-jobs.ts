import { randomBytes, randomUUID } from 'node:crypto';
import { asRecord, at, type KubeObject } from './fake-kube-objects.js';

/** What the Job controller of the fake can be told to make of a Job. */
export type JobState = 'starting' | 'running' | 'succeeded' | 'failed';

export interface JobStateDetail {
  exitCode?: number;
  /** Reason and message of the Failed condition (default BackoffLimitExceeded). */
  reason?: string;
  message?: string;
}

const timestamp = () => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

/** The Job status the real Job controller writes for a state (conditions as in 1.31+). */
export function jobStatus(
  job: KubeObject,
  state: JobState,
  detail: JobStateDetail,
): Record<string, unknown> {
  const now = timestamp();
  const started = at(job.status, 'startTime');
  const startTime = typeof started === 'string' ? started : now;
  const condition = (type: string, reason: string, message = '') => ({
    type,
    status: 'True',
    reason,
    message,
    lastProbeTime: now,
    lastTransitionTime: now,
  });
  if (state === 'starting') return { startTime, active: 1, ready: 0 };
  if (state === 'running') return { startTime, active: 1, ready: 1 };
  if (state === 'succeeded')
    return {
      startTime,
      completionTime: now,
      succeeded: 1,
      ready: 0,
      conditions: [
        condition('SuccessCriteriaMet', 'CompletionsReached'),
        condition('Complete', 'CompletionsReached'),
      ],
    };
  const reason = detail.reason ?? 'BackoffLimitExceeded';
  const message = detail.message ?? 'Job has reached the specified backoff limit';
  return {
    startTime,
    failed: 1,
    ready: 0,
    conditions: [condition('FailureTarget', reason, message), condition('Failed', reason, message)],
  };
}

/** The Job's one pod (created on first use), with phase and container state to match. */
export function jobPod(
  job: KubeObject,
  existing: KubeObject | undefined,
  state: JobState,
  exitCode: number,
): KubeObject {
  const now = timestamp();
  const pod: KubeObject = existing ?? {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `${job.metadata.name}-${randomBytes(3).toString('hex').slice(0, 5)}`,
      namespace: job.metadata.namespace ?? 'default',
      uid: randomUUID(),
      labels: {
        ...(asRecord(at(job.spec, 'template', 'metadata', 'labels')) as Record<string, string>),
      },
      ownerReferences: [
        {
          apiVersion: 'batch/v1',
          kind: 'Job',
          name: job.metadata.name,
          uid: job.metadata.uid ?? '',
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
      creationTimestamp: now,
    },
    spec: structuredClone(asRecord(at(job.spec, 'template', 'spec'))),
  };
  const first = at(pod.spec, 'containers', '0', 'name');
  const containerName = typeof first === 'string' ? first : 'runner';
  const containerState =
    state === 'starting'
      ? { waiting: { reason: 'ContainerCreating' } }
      : state === 'running'
        ? { running: { startedAt: now } }
        : {
            terminated: {
              exitCode,
              reason: exitCode === 0 ? 'Completed' : 'Error',
              startedAt: now,
              finishedAt: now,
            },
          };
  const phases = {
    starting: 'Pending',
    running: 'Running',
    succeeded: 'Succeeded',
    failed: 'Failed',
  };
  pod.status = {
    phase: phases[state],
    containerStatuses: [
      { name: containerName, ready: state === 'running', restartCount: 0, state: containerState },
    ],
  };
  return pod;
}
