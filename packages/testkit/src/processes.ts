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
