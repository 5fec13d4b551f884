import { existsSync, lstatSync, readdirSync, realpathSync, statSync } from 'node:fs';
import { lchown, lstat, readdir } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { inside } from './local-sandbox-args.js';

/** Filesystem facts the sandbox plan needs: what the runner reads, who may read it, ownership. */

/**
 * What a runner needs to run, read-only: Node's installation, the runner's package, every
 * node_modules on its resolution path, the packages those link to (workspace packages), and
 * the service's tools/ next to the runner package (the runner's default SVC_SERVICE_TOOLS_DIR).
 * A runner entry outside any package stands alone: its directory.
 */
export function runnerFiles(
  nodePath: string,
  runnerEntry: string,
): { paths: string[]; packaged: boolean } {
  const paths = [nodeInstall(nodePath)];
  const entry = realpathSync(runnerEntry);
  const pkg = packageRoot(dirname(entry));
  if (!pkg) return { paths: unique([...paths, dirname(entry)]), packaged: false };
  paths.push(pkg);
  const modules: string[] = [];
  for (let dir = pkg; ; dir = dirname(dir)) {
    const nm = join(dir, 'node_modules');
    if (existsSync(nm)) modules.push(realpathSync(nm));
    if (dir === dirname(dir)) break;
  }
  paths.push(...modules);
  for (const nm of modules)
    for (const target of linkedPackages(nm))
      if (!modules.some((m) => inside(target, m))) paths.push(target);
  const tools = resolve(pkg, '..', '..', 'tools');
  if (existsSync(join(tools, 'apply_patch'))) paths.push(realpathSync(tools));
  return { paths: unique(paths), packaged: true };
}

/** `<prefix>` of `<prefix>/bin/node`; the binary's own directory otherwise. */
export function nodeInstall(nodePath: string): string {
  const binary = realpathSync(nodePath);
  const bin = dirname(binary);
  return basename(bin) === 'bin' ? dirname(bin) : bin;
}

function packageRoot(from: string): string | null {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dir === dirname(dir)) return null;
  }
}

/** Targets of the symlinked packages in a node_modules (npm workspaces link them). */
function linkedPackages(nm: string): string[] {
  const out: string[] = [];
  const visit = (dir: string, depth: number) => {
    for (const name of safeReaddir(dir)) {
      if (name.startsWith('.')) continue;
      const path = join(dir, name);
      const stat = safeLstat(path);
      if (!stat) continue;
      if (stat.isSymbolicLink()) {
        const target = safeRealpath(path);
        if (target && safeStat(target)?.isDirectory()) out.push(target);
      } else if (depth === 0 && name.startsWith('@') && stat.isDirectory()) visit(path, 1);
    }
  };
  visit(nm, 0);
  return out;
}

/** Drop duplicates and paths inside another listed path. */
function unique(paths: string[]): string[] {
  const sorted = [...new Set(paths)].sort((a, b) => a.length - b.length);
  return sorted.filter((p, i) => !sorted.slice(0, i).some((q) => inside(p, q)));
}

/**
 * Whether a process of `uid`/`gid` (no supplementary groups) may read `path` (`r`) or enter
 * it (`x`, for a directory): every ancestor must be searchable. Mode bits only.
 */
export function accessibleBy(path: string, uid: number, gid: number, want: 'r' | 'x'): boolean {
  const parts = resolve(path).split('/').filter(Boolean);
  let current = '/';
  for (let i = 0; i <= parts.length; i++) {
    const stat = safeStat(current);
    if (!stat) return false;
    const last = i === parts.length;
    const bits = stat.uid === uid ? stat.mode >> 6 : stat.gid === gid ? stat.mode >> 3 : stat.mode;
    const need = last ? (want === 'r' ? 4 : 1) : 1;
    if ((bits & need) === 0) return false;
    if (!last) current = join(current, parts[i]!);
  }
  return true;
}

/** Give a tree to the job's user (symlinks themselves, never what they point at). */
export async function chownTree(path: string, uid: number, gid: number): Promise<void> {
  const stat = await lstat(path).catch(() => null);
  if (!stat) return;
  if (stat.uid !== uid || stat.gid !== gid) await lchown(path, uid, gid);
  if (!stat.isDirectory()) return;
  for (const name of await readdir(path)) await chownTree(join(path, name), uid, gid);
}

/** Regular files of a Secret revision directory, `..meta.json` and other dot files aside. */
export function secretFiles(dir: string, keys: readonly string[]): string[] {
  const names = keys.length > 0 ? keys : safeReaddir(dir).filter((n) => !n.startsWith('.'));
  return names.filter((n) => !n.includes('/') && safeStat(join(dir, n))?.isFile());
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function safeLstat(path: string) {
  try {
    return lstatSync(path);
  } catch {
    return null;
  }
}

function safeStat(path: string) {
  try {
    return statSync(path);
  } catch {
    return null;
  }
}

function safeRealpath(path: string): string | null {
  try {
    return realpathSync(path);
  } catch {
    return null;
  }
}
