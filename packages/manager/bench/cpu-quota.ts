import { existsSync } from 'node:fs';
import { mkdir, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * A CPU quota for one benchmark process, as a pod's CPU limit holds a replica: a cgroup of its
 * own with `cores` cores' worth of time per 100 ms period (the kernel's default, and a pod's). On a machine of two cores shared
 * with PostgreSQL and the simulated fleet, two replicas without a limit compete for the same
 * cores, so what a second replica adds can only be measured with each held to the same
 * share. cgroup v1 (`cpu` controller) or v2 (`cpu.max`); root only. Null: no writable cgroup
 * here (the caller says so and skips what needs it).
 */
export interface CpuQuota {
  /** Moves the process (all its threads) into the quota. */
  add(pid: number): Promise<void>;
  /** Removes the cgroup (its processes must have exited). */
  remove(): Promise<void>;
}

const V1 = '/sys/fs/cgroup/cpu';
const V2 = '/sys/fs/cgroup';
const PERIOD_US = 100_000;

export async function cpuQuota(name: string, cores: number): Promise<CpuQuota | null> {
  const quotaUs = String(Math.round(cores * PERIOD_US));
  try {
    if (existsSync(join(V1, 'cpu.cfs_quota_us'))) {
      const dir = join(V1, name);
      await mkdir(dir, { recursive: true });
      await writeFile(join(dir, 'cpu.cfs_period_us'), String(PERIOD_US));
      await writeFile(join(dir, 'cpu.cfs_quota_us'), quotaUs);
      return group(dir);
    }
    if (existsSync(join(V2, 'cgroup.controllers'))) {
      await writeFile(join(V2, 'cgroup.subtree_control'), '+cpu');
      const dir = join(V2, name);
      await mkdir(dir, { recursive: true });
      await writeFile(join(dir, 'cpu.max'), `${quotaUs} ${PERIOD_US}`);
      return group(dir);
    }
  } catch {
    // Not root, or a read-only cgroup file system (a container): no quota here.
  }
  return null;
}

function group(dir: string): CpuQuota {
  return {
    add: (pid) => writeFile(join(dir, 'cgroup.procs'), String(pid)),
    async remove() {
      // The kernel reports an exited process's removal from its cgroup a moment after exit.
      for (let tries = 0; ; tries++) {
        try {
          return await rmdir(dir);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
          if (tries >= 50) throw error;
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    },
  };
}
