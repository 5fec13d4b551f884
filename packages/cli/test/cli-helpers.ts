import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Runs the BUILT clients (`node packages/cli/bin/<name>.js`) as a user would: a child process
 * with its own environment, standard input piped in, standard output either a pipe (the JSON
 * default) or, through util-linux `script`, a real terminal (the human default).
 */
const BIN = join(import.meta.dirname, '..', 'bin');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  env?: Record<string, string>;
  stdin?: string;
  /** Run under a pseudo-terminal (standard output is a TTY). */
  tty?: boolean;
  timeoutMs?: number;
}

/** Every output of every client call of a test file, for the canary checks. */
export const transcript: string[] = [];

export function assertBuilt(): void {
  assert.ok(
    existsSync(join(BIN, '..', 'dist', 'queue.js')),
    'build first: npx tsc -b tsconfig.build.json',
  );
}

const quote = (arg: string) => `'${arg.replaceAll("'", `'\\''`)}'`;

export function cli(
  name: 'queue' | 'sessions' | 'runs',
  args: string[],
  options: CliOptions = {},
): Promise<CliResult> {
  const env = { PATH: process.env['PATH'] ?? '', ...options.env };
  const argv = [join(BIN, `${name}.js`), ...args];
  const child = options.tty
    ? spawn('script', ['-qec', [process.execPath, ...argv].map(quote).join(' '), '/dev/null'], {
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      })
    : spawn(process.execPath, argv, { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  if (!options.tty) child.stdin!.end(options.stdin ?? '');
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 30_000);
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      const result = {
        code: code ?? -1,
        stdout: options.tty ? stdout.replaceAll('\r\n', '\n') : stdout,
        stderr,
      };
      transcript.push(result.stdout, result.stderr);
      resolve(result);
    });
  });
}

/** Run and parse the JSON standard output, insisting on success. */
export async function cliJson(
  name: 'queue' | 'sessions' | 'runs',
  args: string[],
  options: CliOptions = {},
): Promise<any> {
  const result = await cli(name, args, options);
  assert.equal(result.code, 0, `${name} ${args.join(' ')}: ${result.stderr}${result.stdout}`);
  return JSON.parse(result.stdout);
}

/** A colour code (SGR), as the clients print them on a terminal. */
const ANSI = new RegExp(`${String.fromCharCode(27)}\\[\\d+m`, 'g');

/** Bounded: no line longer than the client's cap, and not more lines than expected. */
export function assertBounded(text: string, maxLines: number): void {
  // The bound is on what a person sees: colour codes take no columns.
  const lines = text.replace(ANSI, '').split('\n');
  assert.ok(lines.length <= maxLines, `${lines.length} lines > ${maxLines}`);
  for (const line of lines) assert.ok(line.length <= 200, `line of ${line.length}: ${line}`);
}
