import { lstat, mkdir, readlink, realpath } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { checkRelativePath, ServiceError } from '@svc/contracts';

/**
 * Path safety for everything assembly writes or reads. Request-supplied paths are relative and
 * lexically confined first; after files exist on disk, their real paths are checked again, so a
 * committed symlink (`etc -> /etc`) cannot redirect a read or a write outside its root.
 */

/** Roots a workspace may never be, contain or lie inside, whatever the configuration adds. */
export const DEFAULT_FORBIDDEN_ROOTS: readonly string[] = ['/app'];

/** True when `child` is `parent` or lies below it (both absolute, normalized). */
export function isInside(parent: string, child: string): boolean {
  const rel = relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

/**
 * Refuse anything but a plain relative path: no `..`, no absolute path, no backslash, no
 * control character, no `.git` segment. The same rule the manager applied at the API.
 */
export function checkRelative(path: string, field: string, options: { allowDot?: boolean } = {}) {
  checkRelativePath(path, field, options);
}

/** `a//b/./c/` -> `a/b/c`; `.` for the root itself. */
export function normalizeRelative(path: string): string {
  const parts = path.split('/').filter((p) => p !== '' && p !== '.');
  return parts.length === 0 ? '.' : parts.join('/');
}

/** Lexically resolve a checked relative path under `root`. */
export function resolveInside(
  root: string,
  path: string,
  field: string,
  options: { allowDot?: boolean } = {},
): string {
  checkRelative(path, field, options);
  const abs = resolve(root, normalizeRelative(path));
  if (!isInside(resolve(root), abs)) {
    throw new ServiceError('schema-invalid', `${field} escapes its root: ${path}`, { field, path });
  }
  return abs;
}

/** realpath of the deepest existing ancestor of `abs`, with the missing tail appended. */
export async function realpathOfExisting(abs: string): Promise<string> {
  let current = abs;
  const tail: string[] = [];
  for (let links = 0; ;) {
    try {
      const real = await realpath(current);
      return tail.length === 0 ? real : join(real, ...tail.reverse());
    } catch (error) {
      if (!isMissing(error)) throw infra(`cannot resolve ${current}`, error);
      // A dangling symlink still says where a write through it would land: follow it.
      const link = await readlink(current).catch(() => null);
      if (link !== null && links++ < 40) {
        current = resolve(dirname(current), link);
        continue;
      }
      const parent = dirname(current);
      if (parent === current) return abs;
      tail.push(basename(current));
      current = parent;
    }
  }
}

/**
 * The real location of `abs` must stay inside the real `root`. Used after materialization for
 * every file read or copied; `field` and `shown` name the offending path in the error.
 */
export async function assertRealInside(
  root: string,
  abs: string,
  field: string,
  shown: string,
): Promise<string> {
  const realRoot = await realpathOfExisting(root);
  const real = await realpathOfExisting(abs);
  if (!isInside(realRoot, real)) {
    throw new ServiceError(
      'schema-invalid',
      `${field} ${JSON.stringify(shown)} resolves outside its root (symlink escape)`,
      { field, path: shown },
    );
  }
  return real;
}

/** Both the lexical and the real form of each forbidden root, for comparison. */
async function forbiddenForms(roots: readonly string[]): Promise<string[]> {
  const forms = new Set<string>();
  for (const root of roots) {
    if (!isAbsolute(root)) continue;
    forms.add(resolve(root));
    forms.add(await realpathOfExisting(resolve(root)));
  }
  return [...forms];
}

/** The forbidden root that `abs` is, contains or lies inside, if any. */
export async function forbiddenOverlap(
  abs: string,
  roots: readonly string[],
): Promise<string | undefined> {
  const candidates = new Set([resolve(abs), await realpathOfExisting(resolve(abs))]);
  for (const root of await forbiddenForms(roots)) {
    for (const path of candidates) {
      if (isInside(root, path) || isInside(path, root)) return root;
    }
  }
  return undefined;
}

export interface RootCheckOptions {
  /** Forbidden roots in addition to DEFAULT_FORBIDDEN_ROOTS. */
  forbiddenRoots?: readonly string[] | undefined;
  /** When set, the root must lie inside this prefix (the allowed workspace prefix). */
  prefix?: string | undefined;
  /** Create the directory when absent. */
  create?: boolean;
}

/**
 * Check a directory assembly will write into (workspace, checkout, scratch, resource bin):
 * absolute, outside every forbidden root and not containing one, inside the prefix when one is
 * configured. Returns its real path.
 */
export async function checkWritableRoot(
  dir: string,
  field: string,
  options: RootCheckOptions = {},
): Promise<string> {
  if (!isAbsolute(dir) || dir.includes('\0')) {
    throw new ServiceError('schema-invalid', `${field} must be an absolute path (got ${dir})`, {
      field,
      path: dir,
    });
  }
  const roots = [...DEFAULT_FORBIDDEN_ROOTS, ...(options.forbiddenRoots ?? [])];
  const hit = await forbiddenOverlap(dir, roots);
  if (hit !== undefined) {
    throw new ServiceError(
      'schema-invalid',
      `${field} ${dir} overlaps the forbidden root ${hit} (/app, Secret projections, agent home and session directories are never written)`,
      { field, path: dir, forbiddenRoot: hit },
    );
  }
  if (options.prefix !== undefined) {
    const prefix = await realpathOfExisting(resolve(options.prefix));
    if (!isInside(prefix, await realpathOfExisting(resolve(dir)))) {
      throw new ServiceError(
        'schema-invalid',
        `${field} ${dir} is not under the allowed workspace prefix ${options.prefix}`,
        { field, path: dir, prefix: options.prefix },
      );
    }
  }
  if (options.create) {
    try {
      await mkdir(dir, { recursive: true });
    } catch (error) {
      throw infra(`cannot create ${field} ${dir}`, error);
    }
  }
  try {
    const info = await lstat(dir);
    if (!info.isDirectory() && !info.isSymbolicLink()) {
      throw new ServiceError('infra-failed', `${field} ${dir} is not a directory`, { field });
    }
  } catch (error) {
    if (error instanceof ServiceError) throw error;
    throw infra(`${field} ${dir} is not accessible`, error);
  }
  return realpath(dir);
}

export function isMissing(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** An environment problem (I/O, permissions): `infra-failed` with the errno code only. */
export function infra(message: string, error: unknown): ServiceError {
  const code = (error as { code?: unknown } | null)?.code;
  return new ServiceError(
    'infra-failed',
    typeof code === 'string' ? `${message} (${code})` : message,
    {
      ...(typeof code === 'string' ? { code } : {}),
    },
  );
}
