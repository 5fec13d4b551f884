import { readFileSync } from 'node:fs';
import { open, readFile, stat, unlink, utimes } from 'node:fs/promises';
import { hostname } from 'node:os';

/**
 * One manager per embedded data directory. PGlite is a single-process engine: a second process
 * opening the same files corrupts them (the second one later dies with `Aborted()`), so the
 * directory is claimed with a lock file created exclusively (O_EXCL) beside it.
 *
 * The lock names its holder (pid, host, process start time). A lock left by a process that is
 * gone is taken over: on the same host the pid is checked (and its start time, so a recycled
 * pid does not count); from another host (a shared volume) the holder refreshes the file's
 * mtime every few seconds and a lock not refreshed for STALE_MS counts as gone.
 */
export class DataDirLockedError extends Error {
  constructor(
    readonly dataDir: string,
    readonly holder: LockHolder,
    readonly lockFile: string,
  ) {
    super(
      `the embedded data directory ${dataDir} is in use by another run manager ` +
        `(pid ${holder.pid} on host ${holder.host}, since ${holder.startedAt}); stop it first, ` +
        `or point this one at another SVC_DATA_DIR or at PostgreSQL with DATABASE_URL ` +
        `(lock file ${lockFile})`,
    );
    this.name = 'DataDirLockedError';
  }
}

export interface LockHolder {
  pid: number;
  host: string;
  startedAt: string;
  /** The holder's process start time (clock ticks since boot), when the OS tells it. */
  processStart: string | null;
}

export interface DataDirLock {
  readonly file: string;
  release(): Promise<void>;
}

const REFRESH_MS = 5_000;
const STALE_MS = 30_000;

export async function lockDataDir(dataDir: string): Promise<DataDirLock> {
  const file = `${dataDir}.lock`;
  const me: LockHolder = {
    pid: process.pid,
    host: hostname(),
    startedAt: new Date().toISOString(),
    processStart: processStart(process.pid),
  };
  // Two tries: the second follows the removal of a stale lock.
  for (let attempt = 0; attempt < 2; attempt += 1) {
    try {
      const handle = await open(file, 'wx', 0o600);
      await handle.writeFile(`${JSON.stringify(me)}\n`);
      await handle.close();
      return heldLock(file, me);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = await readHolder(file);
    if (holder && (await holderAlive(file, holder)))
      throw new DataDirLockedError(dataDir, holder, file);
    await unlink(file).catch(() => undefined);
  }
  const holder = await readHolder(file);
  throw new DataDirLockedError(
    dataDir,
    holder ?? { pid: 0, host: 'unknown', startedAt: 'unknown', processStart: null },
    file,
  );
}

function heldLock(file: string, me: LockHolder): DataDirLock {
  const timer = setInterval(() => {
    const now = new Date();
    void utimes(file, now, now).catch(() => undefined);
  }, REFRESH_MS);
  timer.unref();
  let released = false;
  return {
    file,
    async release() {
      if (released) return;
      released = true;
      clearInterval(timer);
      // Only our own lock is removed: a takeover after a long pause must not lose its lock.
      const current = await readHolder(file);
      if (current && current.pid === me.pid && current.host === me.host)
        await unlink(file).catch(() => undefined);
    },
  };
}

async function readHolder(file: string): Promise<LockHolder | null> {
  try {
    const parsed = JSON.parse(await readFile(file, 'utf8')) as Partial<LockHolder>;
    if (typeof parsed.pid !== 'number' || typeof parsed.host !== 'string') return null;
    return {
      pid: parsed.pid,
      host: parsed.host,
      startedAt: typeof parsed.startedAt === 'string' ? parsed.startedAt : 'unknown',
      processStart: typeof parsed.processStart === 'string' ? parsed.processStart : null,
    };
  } catch {
    // Unreadable or half-written: a holder that crashed while writing it.
    return null;
  }
}

async function holderAlive(file: string, holder: LockHolder): Promise<boolean> {
  if (holder.host !== hostname()) {
    const info = await stat(file).catch(() => null);
    return info !== null && Date.now() - info.mtimeMs < STALE_MS;
  }
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  // A live pid with another start time was recycled (a restarted container is pid 1 again).
  const start = processStart(holder.pid);
  return holder.processStart === null || start === null || start === holder.processStart;
}

/** Field 22 of /proc/<pid>/stat (start time), or null where /proc is not there. */
function processStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}
