import { execFile } from 'node:child_process';
import { access, mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import { constants } from 'node:fs';
import { delimiter, dirname, isAbsolute, join } from 'node:path';
import { ServiceError } from './errors.js';

/**
 * Shared by the runner (its start check) and the manager (the summary a local runner will have):
 * a subpath of its own (`@svc/contracts/work-ready`), so the manager needs no runner package and
 * the browser bundle of the console never sees node:child_process.
 *
 * The work-ready capability summary (spec/3, "Backend image reference"): which base tools the
 * image has and their versions. Tasks never install base tools at run time, so a missing
 * required tool fails the runner fast as `infra-failed`.
 */
export interface BaseToolSpec {
  name: string;
  /** Arguments that print the version (stdout or stderr). */
  versionArgs: readonly string[];
  required: boolean;
}

export const DEFAULT_BASE_TOOLS: readonly BaseToolSpec[] = [
  { name: 'git', versionArgs: ['--version'], required: true },
  { name: 'node', versionArgs: ['--version'], required: true },
  { name: 'npm', versionArgs: ['--version'], required: true },
  { name: 'ssh', versionArgs: ['-V'], required: true },
  { name: 'curl', versionArgs: ['--version'], required: true },
  { name: 'rg', versionArgs: ['--version'], required: true },
  { name: 'kubectl', versionArgs: ['version', '--client=true'], required: true },
  { name: 'gh', versionArgs: ['--version'], required: true },
  { name: 'jq', versionArgs: ['--version'], required: true },
  { name: 'python3', versionArgs: ['--version'], required: true },
];

/** Tools the assembled PATH must resolve after the tools bundle is in place. */
export const ASSEMBLED_PATH_TOOLS: readonly string[] = ['tran', 'trans', 'apply_patch'];

export interface BaseToolFact {
  name: string;
  version: string | null;
  path: string | null;
  required: boolean;
  present: boolean;
}

export interface WorkReadySummary {
  tools: BaseToolFact[];
  dependencyPolicy: 'preinstalled-image-only';
  valuesPrinted: false;
}

export interface DetectOptions {
  tools?: readonly BaseToolSpec[];
  /** PATH to search; default process.env.PATH. */
  pathEnv?: string | undefined;
  timeoutMs?: number;
  /**
   * A file of versions already probed on this host (SVC_WORK_READY_CACHE): local runners share
   * one host, and probing ten tools (an `npm`, a version-manager shim) costs each of them
   * seconds when many start together. An entry holds while the tool's file keeps its path,
   * size and modification time.
   */
  cacheFile?: string | null;
}

export async function detectWorkReady(options: DetectOptions = {}): Promise<WorkReadySummary> {
  const specs = options.tools ?? DEFAULT_BASE_TOOLS;
  const pathEnv = options.pathEnv ?? process.env['PATH'] ?? '';
  const timeoutMs = options.timeoutMs ?? 5000;
  const cache = options.cacheFile ? await readCache(options.cacheFile) : null;
  let probed = false;
  const tools = await Promise.all(
    specs.map(async (spec): Promise<BaseToolFact> => {
      const path = await which(spec.name, pathEnv);
      let version: string | null = null;
      if (path) {
        const key = cache ? await cacheKey(path, spec.versionArgs) : null;
        if (key && cache && Object.hasOwn(cache, key)) version = cache[key] ?? null;
        else {
          version = await versionOf(path, spec.versionArgs, pathEnv, timeoutMs);
          // A probe that timed out is not remembered: the next runner tries again.
          if (key && cache && version !== null) {
            cache[key] = version;
            probed = true;
          }
        }
      }
      return { name: spec.name, version, path, required: spec.required, present: path !== null };
    }),
  );
  if (probed && cache && options.cacheFile) await writeCache(options.cacheFile, cache);
  return { tools, dependencyPolicy: 'preinstalled-image-only', valuesPrinted: false };
}

async function cacheKey(path: string, args: readonly string[]): Promise<string | null> {
  const info = await stat(path).catch(() => null);
  return info ? JSON.stringify([path, info.size, info.mtimeMs, args]) : null;
}

async function readCache(file: string): Promise<Record<string, string>> {
  try {
    const parsed: unknown = JSON.parse(await readFile(file, 'utf8'));
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed)
      ? (parsed as Record<string, string>)
      : {};
  } catch {
    return {}; // none yet, or unreadable: probe
  }
}

