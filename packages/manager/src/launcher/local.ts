import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, open, readdir, readFile, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import type { Logger } from '../logging.js';
import { workReadyCacheFile } from '../work-ready.js';
import { endLocalJobs } from './local-cleanup.js';
import {
  exitStatusOf,
  forgetIdentity,
  identityFile,
  identityOf,
  readIdentity,
  stillRunning,
  writeIdentity,
  type ProcessIdentity,
} from './local-identity.js';
import { sandboxLayout, type LocalIsolation } from './local-sandbox.js';
import { SANDBOX_PATHS } from './local-sandbox-args.js';
import { runnerEnvironment } from './runner-env.js';
import { parseTransientEnv, TRANSIENT_ENV_KEY } from './transient-env-file.js';
import type { ActiveJob, LaunchResult, Launcher, PhaseListener, RunnerJobSpec } from './types.js';

export interface LocalLauncherOptions {
  /** Where job directories live: `<jobsRoot>/<jobName>/{runner.log, secret/, home/, …}`. */
  jobsRoot: string;
  /** The local Secret store root, whose Secrets the runner reads like mounted projections. */
  secretsRoot: string;
  /** null: no runner is installed beside this manager (its image has none); launches fail. */
  runnerEntry: string | null;
  nodePath: string;
  instanceId: string;
  killGraceMs: number;
  logger: Logger;
  /** Variables passed through from the manager's environment (PATH, test tags). */
  inherit: readonly string[];
  /** How often the end of an adopted job (not our child: no exit event) is looked for. */
  adoptedPollMs?: number;
  /** Each job's sandbox (local-sandbox.ts); absent: none, as with SVC_LOCAL_ISOLATION=off. */
  isolation?: LocalIsolation;
}

const RUNNER_MISSING =
  'no runner is installed beside this manager (package @svc/runner); set SVC_RUNNER_ENTRY or use the Kubernetes launcher';

/** A job whose process this launcher follows: its own child, or one it adopted. */
interface Job {
  pid: number;
  dir: string;
  /** Set for an adopted job: the process it must still be before it is signalled. */
  identity: ProcessIdentity | null;
  cancelled: boolean;
  ending: boolean;
  exited: Promise<void>;
  settle: () => void;
}

/**
 * The embedded launcher: each runner Job is a process group of the manager host. Values
 * (transientEnv, the manager token) go to files under the job's `secret/` directory, mode 0600,
 * readable only by the runner's user, and are deleted when the job ends; the environment and
 * every record carry names and paths only. The launcher records the process each job runs as
 * (pid, start time, boot: `job-processes/<job>.json`, which no job can write), so a manager
 * restarted on the same data directory adopts the jobs of the one before, which kept running
 * meanwhile, instead of killing them: their leases, turns and model calls go on. Closing the
 * manager stops its jobs.
 */
export class LocalLauncher implements Launcher {
  readonly kind = 'local' as const;
  readonly namespace = 'local';
  readonly #children = new Map<string, Job>();
  #listener: PhaseListener = () => Promise.resolve();
  #watch: NodeJS.Timeout | undefined;

  constructor(private readonly options: LocalLauncherOptions) {}

