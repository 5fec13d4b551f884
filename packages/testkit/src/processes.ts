import { readdirSync, readFileSync } from 'node:fs';

/**
 * Leak guard for child processes. Every process a test starts (directly, or through the
 * manager's launcher, the runner and the agent) inherits SVC_TEST_TAG; after a test file,
 * no live process may still carry this file's tag.
 */
export const TEST_TAG_VAR = 'SVC_TEST_TAG';

export function ensureTestTag(): string {
  const existing = process.env[TEST_TAG_VAR];
  if (existing) return existing;
  const tag = `t${process.pid}-${Date.now().toString(36)}`;
  process.env[TEST_TAG_VAR] = tag;
  return tag;
}

export interface ProcessInfo {
  pid: number;
  command: string;
}

/** Live processes (not zombies) whose environment holds `SVC_TEST_TAG=<tag>`. */
export function processesWithTag(tag: string): ProcessInfo[] {
  const needle = `${TEST_TAG_VAR}=${tag}`;
  const found: ProcessInfo[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (state === 'Z' || state === 'X') continue;
      const environ = readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0');
      if (!environ.includes(needle)) continue;
      const command = readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').join(' ').trim();
      if (Number(ppid) === process.pid && isLoaderService(command)) continue;
      found.push({ pid, command });
    } catch {
      // The process ended while we looked, or is not ours to read.
    }
  }
  return found;
}

/**
 * The TypeScript loader of the test process itself (tsx) starts an esbuild service the first
 * time it compiles a file; started after the tag was set, it inherits the tag, yet it belongs to
 * the test process and ends with it, so it is not a leak.
 */
function isLoaderService(command: string): boolean {
  return /(^|\/)esbuild(\.exe)? --service=/.test(command);
}

/** Wait up to `timeoutMs` for tagged processes to end; returns the ones still alive. */
export async function waitForNoTaggedProcesses(
  tag: string,
  timeoutMs = 5000,
): Promise<ProcessInfo[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const alive = processesWithTag(tag);
    if (alive.length === 0 || Date.now() > deadline) return alive;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Kill whatever is left (so one leak does not cascade) and describe it. */
export function killTagged(tag: string): ProcessInfo[] {
  const alive = processesWithTag(tag);
  for (const p of alive) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  return alive;
}

/** A local job's directory in a path: `…/jobs/svc-v01-runner-<id>`. */
export const JOB_DIR = /\/jobs\/(svc-v01-runner-[0-9a-z]+)(?:\/|$)/;

/**
 * The runner Jobs that have a live process of this test's tag now, by job name: every
 * process whose environment names its job (`SVC_JOB_NAME`: the runner) or points into its
 * job directory (`HOME`, `CODEX_HOME`: the agent and its shells). Counting jobs, not
 * processes, stays right when a wrapper (a sandbox) stands between launcher and runner.
 */
export function liveRunnerJobs(tag: string): Map<string, number[]> {
  const needle = `${TEST_TAG_VAR}=${tag}`;
  const jobs = new Map<string, number[]>();
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
      if (state === 'Z' || state === 'X') continue;
      const environ = readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0');
      if (!environ.includes(needle)) continue;
      const job =
        environ.find((pair) => pair.startsWith('SVC_JOB_NAME='))?.slice(13) ??
        environ.map((pair) => JOB_DIR.exec(pair)?.[1]).find((name) => name !== undefined);
      if (job) jobs.set(job, [...(jobs.get(job) ?? []), pid]);
    } catch {
      // The process ended while we looked, or is not ours to read.
    }
  }
  return jobs;
}
