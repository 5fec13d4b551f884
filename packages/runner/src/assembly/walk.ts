import { lstat, readdir, realpath, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { ServiceError } from '@svc/contracts';
import { infra, isInside } from './paths.js';

/**
 * A bounded walk of a tree inside a root. Symlinks are followed only when their real target stays
 * inside the root (anything else is a `schema-invalid` escape naming the link); `.git` is never
 * entered; a directory already on the current path (a symlink loop) is refused.
 */
export interface WalkEntry {
  /** Path relative to the walked directory, `/`-separated; '' for a file walked directly. */
  rel: string;
  kind: 'file' | 'dir';
  /** Real path of the content (after symlinks). */
  real: string;
  mode: number;
  size: number;
}

export interface WalkOptions {
  /** Real path of the root every entry must stay inside. */
  realRoot: string;
  /** Used in error messages: `<field> <shown>/<rel>`. */
  field: string;
  shown: string;
  maxFiles: number;
  maxBytes: number;
}

export interface WalkResult {
  entries: WalkEntry[];
  files: number;
  bytes: number;
}

export async function walkTree(start: string, options: WalkOptions): Promise<WalkResult> {
  const result: WalkResult = { entries: [], files: 0, bytes: 0 };
  const top = await resolveEntry(start, '', options);
  if (top.kind === 'file') {
    add(result, top, options);
    return result;
  }
  await walkDir(top.real, '', new Set([top.real]), result, options);
  return result;
}

async function walkDir(
  dir: string,
  rel: string,
  ancestors: Set<string>,
  result: WalkResult,
  options: WalkOptions,
): Promise<void> {
  let names: string[];
  try {
    names = (await readdir(dir)).sort();
  } catch (error) {
    throw infra(`cannot read ${joinShown(options.shown, rel)}`, error);
  }
  for (const name of names) {
    if (name === '.git') continue;
    const childRel = rel === '' ? name : `${rel}/${name}`;
    const entry = await resolveEntry(join(dir, name), childRel, options);
    if (entry.kind === 'file') {
      add(result, entry, options);
      continue;
    }
    if (ancestors.has(entry.real)) {
      throw new ServiceError(
        'schema-invalid',
        `${options.field} ${joinShown(options.shown, childRel)} is a symlink loop`,
        { field: options.field, path: joinShown(options.shown, childRel) },
      );
    }
    result.entries.push(entry);
    await walkDir(entry.real, childRel, new Set([...ancestors, entry.real]), result, options);
  }
}

async function resolveEntry(abs: string, rel: string, options: WalkOptions): Promise<WalkEntry> {
  const shown = rel === '' ? options.shown : joinShown(options.shown, rel);
  let info = await lstat(abs).catch((error: unknown) => {
    throw infra(`cannot stat ${shown}`, error);
  });
  let real = abs;
  if (info.isSymbolicLink()) {
    try {
      real = await realpath(abs);
    } catch {
      throw new ServiceError('schema-invalid', `${options.field} ${shown} is a dangling symlink`, {
        field: options.field,
        path: shown,
      });
    }
    if (!isInside(options.realRoot, real)) {
      throw new ServiceError(
        'schema-invalid',
        `${options.field} ${shown} is a symlink that resolves outside its root`,
        { field: options.field, path: shown },
      );
    }
    info = await stat(real);
  } else {
    real = await realpath(abs);
    if (!isInside(options.realRoot, real)) {
      throw new ServiceError(
        'schema-invalid',
        `${options.field} ${shown} resolves outside its root`,
        {
          field: options.field,
          path: shown,
        },
      );
    }
  }
  if (info.isDirectory()) return { rel, kind: 'dir', real, mode: info.mode, size: 0 };
  if (info.isFile()) return { rel, kind: 'file', real, mode: info.mode, size: info.size };
  throw new ServiceError('schema-invalid', `${options.field} ${shown} is not a file or directory`, {
    field: options.field,
    path: shown,
  });
}

function joinShown(base: string, rel: string): string {
  return base === '.' || base === '' ? rel : `${base}/${rel}`;
}

function add(result: WalkResult, entry: WalkEntry, options: WalkOptions): void {
  result.entries.push(entry);
  result.files += 1;
  result.bytes += entry.size;
  if (result.files > options.maxFiles || result.bytes > options.maxBytes) {
    throw new ServiceError(
      'schema-invalid',
      `${options.field} ${options.shown} exceeds the copy limit (${options.maxFiles} files, ${options.maxBytes} bytes)`,
      {
        field: options.field,
        path: options.shown,
        maxFiles: options.maxFiles,
        maxBytes: options.maxBytes,
      },
    );
  }
}

export interface TreeCount {
  files: number;
  bytes: number;
  symlinks: number;
  /** Symlinks whose target resolves outside the root (never followed; listed, bounded). */
  escapingSymlinks: string[];
  truncated: boolean;
}

/**
 * Count a tree without following symlinks, for the workspace summary. A symlink pointing outside
 * is listed, not refused: it only matters where assembly reads through it, and there it is.
 */
export async function countTree(root: string, maxEntries = 200_000): Promise<TreeCount> {
  const realRoot = await realpath(root);
  const count: TreeCount = {
    files: 0,
    bytes: 0,
    symlinks: 0,
    escapingSymlinks: [],
    truncated: false,
  };
  let seen = 0;
  const visit = async (dir: string, rel: string): Promise<void> => {
    for (const name of (await readdir(dir)).sort()) {
      if (name === '.git' && rel === '') continue;
      if (++seen > maxEntries) {
        count.truncated = true;
        return;
      }
      const abs = join(dir, name);
      const childRel = rel === '' ? name : `${rel}/${name}`;
      const info = await lstat(abs);
      if (info.isSymbolicLink()) {
        count.symlinks += 1;
        const target = await realpath(abs).catch(() => undefined);
        if (
          target !== undefined &&
          !isInside(realRoot, target) &&
          count.escapingSymlinks.length < 20
        ) {
          count.escapingSymlinks.push(childRel);
        }
      } else if (info.isDirectory()) {
        await visit(abs, childRel);
        if (count.truncated) return;
      } else if (info.isFile()) {
        count.files += 1;
        count.bytes += info.size;
      }
    }
  };
  await visit(realRoot, '');
  return count;
}
