import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

/** Runs the built `auth-broker` binary as users do: a child process with its own environment. */
export const ROOT = join(import.meta.dirname, '../../..');
export const BIN = join(ROOT, 'packages/auth-broker/bin/auth-broker.js');

const exec = promisify(execFile);

/**
 * Build the package (and what it references); a no-op when dist is current. Test files run in
 * parallel, so builds are serialized through a lock directory.
 */
export async function buildCli(): Promise<void> {
  const lock = join(ROOT, 'packages/auth-broker/.build-lock');
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      await mkdir(lock);
      break;
    } catch {
      // A lock left by a killed run is taken over once it is clearly stale.
      const age = Date.now() - ((await stat(lock).catch(() => null))?.mtimeMs ?? Date.now());
      if (age > 120_000) await rm(lock, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error(`build lock ${lock} held too long`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  try {
    await exec(
      process.execPath,
      [
        join(ROOT, 'node_modules/typescript/bin/tsc'),
        '-b',
        'packages/auth-broker/tsconfig.build.json',
      ],
      { cwd: ROOT },
    );
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
}

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  json: any;
}

/** A minimal environment: nothing of the test process leaks in unless given. */
export function baseEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env['PATH'] ?? '/usr/bin:/bin',
    HOME: process.env['HOME'] ?? '/tmp',
    ...extra,
  };
}

export async function runCli(args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  try {
    const { stdout, stderr } = await exec(process.execPath, [BIN, ...args], {
      env: baseEnv(env),
      cwd: ROOT,
    });
    return { code: 0, stdout, stderr, json: parse(stdout) };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    const stdout = e.stdout ?? '';
    return {
      code: typeof e.code === 'number' ? e.code : -1,
      stdout,
      stderr: e.stderr ?? '',
      json: parse(stdout),
    };
  }
}

function parse(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export interface ServeProcess {
  child: ChildProcess;
  url: string;
  stdout: () => string;
  stderr: () => string;
  stop(): Promise<number | null>;
}

/** `auth-broker serve` on port 0; resolves once it logs its address. */
export function serve(env: Record<string, string>): Promise<ServeProcess> {
  const child = spawn(process.execPath, [BIN, 'serve'], {
    env: baseEnv({ AUTH_BROKER_PORT: '0', ...env }),
    cwd: ROOT,
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start: ${err}`)), 10_000);
    const early = (code: number | null) => {
      clearTimeout(timer);
      reject(new Error(`serve exited ${code}: ${err}`));
    };
    child.on('exit', early);
    let started = false;
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      const match = /"url":"(http:\/\/[^"]+)"/.exec(err);
      if (started || !match) return;
      started = true;
      clearTimeout(timer);
      child.off('exit', early);
      resolve({
        child,
        url: match[1]!,
        stdout: () => out,
        stderr: () => err,
        stop: () =>
          new Promise((done) => {
            if (child.exitCode !== null || child.signalCode !== null) return done(child.exitCode);
            child.once('exit', (code) => done(code));
            child.kill('SIGTERM');
          }),
      });
    });
  });
}
