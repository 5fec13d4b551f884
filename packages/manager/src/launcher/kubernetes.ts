import type { V1Job, V1Secret } from '@kubernetes/client-node';
import { sha256Hex, type RunnerJobPhase } from '@svc/contracts';
import type { Logger } from '../logging.js';
import { isStatus, kubeFailure, type KubeApis } from './kube-api.js';
import { JobFeed, type JobChange } from './kube-job-feed.js';
import { buildRunnerJob, jobSecretName, type JobManifestOptions } from './kube-job-manifest.js';
import { isAdvance, isTerminal, observeJob, runnerExit } from './kube-job-status.js';
import { LABELS, MANAGER_NAME, runnerSelector } from './kube-labels.js';
import { parseTransientEnv, TRANSIENT_ENV_KEY } from './transient-env-file.js';
import { RUNNER_POD_DEFAULTS, type RunnerPodSettings } from './runner-pod-defaults.js';
import type {
  ActiveJob,
  LaunchResult,
  Launcher,
  PhaseListener,
  PhaseUpdate,
  RunnerJobSpec,
} from './types.js';

const SWEEP_MIN_AGE_MS = 10 * 60_000;
/**
 * A Job this process did not launch is followed once it is this old: its own manager reports
 * it until then, and a report racing a launch would overtake the launch's own record.
 */
const ADOPT_MIN_AGE_MS = 60_000;
const DEFAULT_RESYNC_MS = 5 * 60_000;

export interface KubernetesLauncherOptions {
  apis: KubeApis;
  namespace: string;
  /** Becomes the pod's termination grace period. */
  killGraceMs: number;
  /**
   * How long to wait before listing again when the API is unavailable or refuses to watch
   * (SVC_KUBE_POLL_INTERVAL_MS): then Job status is polled at this interval.
   */
  pollIntervalMs: number;
  /** A full list this often even while the watch is healthy (SVC_KUBE_RESYNC_INTERVAL_MS). */
  resyncIntervalMs?: number;
  /** Runner pod resources and deadline factor (config); the defaults when absent. */
  runnerPod?: RunnerPodSettings;
  logger: Logger;
}

/**
 * Runner Jobs as Kubernetes batch/v1 Jobs. Values (transientEnv, the manager token) go only
 * into a per-job Secret `<jobName>-env`, owned by the Job so the garbage collector removes it
 * with the Job; the Job manifest, its labels and its environment carry names and paths only.
 * Phases are read by list-then-watch of the runner Jobs of the namespace (JobFeed): every
 * replica sees every change as it happens, and the API server is listed only at start, after a
 * broken watch and at the resync interval.
 */
export class KubernetesLauncher implements Launcher {
  readonly kind = 'kubernetes' as const;
  readonly namespace: string;
  #listener: PhaseListener = () => Promise.resolve();
  /** Jobs this process follows, with the last phase it reported. */
  readonly #tracked = new Map<string, RunnerJobPhase>();
  /** Jobs being deleted by `cancel`: their disappearance is not a failure. */
  readonly #cancelling = new Set<string>();
  /** Jobs being created by `launch`: followed once `launch` has returned. */
  readonly #launching = new Set<string>();
  /** The latest state of every runner Job seen (list or watch), by name. */
  readonly #seen = new Map<string, V1Job>();
  readonly #feed: JobFeed;
  /** Status changes are handled one at a time, in the order they arrived. */
  #work: Promise<void> = Promise.resolve();

