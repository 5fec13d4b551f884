import { lstatSync, readlinkSync, statSync } from 'node:fs';

/**
 * The bubblewrap command line of one local runner Job: a root of its own holding the system
 * read-only, the runner's files read-only, its job directory (and session volume) writable,
 * its Secrets as in-memory read-only files, a private /tmp, /dev and /proc, and its own PID,
 * IPC and UTS namespaces. Pure: what to mount comes in a plan, built in local-sandbox.ts.
 */

/** Where a sandboxed runner finds its projected Secrets: the pod's paths (kube-job-manifest). */
export const SANDBOX_PATHS = {
  root: '/var/run/svc',
  profile: '/var/run/svc/profile',
  tools: '/var/run/svc/tools',
  bundleCredential: '/var/run/svc/bundle-credential',
  workReadyCache: '/var/run/svc/work-ready-cache.json',
} as const;

/** System directories every sandbox sees read-only (symlinks, as on merged-/usr hosts, kept). */
const SYSTEM_DIRS = ['/usr', '/etc', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];
/** DNS on systemd-resolved hosts: /etc/resolv.conf links into it. */
const OPTIONAL_SYSTEM_DIRS = ['/run/systemd/resolve'];

export interface SandboxFile {
  /** The child's descriptor number holding the content (bwrap copies it into the sandbox). */
  fd: number;
  dest: string;
}

export interface SandboxPlan {
  jobName: string;
  /** Read-only: Node, the runner package and its modules, tools/, operator mirrors. */
  readOnly: readonly string[];
  /** Hidden under an empty tmpfs when a read-only path contains them (the data dir). */
  masked: readonly string[];
  /** Writable at the same path: the job directory, the session volume. */
  writable: readonly string[];
  /** In-memory read-only files: Secret keys, the work-ready cache, a lone runner entry. */
  files: readonly SandboxFile[];
  cwd: string;
  /** The command inside: the runner (behind setpriv when the job drops to another uid). */
  command: readonly string[];
}

export function bwrapArgs(plan: SandboxPlan): string[] {
  const root = new SandboxRoot([
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    '--hostname',
    plan.jobName.slice(0, 63),
  ]);
  for (const dir of SYSTEM_DIRS) root.system(dir);
  for (const dir of OPTIONAL_SYSTEM_DIRS) root.mount('--ro-bind-try', dir, dir, 'host');
  root.mount('--dev', null, '/dev', 'host');
  root.mount('--proc', null, '/proc', 'host');
  for (const dir of ['/tmp', '/var/tmp', '/dev/shm'])
    root.mount('--tmpfs', null, dir, 'empty', ['--perms', '1777']);
  for (const path of plan.readOnly) root.mount('--ro-bind', path, path, 'host');
  for (const path of plan.masked)
    if (plan.readOnly.some((ro) => inside(path, ro)))
      if (isDirectory(path)) root.mount('--tmpfs', null, path, 'empty');
      else root.mount('--ro-bind', '/dev/null', path, 'host');
  for (const path of plan.writable) root.mount('--bind', path, path, 'host');
  for (const file of plan.files)
    root.mount('--ro-bind-data', String(file.fd), file.dest, 'host', ['--perms', '0444']);
  return [...root.args, '--chdir', plan.cwd, '--', ...plan.command];
}

/**
 * The mounts in order, and the directories above each mount point. bwrap would make a missing
 * parent itself, but private to root (0700) when it runs as root, where the job's user could
 * not pass: each missing parent is made here first, 0755, once.
 */
class SandboxRoot {
  readonly #mounts: Array<{ path: string; kind: 'host' | 'empty' }> = [];
  readonly #made = new Set<string>(['/']);

  constructor(readonly args: string[]) {}

  system(dir: string): void {
    try {
      const stat = lstatSync(dir);
      if (stat.isSymbolicLink()) {
        this.args.push('--symlink', readlinkSync(dir), dir);
        this.#made.add(dir);
      } else if (stat.isDirectory()) this.mount('--ro-bind', dir, dir, 'host');
    } catch {
      // not on this host
    }
  }

  /** `host`: the mount shows a host directory (its subdirectories exist); `empty`: a tmpfs. */
  mount(
    option: string,
    source: string | null,
    dest: string,
    kind: 'host' | 'empty',
    prefix: string[] = [],
  ): void {
    this.#parents(dest);
    this.args.push(...prefix, option, ...(source === null ? [] : [source]), dest);
    this.#mounts.push({ path: dest, kind });
    this.#made.add(dest);
  }

  #parents(dest: string): void {
    const parts = dest.split('/').filter(Boolean).slice(0, -1);
    let dir = '';
    for (const part of parts) {
      dir += `/${part}`;
      if (this.#made.has(dir)) continue;
      const under = this.#mounts.filter((m) => inside(dir, m.path)).at(-1);
      // Inside a host directory it exists already (or cannot be made on a read-only mount).
      if (under?.kind === 'host') continue;
      this.args.push('--perms', '0755', '--dir', dir);
      this.#made.add(dir);
    }
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** `path` is `root` or below it. */
export function inside(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith('/') ? root : `${root}/`);
}
