import { readFileSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { EXIT_STATUS_FILE } from '@svc/contracts';

/** Where a local launcher records the processes it started (see identityFile). */
const IDENTITY_DIR = 'job-processes';

/**
 * The process a local launcher started for a job: its direct child (the runner, or a wrapper
 * such as a sandbox whose child is the runner), told apart from any later process that reuses
 * the pid by its start time since boot and the boot it belongs to. A restarted manager adopts
 * the job only when all three still match.
 */
export interface ProcessIdentity {
  pid: number;
  /** Field 22 of /proc/<pid>/stat: clock ticks after boot at which the process started. */
  startTime: string;
  bootId: string;
}

/** The start time of a live (not zombie) process, or null when there is none. */
export function startTimeOf(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces and parentheses: fields count from the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] === 'Z' || fields[0] === 'X') return null;
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

function bootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return 'unknown';
  }
}

/** The identity of a live process, read now; null when it is gone. */
export function identityOf(pid: number): ProcessIdentity | null {
  const startTime = startTimeOf(pid);
  return startTime === null ? null : { pid, startTime, bootId: bootId() };
}

/**
 * Where the identity of a job's process is kept: beside the jobs, in a directory only the
 * manager writes (`<data dir>/job-processes/<job>.json`), never in the job's own directory,
 * which its runner (another uid, in a sandbox) may write. A record the job could write would
 * let it name any process, which a restarted manager would then adopt and, on cancel, signal.
 */
export function identityFile(jobsRoot: string, jobName: string): string {
  return join(dirname(jobsRoot), IDENTITY_DIR, `${jobName}.json`);
}

export async function writeIdentity(file: string, identity: ProcessIdentity): Promise<void> {
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  await writeFile(file, JSON.stringify(identity), { mode: 0o600 });
}

export async function forgetIdentity(file: string): Promise<void> {
  await rm(file, { force: true });
}

export function readIdentity(file: string): ProcessIdentity | null {
  try {
    const value = JSON.parse(readFileSync(file, 'utf8')) as unknown;
    const v = value as Partial<ProcessIdentity> | null;
    if (
      v &&
      Number.isInteger(v.pid) &&
      typeof v.startTime === 'string' &&
      typeof v.bootId === 'string'
    )
      return { pid: v.pid!, startTime: v.startTime, bootId: v.bootId };
  } catch {
    // none, or not ours to read
  }
  return null;
}

/** Whether the process a job's identity names is still that process, alive. */
export function stillRunning(identity: ProcessIdentity): boolean {
  return identity.bootId === bootId() && startTimeOf(identity.pid) === identity.startTime;
}

/** The exit code a runner left in its job directory as it exited, if it could. */
export function exitStatusOf(jobDir: string): number | null {
  try {
    const value = JSON.parse(readFileSync(join(jobDir, EXIT_STATUS_FILE), 'utf8')) as {
      exitCode?: unknown;
    };
    return Number.isInteger(value.exitCode) ? (value.exitCode as number) : null;
  } catch {
    return null;
  }
}
