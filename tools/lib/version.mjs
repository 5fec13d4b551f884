// The tools ship with the repository (and are copied beside its package.json into the runner
// image): their version is the root package.json's.
import { readFileSync } from 'node:fs';

export function toolsVersion() {
  try {
    return JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version;
  } catch {
    return 'unknown';
  }
}

/** `<tool> --version`: one line on standard output, exit 0. */
export function printVersion(tool) {
  process.stdout.write(`${tool} ${toolsVersion()}\n`);
  return 0;
}
