import { mkdir, readlink, rename, symlink, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { AgentError } from './errors.js';

/**
 * The agent's Linux sandbox helper is the agent binary itself, run under the name
 * `codex-linux-sandbox` (it dispatches on argv[0]). With a system bubblewrap at
 * /usr/bin/bwrap, the agent execs `bwrap … --argv0 codex-linux-sandbox -- <binary> …`, and
 * bubblewrap before 0.9 (Debian 12's 0.8.0) then execvp()s that name through PATH instead of
 * the binary's path. The agent puts such a name on its own PATH only when CODEX_HOME is not
 * under the temp dir, so a runner whose agent home lives under /tmp (or anywhere, with a
 * future agent) would fail every sandboxed shell command with
 * `bwrap: execvp codex-linux-sandbox: No such file or directory`.
 *
 * The runner therefore provides the name itself: a directory in the agent home holding a
 * `codex-linux-sandbox` link to the binary, first on the agent's PATH.
 */

export const SANDBOX_HELPER_NAME = 'codex-linux-sandbox';
/** Inside CODEX_HOME; not under `tmp/`, which the agent cleans. */
const HELPER_DIR = 'svc-bin';

/** Make the helper link (idempotent, atomic replace) and return its directory. */
export async function provideSandboxHelper(codexHome: string, binary: string): Promise<string> {
  const dir = join(codexHome, HELPER_DIR);
  const link = join(dir, SANDBOX_HELPER_NAME);
  try {
    await mkdir(dir, { recursive: true, mode: 0o755 });
    if ((await readlink(link).catch(() => null)) === binary) return dir;
    // Replace by rename, so an agent already running from this home never sees no link.
    const temp = `${link}.${process.pid}.tmp`;
    await unlink(temp).catch(() => undefined);
    await symlink(binary, temp);
    await rename(temp, link);
  } catch (error) {
    throw new AgentError(
      'setup-failed',
      `cannot provide the agent's sandbox helper in ${dir}: ${(error as Error).message}`,
      { cause: error },
    );
  }
  return dir;
}