  constructor(private readonly options: KubernetesLauncherOptions) {
    this.namespace = options.namespace;
    this.#feed = new JobFeed({
      apis: options.apis,
      namespace: options.namespace,
      resyncMs: options.resyncIntervalMs ?? DEFAULT_RESYNC_MS,
      retryMs: options.pollIntervalMs,
      logger: options.logger,
    });
  }

  get #manifest(): JobManifestOptions {
    return {
      namespace: this.namespace,
      killGraceMs: this.options.killGraceMs,
      runnerPod: this.options.runnerPod ?? {
        resources: RUNNER_POD_DEFAULTS,
        deadlineFactor: RUNNER_POD_DEFAULTS.deadlineFactor,
      },
    };
  }

  render(spec: RunnerJobSpec): Record<string, unknown> {
    const { job, secret, secretData } = buildRunnerJob(spec, this.#manifest);
    return {
      kind: 'KubernetesRunnerJob',
      namespace: this.namespace,
      job,
      secret,
      secretData: Object.entries(secretData).map(([key, value]) => ({
        key,
        sha256: sha256Hex(value),
        bytes: value.length,
      })),
      transientEnv: spec.transientEnvSummary,
      valuesPrinted: false,
    };
  }

  async launch(spec: RunnerJobSpec, ready?: Promise<void>): Promise<LaunchResult> {
    const { job, secret, secretData } = buildRunnerJob(spec, this.#manifest);
    const body: V1Secret = {
      ...secret,
      data: Object.fromEntries(
        Object.entries(secretData).map(([key, value]) => [key, value.toString('base64')]),
      ),
    };
    this.#launching.add(spec.jobName);
    try {
      return await this.#create(spec, job, body, ready);
    } finally {
      this.#launching.delete(spec.jobName);
    }
  }

  async #create(
    spec: RunnerJobSpec,
    job: V1Job,
    body: V1Secret,
    ready: Promise<void> | undefined,
  ): Promise<LaunchResult> {
    const { core, batch } = this.options.apis;
    const namespace = this.namespace;
    const secretName = jobSecretName(spec.jobName);
    // The Secret before the Job: the pod mounts it, and the kubelet would only retry until it
    // exists. It is created while the session volume still is (one API round trip, not two).
    const [secret, volume] = await Promise.allSettled([
      core.createNamespacedSecret({ namespace, body }),
      ready,
    ]);
    if (volume.status === 'rejected') {
      if (secret.status === 'fulfilled')
        await core.deleteNamespacedSecret({ name: secretName, namespace }).catch(() => undefined);
      throw volume.reason;
    }
    if (secret.status === 'rejected')
      throw kubeFailure(secret.reason, `create Secret ${secretName}`);
    let created: V1Job;
    try {
      created = await batch.createNamespacedJob({ namespace, body: job });
    } catch (error) {
      await core.deleteNamespacedSecret({ name: secretName, namespace }).catch(() => undefined);
      throw kubeFailure(error, `create Job ${spec.jobName}`);
    }
    const uid = created.metadata?.uid ?? '';
    await core
      .patchNamespacedSecret({
        name: secretName,
        namespace,
        body: [
          {
            op: 'add',
            path: '/metadata/ownerReferences',
            value: [{ apiVersion: 'batch/v1', kind: 'Job', name: spec.jobName, uid }],
          },
        ],
      })
      .catch((error: unknown) =>
        // Its labels still name the job; the start-up sweep removes it once the Job is gone.
        this.options.logger.warn(
          { jobName: spec.jobName, err: kubeFailure(error, 'own Secret').message },
          'the per-job Secret could not be tied to its Job',
        ),
      );
    this.#tracked.set(spec.jobName, 'starting');
    // A change the watch delivered while the launch was still under way is not lost.
    const seen = this.#seen.get(spec.jobName);
    if (seen) void this.#serial(() => this.#follow(spec.jobName, seen));
    return {
      phase: 'starting',
      logPath: `kubernetes:${namespace}/job/${spec.jobName}`,
      podIdentity: `kubernetes:${namespace}/job/${spec.jobName}#${uid}`,
    };
  }

  async transientEnvOf(jobName: string): Promise<Array<{ name: string; value: string }>> {
    const name = jobSecretName(jobName);
    try {
      const secret = await this.options.apis.core.readNamespacedSecret({
        name,
        namespace: this.namespace,
      });
      return parseTransientEnv(secret.data?.[TRANSIENT_ENV_KEY], 'base64');
    } catch (error) {
      if (isStatus(error, 404)) return [];
      throw kubeFailure(error, `read Secret ${name}`);
    }
  }

  /** Delete the Job; its pod gets the template's termination grace period. */
  async cancel(jobName: string): Promise<void> {
    let existed = true;
    this.#cancelling.add(jobName);
    try {
      await this.options.apis.batch.deleteNamespacedJob({
        name: jobName,
        namespace: this.namespace,
        propagationPolicy: 'Background',
      });
    } catch (error) {
      if (!isStatus(error, 404)) {
        this.#cancelling.delete(jobName);
        throw kubeFailure(error, `delete Job ${jobName}`);
      }
      existed = false;
    }
    this.#tracked.delete(jobName);
    try {
      await this.#report({
        jobName,
        phase: 'cancelled',
        exitCode: null,
        summary: { reason: 'cancelled', jobDeleted: existed },
      });
    } finally {
      this.#cancelling.delete(jobName);
    }
  }

  /** The first list runs in the background: an unreachable API server must not hold startup. */
  start(listener: PhaseListener, active: readonly ActiveJob[]): Promise<void> {
    this.#listener = listener;
    for (const job of active) this.#tracked.set(job.jobName, job.phase);
    this.#feed.start(
      {
        snapshot: (jobs) => void this.#serial(() => this.#snapshot(jobs)),
        change: (type, job) => void this.#serial(() => this.#change(type, job)),
      },
      () => this.#serial(() => this.#sweepSecrets()),
    );
    return Promise.resolve();
  }

  async close(): Promise<void> {
    // Jobs outlive the manager in a cluster; only following their status stops.
    await this.#feed.close();
    await this.#work;
  }

  #serial(task: () => Promise<void>): Promise<void> {
    this.#work = this.#work
      .then(task)
      .catch((error: unknown) =>
        this.options.logger.warn({ err: String(error) }, 'following runner Job status failed'),
      );
    return this.#work;
  }

  /** A full list: adopt live Jobs of other replicas, report phase advances of followed Jobs. */
  async #snapshot(jobs: readonly V1Job[]): Promise<void> {
    this.#seen.clear();
    for (const job of jobs) this.#seen.set(job.metadata?.name ?? '', job);
    for (const [name, job] of this.#seen) this.#adopt(name, job);
    for (const name of [...this.#tracked.keys()]) await this.#follow(name, this.#seen.get(name));
  }

  /** One change from the watch. */
  async #change(type: JobChange, job: V1Job): Promise<void> {
    const name = job.metadata?.name ?? '';
    if (type === 'DELETED') this.#seen.delete(name);
    else {
      this.#seen.set(name, job);
      this.#adopt(name, job);
    }
    await this.#follow(name, type === 'DELETED' ? undefined : job);
  }

  /** A live Job this process did not launch is followed once it is old enough. */
  #adopt(name: string, job: V1Job): void {
    if (this.#tracked.has(name) || this.#launching.has(name)) return;
    const created = job.metadata?.creationTimestamp?.getTime() ?? 0;
    if (created <= Date.now() - ADOPT_MIN_AGE_MS && !isTerminal(observeJob(job).phase))
      this.#tracked.set(name, 'pending');
  }

  /** Report a followed Job's phase advance; `job` undefined: it no longer exists. */
  async #follow(name: string, job: V1Job | undefined): Promise<void> {
    const last = this.#tracked.get(name);
    if (last === undefined || this.#cancelling.has(name)) return;
    if (!job) {
      this.#tracked.delete(name);
      await this.#report({
        jobName: name,
        phase: 'failed',
        exitCode: null,
        summary: {
          reason: 'job-not-found',
          message: 'the Job no longer exists; it was deleted before its outcome was seen',
        },
      });
      return;
    }
    const observed = observeJob(job);
    if (!isAdvance(last, observed.phase)) return;
    if (!isTerminal(observed.phase)) {
      this.#tracked.set(name, observed.phase);
      await this.#report({ jobName: name, phase: observed.phase });
      return;
    }
    this.#tracked.delete(name);
    const exit = await this.#exit(name);
    await this.#report({
      jobName: name,
      phase: observed.phase,
      exitCode: exit.exitCode,
      summary: {
        exitCode: exit.exitCode,
        pod: exit.pod,
        condition: observed.condition?.type ?? null,
        reason: observed.condition?.reason ?? null,
        message: observed.condition?.message ?? null,
      },
    });
  }

  async #exit(jobName: string): Promise<ReturnType<typeof runnerExit>> {
    try {
      const pods = await this.options.apis.core.listNamespacedPod({
        namespace: this.namespace,
        labelSelector: `batch.kubernetes.io/job-name=${jobName}`,
      });
      return runnerExit(pods.items);
    } catch {
      return { exitCode: null, pod: null };
    }
  }

  /** Per-job Secrets left without a Job (a failed launch, a lost owner reference). */
  async #sweepSecrets(): Promise<void> {
    const { core, batch } = this.options.apis;
    try {
      const secrets = await core.listNamespacedSecret({
        namespace: this.namespace,
        labelSelector: `${LABELS.component}=runner-env,${LABELS.managedBy}=${MANAGER_NAME}`,
      });
      const jobs = await batch.listNamespacedJob({
        namespace: this.namespace,
        labelSelector: runnerSelector(),
      });
      const live = new Set(jobs.items.map((j) => j.metadata?.name));
      // A Secret younger than this may belong to a launch still creating its Job.
      const settled = Date.now() - SWEEP_MIN_AGE_MS;
      for (const secret of secrets.items) {
        const jobName = secret.metadata?.labels?.[LABELS.jobName];
        const created = secret.metadata?.creationTimestamp?.getTime() ?? 0;
        if (!jobName || live.has(jobName) || secret.metadata?.ownerReferences?.length) continue;
        if (created > settled) continue;
        await core.deleteNamespacedSecret({
          name: secret.metadata!.name!,
          namespace: this.namespace,
        });
      }
    } catch (error) {
      this.options.logger.warn(
        { err: kubeFailure(error, 'sweep per-job Secrets').message },
        'per-job Secret sweep skipped',
      );
    }
  }

  async #report(update: PhaseUpdate): Promise<void> {
    try {
      await this.#listener(update);
    } catch (error) {
      this.options.logger.warn(
        { jobName: update.jobName, err: String(error) },
        'recording a job phase failed',
      );
    }
  }
}
