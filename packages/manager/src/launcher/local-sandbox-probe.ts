import { execFile, spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';

/** Finding bubblewrap and trying it once, for the local sandbox (local-sandbox.ts). */

export function findBwrap(configured: string | null): string | null {
  if (configured) return isAbsolute(configured) && isExecutable(configured) ? configured : null;
  for (const dir of (process.env['PATH'] ?? '/usr/bin:/bin').split(delimiter)) {
    const candidate = join(dir, 'bwrap');
    if (isAbsolute(candidate) && isExecutable(candidate)) return candidate;
  }
  return null;
}

function isExecutable(path: string): boolean {
  try {
    const stat = statSync(path);
    return stat.isFile() && (stat.mode & 0o111) !== 0;
  } catch {
    return false;
  }
}

export function isDir(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

export function bwrapVersion(bwrap: string): Promise<string | null> {
  return new Promise((resolve) => {
    execFile(bwrap, ['--version'], { timeout: 5000 }, (error, stdout) =>
      resolve(error ? null : (stdout.trim().split(/\s+/).at(-1) ?? null)),
    );
  });
}

/** Start a throwaway sandbox running `node -e ''`; null when it worked, else why not. */
export function runTrial(bwrap: string, args: string[]): Promise<string | null> {
  return new Promise((resolve) => {
    const child = spawn('/bin/sh', args, { stdio: ['ignore', 'ignore', 'pipe'], env: {} });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < 4096) stderr += chunk.toString('utf8');
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('error', (error) => {
      clearTimeout(timer);
      resolve(`${bwrap} could not be started: ${error.message}`);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(null);
      else
        resolve(
          `${bwrap} could not build a sandbox on this host (exit ${code ?? signal}): ${stderr.trim().slice(-500) || 'no output'}`,
        );
    });
  });
}
