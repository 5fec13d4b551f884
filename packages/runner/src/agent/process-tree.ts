import { readdirSync, readFileSync } from 'node:fs';

/**
 * Killing the agent's whole tree. The agent runs in its own process group, but the shell
 * commands it starts get their own session (setsid for a pseudo-terminal), so a group kill
 * alone would leave them running, re-parented to init. We therefore freeze the tree first
 * (SIGSTOP, so nothing forks or re-parents while we look), collect every descendant through
 * /proc, then SIGKILL all of them and the group.
 */

function parentOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 4 follows the command name, which is parenthesised and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ppid = Number(fields[1]);
    return Number.isInteger(ppid) ? ppid : undefined;
  } catch {
    return undefined; // gone, or not readable
  }
}

/** Every live descendant of `root` (not including it), from one scan of /proc. */
export function descendantsOf(root: number): number[] {
  const children = new Map<number, number[]>();
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return []; // no procfs: only the group kill is available
  }
  for (const entry of entries) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const ppid = parentOf(pid);
    if (ppid === undefined) continue;
    const list = children.get(ppid);
    if (list) list.push(pid);
    else children.set(ppid, [pid]);
  }
  const found: number[] = [];
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    for (const child of children.get(pid) ?? []) {
      if (found.includes(child)) continue;
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/**
 * SIGKILL `root`, its process group and every descendant. Returns the pids signalled.
 * Safe to call on a tree that is already gone.
 */
export function killProcessTree(root: number, options: { group?: boolean } = {}): number[] {
  const frozen = new Set<number>();
  signal(root, 'SIGSTOP');
  frozen.add(root);
  // Freeze until no new descendant appears (a fork in flight shows up on the next scan).
  for (let pass = 0; pass < 5; pass++) {
    const fresh = descendantsOf(root).filter((pid) => !frozen.has(pid));
    if (fresh.length === 0) break;
    for (const pid of fresh) {
      signal(pid, 'SIGSTOP');
      frozen.add(pid);
    }
  }
  if (options.group !== false) signal(-root, 'SIGKILL');
  for (const pid of frozen) signal(pid, 'SIGKILL');
  return [...frozen];
}