  #paths(spec: Pick<RunnerJobSpec, 'jobName'>) {
    const dir = join(this.options.jobsRoot, spec.jobName);
    return {
      dir,
      secret: join(dir, 'secret'),
      log: join(dir, 'runner.log'),
      home: join(dir, 'home'),
      workspace: join(dir, 'workspace'),
      agentHome: join(dir, 'agent-home'),
    };
  }

  #environment(spec: RunnerJobSpec): Record<string, string> {
    const paths = this.#paths(spec);
    // In a sandbox, Secrets are in-memory projections at the pod's paths.
    const sandboxed = this.options.isolation?.enabled === true;
    const secretDir = (name: string, inSandbox: string) =>
      sandboxed ? inSandbox : join(this.options.secretsRoot, name, 'current');
    const env: Record<string, string> = {};
    for (const name of this.options.inherit) {
      const value = process.env[name];
      if (value !== undefined) env[name] = value;
    }
    Object.assign(
      env,
      runnerEnvironment(
        spec,
        {
          home: paths.home,
          jobDir: paths.dir,
          secretDir: paths.secret,
          profileDir: secretDir(spec.providerSecret.name, SANDBOX_PATHS.profile),
          workspace: paths.workspace,
          agentHome: paths.agentHome,
          toolDir: (name) => secretDir(name, join(SANDBOX_PATHS.tools, name)),
          bundleCredentialDir: secretDir(
            spec.bundleCredential?.name ?? '-',
            SANDBOX_PATHS.bundleCredential,
          ),
          // A local session volume is a directory elsewhere; the runner links it in.
          sessionMountPath: (s) => s.sessionPvc!.mountPath,
        },
        spec.sessionPvc?.namespace ?? this.namespace,
      ),
    );
    // Runners of one host share what its tools answered (see detectWorkReady); a sandbox reads
    // a copy. Its temp dir is its own, and assembly never writes into its Secret projections.
    env['SVC_WORK_READY_CACHE'] = sandboxed
      ? SANDBOX_PATHS.workReadyCache
      : workReadyCacheFile(dirname(this.options.jobsRoot));
    if (sandboxed) Object.assign(env, { TMPDIR: '/tmp', SVC_FORBIDDEN_ROOTS: SANDBOX_PATHS.root });
    return env;
  }

  render(spec: RunnerJobSpec): Record<string, unknown> {
    const env = this.#environment(spec);
    return {
      kind: 'LocalRunnerJob',
      jobName: spec.jobName,
      command: [this.options.nodePath, this.options.runnerEntry ?? RUNNER_MISSING],
      workingDir: this.#paths(spec).dir,
      env: Object.fromEntries(Object.entries(env).filter(([name]) => name.startsWith('SVC_'))),
      secretFiles: {
        dir: this.#paths(spec).secret,
        files: [
          ...(spec.transientEnv.length > 0 ? [TRANSIENT_ENV_KEY] : []),
          ...(spec.managerToken ? ['manager-token'] : []),
        ],
        mode: '0600',
        transientEnv: spec.transientEnvSummary,
      },
      isolation: this.isolationReport(),
      valuesPrinted: false,
    };
  }

  async launch(spec: RunnerJobSpec, ready?: Promise<void>): Promise<LaunchResult> {
    // A local volume is a directory made at once: nothing to gain by preparing meanwhile.
    await ready;
    if (this.options.runnerEntry === null) throw new Error(RUNNER_MISSING);
    // Fail closed before anything of the job is written: no sandbox, no job.
    await this.options.isolation?.ready();
    const paths = this.#paths(spec);
    await mkdir(paths.secret, { recursive: true, mode: 0o700 });
    await chmod(paths.secret, 0o700);
    await mkdir(paths.home, { recursive: true, mode: 0o700 });
    if (spec.transientEnv.length > 0) {
      await writeFile(join(paths.secret, TRANSIENT_ENV_KEY), JSON.stringify(spec.transientEnv), {
        mode: 0o600,
      });
    }
    if (spec.managerToken)
      await writeFile(join(paths.secret, 'manager-token'), spec.managerToken, { mode: 0o600 });
    const sandbox = await this.options.isolation
      ?.command(sandboxLayout(spec, paths.dir, this.options.secretsRoot), this.options.runnerEntry)
      .catch(async (error: unknown) => {
        await endLocalJobs([paths.dir]);
        throw error;
      });
    const log = await open(paths.log, 'a', 0o600);
    // Sandboxed, the child is bubblewrap; the runner is its child inside (another pid there).
    const child = spawn(
      sandbox?.file ?? this.options.nodePath,
      sandbox?.args ?? [this.options.runnerEntry],
      {
        cwd: paths.dir,
        env: this.#environment(spec),
        detached: true, // its own process group: cancel kills the runner, the agent and its shells
        stdio: ['ignore', log.fd, log.fd, ...(sandbox?.fds ?? [])],
      },
    );
    sandbox?.close();
    // Listen before any await: 'spawn' fires on the next turn of the event loop, and a runner
    // that dies at once can exit while the log closes. A missed exit would leave its job
    // `running` for good, and a shutdown waiting for it.
    const spawned = new Promise<number>((resolve, reject) => {
      child.once('spawn', () => resolve(child.pid!));
      child.once('error', reject);
    });
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      child.once('exit', (code, signal) => resolve([code, signal])),
    );
    await log.close();
    const pid = await spawned;
    const job = this.#follow(spec.jobName, paths.dir, pid, null);
    void exited.then(([code, signal]) => {
      const phase = job.cancelled ? 'cancelled' : code === 0 ? 'succeeded' : 'failed';
      return this.#ended(spec.jobName, job, phase, code, { exitCode: code, signal });
    });
    // Who the job is, for a manager that restarts while it runs (see start).
    const identity = identityOf(pid);
    if (identity)
      await writeIdentity(identityFile(this.options.jobsRoot, spec.jobName), identity).catch(
        (error: unknown) =>
          this.options.logger.warn(
            { jobName: spec.jobName, err: String(error) },
            'recording the job’s process failed; a restarted manager will not adopt it',
          ),
      );
    return { phase: 'running', logPath: paths.log, podIdentity: `local:${hostname()}:${pid}` };
  }

  #follow(jobName: string, dir: string, pid: number, identity: ProcessIdentity | null): Job {
    let settle!: () => void;
    const exited = new Promise<void>((resolve) => (settle = resolve));
    const job: Job = { pid, dir, identity, cancelled: false, ending: false, exited, settle };
    this.#children.set(jobName, job);
    return job;
  }

  /**
   * A job's process ended. Secret material lives as long as the job: its leftovers and files
   * go before the phase is recorded, so a terminal job never has any on disk.
   */
  async #ended(
    jobName: string,
    job: Job,
    phase: 'succeeded' | 'failed' | 'cancelled',
    exitCode: number | null,
    summary: Record<string, unknown>,
  ): Promise<void> {
    job.ending = true;
    try {
      await endLocalJobs([job.dir]).catch((error: unknown) =>
        this.options.logger.warn(
          { jobName, err: String(error) },
          'removing a job’s secret material failed',
        ),
      );
      this.#children.delete(jobName);
      await forgetIdentity(identityFile(this.options.jobsRoot, jobName));
      await this.#listener({
        jobName,
        phase,
        exitCode,
        summary: { ...summary, ...(job.cancelled ? { reason: 'cancelled' } : {}) },
      });
    } catch (error) {
      this.options.logger.warn({ jobName, err: String(error) }, 'recording a job phase failed');
    } finally {
      job.settle();
    }
  }

  async transientEnvOf(jobName: string): Promise<Array<{ name: string; value: string }>> {
    const file = join(this.#paths({ jobName }).secret, TRANSIENT_ENV_KEY);
    return parseTransientEnv(await readFile(file).catch(() => undefined), 'utf8');
  }

  async cancel(jobName: string, graceMs = this.options.killGraceMs): Promise<void> {
    const job = this.#children.get(jobName);
    if (!job) return;
    job.cancelled = true;
    // An adopted job is signalled only while its pid is still that process (pids are reused).
    const kill = (signal: NodeJS.Signals) => {
      if (!job.identity || stillRunning(job.identity)) killGroup(job.pid, signal);
    };
    kill('SIGTERM');
    const timer = setTimeout(() => kill('SIGKILL'), graceMs);
    await job.exited;
    clearTimeout(timer);
  }

  /**
   * Begin reporting phases. `active` are the jobs the store believes alive: those of an
   * earlier manager process on this data directory whose process still runs (the one its
   * directory names) are adopted and followed to their end; the others ended while no manager
   * watched, and are reported so, their leftovers and secret material removed first. A live
   * job with no directory here is another local manager's (another data directory, the same
   * database): not ours to follow; nor, without a directory here, one started on another host
   * or not started yet.
   */
  async start(listener: PhaseListener, active: readonly ActiveJob[]): Promise<void> {
    this.#listener = listener;
    const gone: Array<{ job: ActiveJob; exitCode: number | null }> = [];
    for (const job of active) {
      if (this.#children.has(job.jobName)) continue;
      const dir = this.#paths(job).dir;
      // Another manager's: started on another host, or still being started (no process yet)
      // by a manager with another data directory. Its own manager, or the unclaimed-job sweep,
      // reports its end; judged from here it would only look dead.
      if (!existsSync(dir) && !startedOnThisHost(job)) continue;
      const identity =
        readIdentity(identityFile(this.options.jobsRoot, job.jobName)) ?? earlierIdentity(job);
      const alive = identity !== null && stillRunning(identity);
      if (alive && existsSync(dir)) {
        this.#follow(job.jobName, dir, identity.pid, identity);
        this.options.logger.info(
          { jobName: job.jobName, pid: identity.pid, previousManager: job.managerInstance },
          'adopted a runner job of an earlier manager process',
        );
      } else if (!alive) gone.push({ job, exitCode: exitStatusOf(dir) });
    }
    const dirs = (await readdir(this.options.jobsRoot).catch(() => [] as string[]))
      .filter((name) => !this.#children.has(name))
      .map((name) => join(this.options.jobsRoot, name));
    await endLocalJobs(dirs);
    if ([...this.#children.values()].some((j) => j.identity)) this.#watchAdopted();
    for (const { job, exitCode } of gone) {
      await forgetIdentity(identityFile(this.options.jobsRoot, job.jobName));
      await listener({
        jobName: job.jobName,
        phase: exitCode === 0 ? 'succeeded' : 'failed',
        exitCode,
        summary: {
          reason: 'ended-while-manager-down',
          exitCode,
          message:
            exitCode === null
              ? 'the runner ended while no manager watched it, leaving no exit code (killed, or its host restarted)'
              : `the runner exited with code ${exitCode} while no manager watched it`,
          previousManager: job.managerInstance,
        },
      });
    }
  }

  /** Adopted jobs are not our children: their end is looked for in /proc at an interval. */
  #watchAdopted(): void {
    if (this.#watch) return;
    this.#watch = setInterval(() => {
      const adopted = [...this.#children].filter(([, job]) => job.identity && !job.ending);
      for (const [jobName, job] of adopted) {
        if (stillRunning(job.identity!)) continue;
        const exitCode = exitStatusOf(job.dir);
        const phase = job.cancelled ? 'cancelled' : exitCode === 0 ? 'succeeded' : 'failed';
        void this.#ended(jobName, job, phase, exitCode, {
          exitCode,
          signal: null,
          adopted: true,
          ...(exitCode === null
            ? { message: 'the runner ended without leaving its exit code' }
            : {}),
        });
      }
      if (![...this.#children.values()].some((job) => job.identity && !job.ending)) {
        clearInterval(this.#watch);
        this.#watch = undefined;
      }
    }, this.options.adoptedPollMs ?? 500);
    this.#watch.unref();
  }

  isolationReport(): Record<string, unknown> {
    return { ...(this.options.isolation?.report() ?? { mode: 'off' }) };
  }

  async close(): Promise<void> {
    await Promise.all([...this.#children.keys()].map((jobName) => this.cancel(jobName, 2000)));
    clearInterval(this.#watch);
    this.#watch = undefined;
  }
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

/** Whether the job's process was started on this host (`local:<host>:<pid>`). */
function startedOnThisHost(job: ActiveJob): boolean {
  const parts = job.podIdentity?.split(':') ?? [];
  return parts.length >= 3 && parts.slice(1, -1).join(':') === hostname();
}

/**
 * A job whose process the launcher has no record of: its pod identity's pid, if that process
 * is really this job's runner (its environment names the job; pids are reused).
 */
function earlierIdentity(job: ActiveJob): ProcessIdentity | null {
  const pid = Number(job.podIdentity?.split(':').at(-1));
  if (!Number.isInteger(pid) || pid <= 0) return null;
  try {
    const environ = readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0');
    return environ.includes(`SVC_JOB_NAME=${job.jobName}`) ? identityOf(pid) : null;
  } catch {
    return null;
  }
}
