import type {
  ImageSummary,
  RunnerJobPhase,
  SecretRefRecord,
  SessionPvcSummary,
  ToolCredentialRecord,
  TransientEnvSummary,
} from '@svc/contracts';

/**
 * Everything a launcher needs to start one runner Job. Values appear only in `transientEnv`
 * and `managerToken`; a launcher puts them into a per-job Secret (Kubernetes) or a per-job
 * file readable only by the runner (local), never into a record, manifest or log.
 */
export interface RunnerJobSpec {
  runnerJobId: string;
  jobName: string;
  namespace: string;
  runId: string;
  commandId: string;
  attemptId: string;
  runnerId: string;
  image: ImageSummary;
  managerUrl: string;
  managerToken: string | null;
  profile: string;
  providerSecret: SecretRefRecord;
  toolCredentials: readonly ToolCredentialRecord[];
  /** The fetch credential of the run's git bundle (`resourceBundleRef.credentialRef`), if any. */
  bundleCredential: SecretRefRecord | null;
  transientEnv: ReadonlyArray<{ name: string; value: string }>;
  transientEnvSummary: TransientEnvSummary;
  sessionPvc: SessionPvcSummary | null;
  ttlSecondsAfterFinished: number;
  /** The run's idle budget (executionPolicy.timeoutMs); bounds the Job's wall-clock deadline. */
  timeoutMs: number;
  /** Non-secret runner settings (idle exit, poll wait, ids), passed as plain environment. */
  runnerEnv: Readonly<Record<string, string>>;
}

export interface LaunchResult {
  phase: RunnerJobPhase;
  logPath: string | null;
  podIdentity: string | null;
}

export interface PhaseUpdate {
  jobName: string;
  phase: RunnerJobPhase;
  exitCode?: number | null;
  summary?: Record<string, unknown>;
}

export type PhaseListener = (update: PhaseUpdate) => Promise<void>;

export interface ActiveJob {
  jobName: string;
  phase: RunnerJobPhase;
  podIdentity: string | null;
  managerInstance: string | null;
}

export interface Launcher {
  readonly kind: 'local' | 'kubernetes';
  readonly namespace: string;
  /** The Job as it would be created, with names, keys and hashes in place of values. */
  render(spec: RunnerJobSpec): Record<string, unknown>;
  /**
   * Start the runner Job. With `ready` (the session volume the Job mounts, still being
   * created), the Job itself is created only once `ready` has resolved; the launcher may
   * prepare the rest meanwhile. A rejected `ready` rejects the launch with its own reason,
   * nothing the launch made left behind.
   */
  launch(spec: RunnerJobSpec, ready?: Promise<void>): Promise<LaunchResult>;
  /**
   * The transientEnv a live job was given, read back from where the launcher keeps it (the
   * per-job Secret, the job's secret directory): a restarted manager masks those values again.
   * Empty when the job or its secret is gone.
   */
  transientEnvOf(jobName: string): Promise<Array<{ name: string; value: string }>>;
  /** Stop a job: SIGTERM then SIGKILL to its process group, or delete the Job. */
  cancel(jobName: string, graceMs?: number): Promise<void>;
  /**
   * Begin reporting phase changes; `active` are jobs the store believes alive, so the
   * launcher can find orphans (local: processes of a previous manager) and report them.
   */
  start(listener: PhaseListener, active: readonly ActiveJob[]): Promise<void>;
  close(): Promise<void>;
  /** What isolates one Job from another and from the host, for /health (local launcher). */
  isolationReport?(): Record<string, unknown>;
}
