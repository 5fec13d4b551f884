import { readFileSync } from 'node:fs';

/** The version in a package.json (a program's own: `new URL('../package.json', import.meta.url)`). */
export function packageVersion(packageJson: URL): string {
  return (JSON.parse(readFileSync(packageJson, 'utf8')) as { version: string }).version;
}

export interface ProgramInfo {
  name: string;
  /** The whole `--help` text: what the program does, how it is configured, its exit codes. */
  usage: string;
  packageJson: URL;
}

/**
 * `--help`/`-h` and `--version`/`-V` of a program configured by its environment, answered before
 * anything starts: no configuration is read, no port opened, no process started. Returns
 * whether it answered (the caller then does nothing else and exits 0).
 */
export function answerInfoFlags(
  argv: readonly string[],
  info: ProgramInfo,
  out: NodeJS.WritableStream = process.stdout,
): boolean {
  const flags = argv.slice(0, argv.includes('--') ? argv.indexOf('--') : argv.length);
  if (flags.some((a) => a === '--help' || a === '-h')) {
    out.write(`${info.usage.trim()}\n`);
    return true;
  }
  if (flags.some((a) => a === '--version' || a === '-V')) {
    out.write(`${info.name} ${packageVersion(info.packageJson)}\n`);
    return true;
  }
  return false;
}
