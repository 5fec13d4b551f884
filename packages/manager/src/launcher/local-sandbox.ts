import { closeSync, constants, existsSync, openSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ServiceError } from '@svc/contracts';
import type { Logger } from '../logging.js';
import type { RunnerJobSpec } from './types.js';
import {
  bwrapArgs,
  SANDBOX_PATHS,
  type SandboxFile,
  type SandboxPlan,
} from './local-sandbox-args.js';
import { bwrapVersion, findBwrap, isDir, runTrial } from './local-sandbox-probe.js';
import {
  accessibleBy,
  chownTree,
  nodeInstall,
  runnerFiles,
  secretFiles,
} from './local-sandbox-files.js';

/**
 * The isolation boundary of a local runner Job: bubblewrap (Debian package `bubblewrap`) around
 * the runner, the agent and everything the agent starts. Fail closed: without a working bwrap
 * every launch is refused with a reason that names the package, unless the operator turned
 * isolation off (SVC_LOCAL_ISOLATION=off), which health and the start log then say.
 *
 * When the manager runs as root the job runs as an unprivileged uid/gid: bwrap starts as root
 * (so it can reach the job's directory inside the private data dir) and execs the runner
 * through `setpriv`, dropping the uid, groups and every capability before any code of the job
 * runs. Otherwise bwrap runs as the manager's user in a user namespace of its own.
 */

export interface IsolationSettings {
  mode: 'on' | 'off';
  /** Absolute path of bwrap; null: the first `bwrap` on PATH. */
  bwrapPath: string | null;
  /** The job's user and group when the manager runs as root. */
  uid: number;
  gid: number;
}

export interface IsolationContext {
  nodePath: string;
  /** Null when the runner package is not installed (the manager image): launches fail first. */
  runnerEntry: string | null;
  dataDir: string;
  /** The host's probed tool versions, given to each job as a read-only copy. */
  workReadyCache: string;
  /** Directories of operator-listed local mirrors (file:// repository prefixes), read-only. */
  mirrors: readonly string[];
  /** Manager files a read-only path may contain (SVC_API_KEY_FILE): hidden. */
  hidden: readonly string[];
  logger: Logger;
}

export interface IsolationReport {
  mode: 'bubblewrap' | 'off';
  available: boolean;
  bwrap: string | null;
  version: string | null;
  /** The job's uid/gid when it is not the manager's own (the manager runs as root). */
  runAs: { uid: number; gid: number } | null;
  reason: string | null;
}

/** One job's Secret as the sandbox projects it: its revision directory and granted keys. */
export interface SecretProjection {
  dir: string;
  keys: readonly string[];
  dest: string;
}

export interface JobLayout {
  jobName: string;
  dir: string;
  sessionDir: string | null;
  secrets: readonly SecretProjection[];
}

/** How to start one job: the program, its arguments, descriptors for stdio slots 3.. */
export interface JobCommand {
  file: string;
  args: string[];
  fds: number[];
  close(): void;
}

/**
 * The monitor bwrap leaves outside the sandbox dies of SIGTERM at once, while the runner inside
 * is still shutting down. A cancel signals the whole process group, so the monitor ignores
 * SIGTERM (the runner inside gets it; Node resets the disposition at start) and lives exactly
 * as long as the runner; SIGKILL ends the monitor and the sandbox's init, and with that init
 * every process of the sandbox.
 */
const IGNORE_TERM = ['-c', 'trap "" TERM; exec "$0" "$@"'];
const SETPRIV_CANDIDATES = ['/usr/bin/setpriv', '/bin/setpriv', '/usr/sbin/setpriv'];

export class LocalIsolation {
  #report: IsolationReport;
  #setpriv: string | null = null;
  readonly #files = new Map<string, ReturnType<typeof runnerFiles>>();

