import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, open, readdir, readFile, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname, join } from 'node:path';
import type { Logger } from '../logging.js';
import { workReadyCacheFile } from '../work-ready.js';
import { endLocalJobs } from './local-cleanup.js';
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
  /** Each job's sandbox (local-sandbox.ts); absent: none, as with SVC_LOCAL_ISOLATION=off. */
  isolation?: LocalIsolation;
}

const RUNNER_MISSING =
  'no runner is installed beside this manager (package @svc/runner); set SVC_RUNNER_ENTRY or use the Kubernetes launcher';

interface Child {
  process: ChildProcess;
  cancelled: boolean;
  exited: Promise<void>;
}

/**
 * The embedded launcher: each runner Job is a child process group of the manager host. Values
 * (transientEnv, the manager token) go to files under the job's `secret/` directory, mode 0600,
 * readable only by the runner's user, and are deleted when the job ends; the environment and
 * every record carry names and paths only. Jobs do not outlive the manager: closing kills
 * them, and a restarted manager finds the previous one's jobs, stops them and marks them.
 */
export class LocalLauncher implements Launcher {
  readonly kind = 'local' as const;
  readonly namespace = 'local';
  readonly #children = new Map<string, Child>();
  #listener: PhaseListener = () => Promise.resolve();

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
    // Listen before any await: 'spawn' fires on the next turn of the event loop.
    const spawned = new Promise<number>((resolve, reject) => {
      child.once('spawn', () => resolve(child.pid!));
      child.once('error', reject);
    });
    await log.close();
    const pid = await spawned;
    const entry: Child = { process: child, cancelled: false, exited: Promise.resolve() };
    entry.exited = new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        const phase = entry.cancelled ? 'cancelled' : code === 0 ? 'succeeded' : 'failed';
        // Secret material lives as long as the job: its leftovers and files go before the
        // phase is recorded, so a terminal job never has any on disk.
        endLocalJobs([paths.dir])
          .catch((error: unknown) =>
            this.options.logger.warn(
              { jobName: spec.jobName, err: String(error) },
              'removing a job’s secret material failed',
            ),
          )
          .then(() => {
            this.#children.delete(spec.jobName);
            return this.#listener({
              jobName: spec.jobName,
              phase,
              exitCode: code,
              summary: {
                exitCode: code,
                signal,
                ...(entry.cancelled ? { reason: 'cancelled' } : {}),
              },
            });
          })
          .catch((error: unknown) =>
            this.options.logger.warn(
              { jobName: spec.jobName, err: String(error) },
              'recording a job phase failed',
            ),
          )
          .finally(resolve);
      });
    });
    this.#children.set(spec.jobName, entry);
    return { phase: 'running', logPath: paths.log, podIdentity: `local:${hostname()}:${pid}` };
  }

  async transientEnvOf(jobName: string): Promise<Array<{ name: string; value: string }>> {
    const file = join(this.#paths({ jobName }).secret, TRANSIENT_ENV_KEY);
    return parseTransientEnv(await readFile(file).catch(() => undefined), 'utf8');
  }

  async cancel(jobName: string, graceMs = this.options.killGraceMs): Promise<void> {
    const child = this.#children.get(jobName);
    if (!child?.process.pid) return;
    child.cancelled = true;
    killGroup(child.process.pid, 'SIGTERM');
    const timer = setTimeout(() => killGroup(child.process.pid!, 'SIGKILL'), graceMs);
    await child.exited;
    clearTimeout(timer);
  }

  async start(listener: PhaseListener, active: readonly ActiveJob[]): Promise<void> {
    this.#listener = listener;
    // Jobs do not outlive a manager: whatever an earlier one left (jobs that ended or were
    // killed while it was down) loses its processes and secret material before we serve.
    const stopped: Array<{ job: ActiveJob; alive: boolean }> = [];
    for (const job of active) {
      if (this.#children.has(job.jobName)) continue;
      // A job of an earlier manager process: stop it if it still runs, and say what happened.
      const pid = Number(job.podIdentity?.split(':').at(-1));
      const alive = Number.isInteger(pid) && pid > 0 && isOurRunner(pid, job.jobName);
      // A live job with no directory under this jobs root was started by another local manager
      // on the same database (another data directory): it is that manager's to stop, not ours.
      if (alive && !existsSync(this.#paths(job).dir)) continue;
      if (alive) killGroup(pid, 'SIGKILL');
      stopped.push({ job, alive });
    }
    const dirs = (await readdir(this.options.jobsRoot).catch(() => [] as string[]))
      .filter((name) => !this.#children.has(name))
      .map((name) => join(this.options.jobsRoot, name));
    await endLocalJobs(dirs);
    for (const { job, alive } of stopped) {
      await listener({
        jobName: job.jobName,
        phase: 'failed',
        exitCode: null,
        summary: {
          reason: 'orphaned-by-manager-restart',
          orphaned: true,
          stopped: alive,
          previousManager: job.managerInstance,
        },
      });
    }
  }

  isolationReport(): Record<string, unknown> {
    return { ...(this.options.isolation?.report() ?? { mode: 'off' }) };
  }

  async close(): Promise<void> {
    await Promise.all([...this.#children.keys()].map((jobName) => this.cancel(jobName, 2000)));
  }
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

/** Only kill a pid that is really this job's runner (pids are reused). */
function isOurRunner(pid: number, jobName: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'latin1')
      .split('\0')
      .includes(`SVC_JOB_NAME=${jobName}`);
  } catch {
    return false;
  }
}