/** Written whole and renamed into place: a runner never reads half a file. */
async function writeCache(file: string, cache: Record<string, string>): Promise<void> {
  const temp = `${file}.${process.pid}.tmp`;
  try {
    await mkdir(dirname(file), { recursive: true });
    await writeFile(temp, JSON.stringify(cache), { mode: 0o600 });
    await rename(temp, file);
  } catch {
    // A cache that cannot be written only costs the next runner its own probes.
  }
}

/** The runner's start smoke check: every required tool present, else `infra-failed`. */
export function checkWorkReady(summary: WorkReadySummary): void {
  const missing = summary.tools.filter((t) => t.required && !t.present).map((t) => t.name);
  if (missing.length > 0) {
    throw new ServiceError(
      'infra-failed',
      `runner image is not work-ready: missing required tool${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`,
      { missing, dependencyPolicy: 'preinstalled-image-only' },
    );
  }
}

/**
 * After bundle assembly: `tran`, `trans` and `apply_patch` (or the given names) must resolve on
 * the assembled PATH (the assembly's path entries in front of the base PATH).
 */
export async function checkAssembledPath(
  pathEntries: readonly string[],
  basePath: string,
  names: readonly string[] = ASSEMBLED_PATH_TOOLS,
): Promise<Array<{ name: string; path: string }>> {
  const pathEnv = assembledPath(pathEntries, basePath);
  const found = await Promise.all(
    names.map(async (name) => ({ name, path: await which(name, pathEnv) })),
  );
  const missing = found.filter((f) => f.path === null).map((f) => f.name);
  if (missing.length > 0) {
    throw new ServiceError(
      'infra-failed',
      `assembled PATH does not resolve ${missing.join(', ')} (the tools bundle or the image must provide them)`,
      { missing },
    );
  }
  return found.map((f) => ({ name: f.name, path: f.path ?? '' }));
}

export function assembledPath(pathEntries: readonly string[], basePath: string): string {
  return [...pathEntries, ...basePath.split(delimiter).filter(Boolean)].join(delimiter);
}

/** First executable regular file named `name` on `pathEnv`. */
export async function which(name: string, pathEnv: string): Promise<string | null> {
  if (name.includes('/')) return null;
  for (const dir of pathEnv.split(delimiter)) {
    if (!dir || !isAbsolute(dir)) continue;
    const candidate = join(dir, name);
    try {
      if (!(await stat(candidate)).isFile()) continue;
      await access(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return null;
}

function versionOf(
  path: string,
  args: readonly string[],
  pathEnv: string,
  timeoutMs: number,
): Promise<string | null> {
  return new Promise((resolve) => {
    execFile(
      path,
      [...args],
      { timeout: timeoutMs, maxBuffer: 256 * 1024, env: probeEnv(pathEnv) },
      (_error, stdout, stderr) => resolve(parseVersion(`${stdout}\n${stderr}`)),
    );
  });
}

function probeEnv(pathEnv: string): Record<string, string> {
  const env: Record<string, string> = { PATH: pathEnv, LC_ALL: 'C' };
  for (const name of ['HOME', 'TMPDIR', 'SVC_TEST_TAG']) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return env;
}

/** The first dotted version number in the output: `git version 2.39.5` -> `2.39.5`. */
export function parseVersion(output: string): string | null {
  const match = /(\d+\.\d+(?:\.\d+)?(?:[-+._]?[0-9A-Za-z]+)*)/.exec(output);
  return match?.[1]?.slice(0, 64) ?? null;
}