  private constructor(
    private readonly settings: IsolationSettings,
    private readonly context: IsolationContext,
  ) {
    this.#report = {
      mode: settings.mode === 'off' ? 'off' : 'bubblewrap',
      available: settings.mode === 'off',
      bwrap: null,
      version: null,
      runAs: null,
      reason: null,
    };
  }

  /** Probe the host once (bwrap present and able to build a sandbox) and log the outcome. */
  static async create(
    settings: IsolationSettings,
    context: IsolationContext,
  ): Promise<LocalIsolation> {
    const isolation = new LocalIsolation(settings, context);
    if (settings.mode === 'off') {
      context.logger.warn(
        { isolation: 'off' },
        'runner isolation is off (SVC_LOCAL_ISOLATION=off): local runners and their agents run as the manager’s user and see the host’s files and processes',
      );
      return isolation;
    }
    await isolation.#probe();
    const report = isolation.#report;
    if (report.available)
      context.logger.info(
        {
          isolation: 'bubblewrap',
          bwrap: report.bwrap,
          version: report.version,
          runAs: report.runAs,
        },
        'runner isolation: every local runner Job runs in its own bubblewrap sandbox',
      );
    else
      context.logger.error(
        { isolation: 'bubblewrap', reason: report.reason },
        `runner isolation unavailable: runner Jobs will be refused. ${REMEDY}`,
      );
    return isolation;
  }

  get enabled(): boolean {
    return this.settings.mode === 'on';
  }

  report(): IsolationReport {
    return { ...this.#report };
  }

  /**
   * Prepare one job's sandbox: its files handed to its user, its Secrets opened for projection,
   * the command line built. Null with isolation off; infra-failed when bubblewrap is unusable.
   */
  async command(layout: JobLayout, runnerEntry: string): Promise<JobCommand | null> {
    if (!this.enabled) return null;
    await this.ready();
    const runAs = this.#report.runAs;
    if (runAs) {
      await chownTree(layout.dir, runAs.uid, runAs.gid);
      if (layout.sessionDir) await chownTree(layout.sessionDir, runAs.uid, runAs.gid);
    }
    const fds: number[] = [];
    const files: SandboxFile[] = [];
    const provide = (source: string, dest: string) => {
      const fd = openSync(source, constants.O_RDONLY | constants.O_NOFOLLOW);
      fds.push(fd);
      files.push({ fd: 2 + fds.length, dest });
    };
    try {
      for (const secret of layout.secrets)
        for (const key of secretFiles(secret.dir, secret.keys))
          provide(join(secret.dir, key), join(secret.dest, key));
      if (existsSync(this.context.workReadyCache))
        provide(this.context.workReadyCache, SANDBOX_PATHS.workReadyCache);
      const plan = this.#plan(layout, runnerEntry, provide);
      plan.files = files;
      return {
        file: '/bin/sh',
        args: [...IGNORE_TERM, this.#report.bwrap!, ...bwrapArgs(plan)],
        fds,
        close: () => fds.forEach((fd) => closeSync(fd)),
      };
    } catch (error) {
      fds.forEach((fd) => closeSync(fd));
      throw error;
    }
  }

  /** Throws infra-failed, naming the package to install, when no sandbox can be built. */
  async ready(): Promise<void> {
    if (!this.enabled) return;
    // Installed meanwhile? One probe per refused launch is cheap (bwrap is absent or fails fast).
    if (!this.#report.available || !existsSync(this.#report.bwrap ?? '')) await this.#probe();
    if (!this.#report.available)
      throw new ServiceError(
        'infra-failed',
        `local runner isolation is unavailable: ${this.#report.reason ?? 'unknown'}. ${REMEDY}`,
        { isolation: 'bubblewrap', reason: 'isolation-unavailable' },
      );
  }

  #plan(
    layout: JobLayout,
    runnerEntry: string,
    provide: (source: string, dest: string) => void,
  ): SandboxPlan & { files: SandboxFile[] } {
    const runAs = this.#report.runAs;
    const runner = this.#runnerFiles(runnerEntry);
    const entry = realpathSync(runnerEntry);
    let readOnly = runner.paths;
    // A lone entry in a directory its user cannot read (private to root) comes as a copy.
    if (runAs && !runner.packaged && !accessibleBy(entry, runAs.uid, runAs.gid, 'r')) {
      readOnly = readOnly.filter((p) => p !== dirname(entry));
      provide(entry, entry);
    }
    return {
      jobName: layout.jobName,
      readOnly: [...readOnly, ...this.context.mirrors.filter(isDir)],
      masked: [this.context.dataDir, ...this.context.hidden],
      writable: [layout.dir, ...(layout.sessionDir ? [layout.sessionDir] : [])],
      files: [],
      cwd: layout.dir,
      command: [...this.#dropPrivileges(), this.context.nodePath, entry],
    };
  }

  /** Looked up once per entry: a launch burst should not walk node_modules each time. */
  #runnerFiles(runnerEntry: string): ReturnType<typeof runnerFiles> {
    let files = this.#files.get(runnerEntry);
    if (!files)
      this.#files.set(runnerEntry, (files = runnerFiles(this.context.nodePath, runnerEntry)));
    return files;
  }

  #dropPrivileges(): string[] {
    const runAs = this.#report.runAs;
    if (!runAs) return [];
    return [
      this.#setpriv!,
      `--reuid=${runAs.uid}`,
      `--regid=${runAs.gid}`,
      '--clear-groups',
      '--inh-caps=-all',
      '--bounding-set=-all',
      '--',
    ];
  }

  async #probe(): Promise<void> {
    const report = this.#report;
    report.available = false;
    report.bwrap = findBwrap(this.settings.bwrapPath);
    report.runAs =
      process.getuid?.() === 0 ? { uid: this.settings.uid, gid: this.settings.gid } : null;
    if (!report.bwrap) {
      report.reason = this.settings.bwrapPath
        ? `bubblewrap (bwrap) not found at ${this.settings.bwrapPath} (SVC_BWRAP_PATH)`
        : 'bubblewrap (bwrap) not found on PATH';
      return;
    }
    report.version = await bwrapVersion(report.bwrap);
    if (report.runAs) {
      this.#setpriv = SETPRIV_CANDIDATES.find((p) => existsSync(p)) ?? null;
      if (!this.#setpriv) {
        report.reason = 'setpriv (util-linux) not found: it drops the runner to its own uid';
        return;
      }
      const { uid, gid } = report.runAs;
      const runner = this.context.runnerEntry ? this.#runnerFiles(this.context.runnerEntry) : null;
      const unreadable = [this.context.nodePath, ...(runner?.packaged ? runner.paths : [])].find(
        (p) => !accessibleBy(p, uid, gid, 'x'),
      );
      if (unreadable) {
        report.reason = `${unreadable} is not readable by uid ${uid} (the runners' user, SVC_LOCAL_RUNNER_UID): install Node and the service where that user can read them`;
        return;
      }
    }
    const trial = await runTrial(report.bwrap, [
      ...IGNORE_TERM,
      report.bwrap,
      ...bwrapArgs({
        jobName: 'svc-probe',
        readOnly: [nodeInstall(this.context.nodePath)],
        masked: [],
        writable: [],
        files: [],
        cwd: '/',
        command: [...this.#dropPrivileges(), this.context.nodePath, '-e', ''],
      }),
    ]);
    report.reason = trial;
    report.available = trial === null;
  }
}

const REMEDY =
  'Install the Debian package bubblewrap (apt-get install bubblewrap), or set SVC_LOCAL_ISOLATION=off to run local runners without isolation';

/** A job's directory, session volume and Secrets as its sandbox mounts them. */
export function sandboxLayout(
  spec: Pick<
    RunnerJobSpec,
    'jobName' | 'providerSecret' | 'toolCredentials' | 'bundleCredential' | 'sessionPvc'
  >,
  dir: string,
  secretsRoot: string,
): JobLayout {
  const revision = (name: string) => join(secretsRoot, name, 'current');
  // One projection per tool Secret, with the keys its entries name (none named: all).
  const tools = new Map<string, Set<string>>();
  for (const entry of spec.toolCredentials) {
    const keys = tools.get(entry.secretRef.name) ?? new Set<string>();
    entry.secretRef.keys.forEach((key) => keys.add(key));
    tools.set(entry.secretRef.name, keys);
  }
  return {
    jobName: spec.jobName,
    dir,
    sessionDir: spec.sessionPvc?.mountPath ?? null,
    secrets: [
      { dir: revision(spec.providerSecret.name), keys: [], dest: SANDBOX_PATHS.profile },
      ...[...tools].map(([name, keys]) => ({
        dir: revision(name),
        keys: [...keys],
        dest: join(SANDBOX_PATHS.tools, name),
      })),
      ...(spec.bundleCredential
        ? [
            {
              dir: revision(spec.bundleCredential.name),
              keys: spec.bundleCredential.keys,
              dest: SANDBOX_PATHS.bundleCredential,
            },
          ]
        : []),
    ],
  };
}
