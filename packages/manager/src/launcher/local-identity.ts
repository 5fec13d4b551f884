import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { EXIT_STATUS_FILE } from '@svc/contracts';

/** Where a local job's launcher records the process it started (next to the job's log). */
export const IDENTITY_FILE = 'runner-process.json';

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

export async function writeIdentity(jobDir: string, identity: ProcessIdentity): Promise<void> {
  await writeFile(join(jobDir, IDENTITY_FILE), JSON.stringify(identity), { mode: 0o600 });
}

export function readIdentity(jobDir: string): ProcessIdentity | null {
  try {
    const value = JSON.parse(readFileSync(join(jobDir, IDENTITY_FILE), 'utf8')) as unknown;
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
