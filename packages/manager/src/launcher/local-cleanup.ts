import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { chmod, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';

/** The directories of a local job that hold secret material; the rest (log, workspace) stays. */
export const SECRET_DIRS = ['secret', 'agent-home', 'home'] as const;

/**
 * Ends what is left of local jobs: every process that still works for one of them, then the
 * secret material in their directories. A runner killed with SIGKILL leaves its agent (its own
 * process group) and the agent's shells (their own sessions) running, and auth.json, the keyed
 * config and tool credential copies on disk; none of that may outlive the job.
 *
 * `dirs` are job directories. A process belongs to one when its working directory is inside
 * it, or its environment names it (runner, agent, shells: HOME, CODEX_HOME, SVC_JOB_DIR), or it
 * descends from such a process.
 */
export async function endLocalJobs(dirs: readonly string[]): Promise<number[]> {
  const killed = killLeftovers(dirs);
  await Promise.all(dirs.flatMap((dir) => SECRET_DIRS.map((name) => removeTree(join(dir, name)))));
  return killed;
}

/** Freeze, collect until stable, then SIGKILL: nothing forks away while we look. */
function killLeftovers(dirs: readonly string[]): number[] {
  if (dirs.length === 0) return [];
  const roots = dirs.map((d) => d.replace(/\/+$/, ''));
  const found = new Set<number>();
  for (let round = 0; round < 10; round++) {
    const more = scan(roots).filter((pid) => !found.has(pid));
    if (more.length === 0) break;
    for (const pid of more) {
      found.add(pid);
      signal(pid, 'SIGSTOP');
    }
  }
  for (const pid of found) signal(pid, 'SIGKILL');
  return [...found];
}

interface ProcInfo {
  pid: number;
  ppid: number;
  belongs: boolean;
}

function scan(roots: readonly string[]): number[] {
  const inside = (value: string) => roots.some((r) => value === r || value.startsWith(`${r}/`));
  const procs: ProcInfo[] = [];
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return []; // no procfs: the launcher's group kill is all there is
  }
  for (const entry of entries) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    const ppid = parentOf(pid);
    if (ppid === undefined) continue;
    let belongs = false;
    try {
      belongs = inside(readlinkSync(`/proc/${pid}/cwd`));
    } catch {
      // gone or not ours to read
    }
    if (!belongs) {
      try {
        belongs = readFileSync(`/proc/${pid}/environ`, 'latin1')
          .split('\0')
          .some((pair) => inside(pair.slice(pair.indexOf('=') + 1)));
      } catch {
        // gone or not ours to read
      }
    }
    procs.push({ pid, ppid, belongs });
  }
  const result = new Set(procs.filter((p) => p.belongs).map((p) => p.pid));
  // Descendants too: a child may have left the directory and cleaned its environment.
  for (let grew = true; grew;) {
    grew = false;
    for (const p of procs) {
      if (!result.has(p.pid) && result.has(p.ppid)) {
        result.add(p.pid);
        grew = true;
      }
    }
  }
  return [...result];
}

function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // A zombie holds nothing and cannot be signalled away.
    if (fields[0] === 'Z' || fields[0] === 'X') return undefined;
    const ppid = Number(fields[1]);
    return Number.isInteger(ppid) ? ppid : undefined;
  } catch {
    return undefined;
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/** Remove a tree, first making writable any directory the agent made read-only. */
async function removeTree(path: string): Promise<void> {
  try {
    await rm(path, { recursive: true, force: true, maxRetries: 3 });
  } catch {
    await makeWritable(path);
    await rm(path, { recursive: true, force: true, maxRetries: 3 }).catch(() => undefined);
  }
}

async function makeWritable(dir: string): Promise<void> {
  await chmod(dir, 0o700).catch(() => undefined);
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries)
    if (entry.isDirectory() && !entry.isSymbolicLink()) await makeWritable(join(dir, entry.name));
}
