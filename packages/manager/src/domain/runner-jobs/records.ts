import type { RunnerJob } from '@svc/contracts';
import type { Selectable } from 'kysely';
import { iso, isoRequired } from '../../store/json.js';
import type { RunnerJobsTable } from '../../store/schema.js';

export type RunnerJobRow = Selectable<RunnerJobsTable>;

export function pollingPaths(
  runId: string,
  commandId: string,
  runnerJobId: string,
): RunnerJob['polling'] {
  const base = `/api/v1/runs/${runId}`;
  return {
    command: `${base}/commands/${commandId}`,
    events: `${base}/events`,
    result: `${base}/commands/${commandId}/result`,
    runnerJob: `${base}/runner-jobs/${runnerJobId}`,
  };
}

/** Row -> record. The stored row holds summaries only; values never reach it. */
export function toRunnerJob(
  row: RunnerJobRow,
  extra: Pick<RunnerJob, 'providerSecretRef' | 'toolCredentials'> & {
    expectedWorkReady: RunnerJob['workReady'];
  },
): RunnerJob {
  const { expectedWorkReady, ...refs } = extra;
  return {
    runnerJobId: row.runner_job_id,
    runId: row.run_id,
    commandId: row.command_id,
    attemptId: row.attempt_id,
    runnerId: row.runner_id,
    jobName: row.job_name,
    namespace: row.namespace,
    launcher: row.launcher,
    logPath: row.log_path,
    podIdentity: row.pod_identity,
    phase: row.phase as RunnerJob['phase'],
    image: row.image as RunnerJob['image'],
    transientEnv: row.transient_env as RunnerJob['transientEnv'],
    ...refs,
    sessionPvc: row.session_pvc as RunnerJob['sessionPvc'],
    // What the runner reported at registration, else what its image is expected to have.
    workReady: (row.work_ready as RunnerJob['workReady']) ?? expectedWorkReady,
    polling: pollingPaths(row.run_id, row.command_id, row.runner_job_id),
    retention: row.retention ?? 'ttl',
    ttlSecondsAfterFinished: row.ttl_seconds_after_finished,
    exitCode: row.exit_code,
    terminalSummary: row.terminal_summary as RunnerJob['terminalSummary'],
    createdAt: isoRequired(row.created_at),
    startedAt: iso(row.started_at),
    finishedAt: iso(row.finished_at),
    dryRun: false,
    valuesPrinted: false,
  };
}
