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
 * anything starts: no configuration is read, no port opened, no process started. Any other
 * argument is a usage error (standard error, exit status 2), never ignored: `-v` or `--port
 * 9000` must not start a program the person meant to configure otherwise. Returns whether it
 * answered (the caller then does nothing else; the exit status is set).
 */
export function answerInfoFlags(
  argv: readonly string[],
  info: ProgramInfo,
  out: NodeJS.WritableStream = process.stdout,
  err: NodeJS.WritableStream = process.stderr,
): boolean {
  if (argv.some((a) => a === '--help' || a === '-h')) {
    out.write(`${info.usage.trim()}\n`);
    return true;
  }
  if (argv.some((a) => a === '--version' || a === '-V')) {
    out.write(`${info.name} ${packageVersion(info.packageJson)}\n`);
    return true;
  }
  const unknown = argv[0];
  if (unknown === undefined) return false;
  err.write(
    `${info.name}: unknown argument ${JSON.stringify(unknown)}: it takes only --help (-h) and --version (-V); ` +
      `it is configured by environment variables (\`${info.name} --help\` lists them)\n`,
  );
  process.exitCode = 2;
  return true;
}
