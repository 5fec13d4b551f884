import { chmod, copyFile, lstat, mkdir, rename, rm, unlink } from 'node:fs/promises';
import { constants } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, join, relative } from 'node:path';
import { reachesGitDir, ServiceError } from '@svc/contracts';
import {
  assertRealInside,
  forbiddenOverlap,
  infra,
  isInside,
  isMissing,
  normalizeRelative,
  realpathOfExisting,
  resolveInside,
} from './paths.js';
import { walkTree } from './walk.js';

/**
 * Copy one `bundles[]` item: a file or a whole directory (multi-file skills stay whole) from
 * `subpath` of a checkout to `target_path` of the workspace. Every source file is checked by real
 * path; every destination directory is checked by real path before anything is written into it,
 * and a destination symlink is replaced rather than written through.
 */
export interface CopyLimits {
  maxFiles: number;
  maxBytes: number;
}

export const DEFAULT_COPY_LIMITS: CopyLimits = { maxFiles: 20_000, maxBytes: 512 * 1024 * 1024 };

export interface CopyRequest {
  /** Real path of the checkout the item reads from. */
  sourceRoot: string;
  subpath: string;
  /** Real path of the workspace. */
  workspaceRoot: string;
  targetPath: string;
  /** `resourceBundleRef.bundles[i]` (or `default-bundles.<name>`), for error messages. */
  field: string;
  forbiddenRoots: readonly string[];
  limits: CopyLimits;
}

export interface CopyResult {
  kind: 'file' | 'directory';
  files: number;
  bytes: number;
  /** Source and target are the same place (the checkout is the workspace): nothing copied. */
  inPlace: boolean;
}

export async function copyBundleItem(request: CopyRequest): Promise<CopyResult> {
  const { field } = request;
  const source = resolveInside(request.sourceRoot, request.subpath, `${field}.subpath`, {
    allowDot: true,
  });
  try {
    await lstat(source);
  } catch (error) {
    if (!isMissing(error)) throw infra(`cannot read ${request.subpath}`, error);
    throw new ServiceError(
      'schema-invalid',
      `${field}.subpath ${JSON.stringify(request.subpath)} does not exist in the checkout`,
      { field: `${field}.subpath`, path: request.subpath },
    );
  }
  const sourceReal = await assertRealInside(
    request.sourceRoot,
    source,
    `${field}.subpath`,
    request.subpath,
  );
  const target = resolveInside(request.workspaceRoot, request.targetPath, `${field}.target_path`, {
    allowDot: true,
  });
  const targetReal = await checkTarget(request, target);

  if (
    sourceReal !== targetReal &&
    (isInside(sourceReal, targetReal) || isInside(targetReal, sourceReal))
  ) {
    throw new ServiceError(
      'schema-invalid',
      `${field}: subpath ${request.subpath} and target_path ${request.targetPath} overlap`,
      { field, subpath: request.subpath, target_path: request.targetPath },
    );
  }
  const tree = await walkTree(source, {
    realRoot: request.sourceRoot,
    field: `${field}.subpath`,
    shown: normalizeRelative(request.subpath),
    ...request.limits,
  });
  const isFile = tree.entries.length === 1 && tree.entries[0]?.rel === '';
  const result = {
    kind: isFile ? ('file' as const) : ('directory' as const),
    files: tree.files,
    bytes: tree.bytes,
  };
  if (sourceReal === targetReal) return { ...result, inPlace: true };

  const dirs = new Map<string, Promise<void>>();
  const ensureDir = (dir: string) => {
    let pending = dirs.get(dir);
    if (!pending) {
      pending = safeMkdir(request, dir);
      dirs.set(dir, pending);
    }
    return pending;
  };
  for (const entry of tree.entries) {
    const dest = entry.rel === '' ? target : join(target, ...entry.rel.split('/'));
    if (entry.kind === 'dir') {
      await ensureDir(dest);
      continue;
    }
    await ensureDir(dirname(dest));
    await writeFileAtomically(entry.real, dest, entry.mode, request);
  }
  if (!isFile) await ensureDir(target);
  return { ...result, inPlace: false };
}

async function checkTarget(request: CopyRequest, target: string): Promise<string> {
  const field = `${request.field}.target_path`;
  const hit = await forbiddenOverlap(target, request.forbiddenRoots);
  if (hit !== undefined) {
    throw new ServiceError(
      'schema-invalid',
      `${field} ${JSON.stringify(request.targetPath)} lands on the forbidden root ${hit}`,
      { field, path: request.targetPath, forbiddenRoot: hit },
    );
  }
  const real = await assertRealInside(request.workspaceRoot, target, field, request.targetPath);
  // A symlink committed into the workspace (`hooks -> .git/hooks`) must not land a copy there.
  if (reachesGitDir(relative(await realpathOfExisting(request.workspaceRoot), real))) {
    throw new ServiceError(
      'schema-invalid',
      `${field} ${JSON.stringify(request.targetPath)} resolves into .git`,
      { field, path: request.targetPath },
    );
  }
  return real;
}

/** mkdir -p, refusing when the real location of the directory leaves the workspace. */
async function safeMkdir(request: CopyRequest, dir: string): Promise<void> {
  const shown = dir.slice(request.workspaceRoot.length + 1) || '.';
  const field = `${request.field}.target_path`;
  const real = await realpathOfExisting(dir);
  if (
    !isInside(request.workspaceRoot, real) ||
    reachesGitDir(relative(request.workspaceRoot, real)) ||
    (await forbiddenOverlap(real, request.forbiddenRoots))
  ) {
    throw new ServiceError('schema-invalid', `${field} ${shown} resolves outside the workspace`, {
      field,
      path: shown,
    });
  }
  try {
    await mkdir(dir, { recursive: true });
  } catch (error) {
    throw new ServiceError('schema-invalid', `${field}: cannot create directory ${shown}`, {
      field,
      path: shown,
      ...(typeof (error as { code?: unknown }).code === 'string'
        ? { code: (error as { code: string }).code }
        : {}),
    });
  }
  await assertRealInside(request.workspaceRoot, dir, field, shown);
}

/** Copy to a temporary sibling, then rename: a reader never sees half a file. */
async function writeFileAtomically(
  from: string,
  dest: string,
  mode: number,
  request: CopyRequest,
): Promise<void> {
  const shown = dest.slice(request.workspaceRoot.length + 1);
  try {
    const existing = await lstat(dest);
    if (existing.isDirectory()) {
      throw new ServiceError(
        'schema-invalid',
        `${request.field}.target_path: ${shown} is a directory in the workspace; a file cannot replace it`,
        { field: `${request.field}.target_path`, path: shown },
      );
    }
    // Replace a symlink (or file) rather than write through it.
    if (existing.isSymbolicLink()) await unlink(dest);
  } catch (error) {
    if (error instanceof ServiceError) throw error;
    if (!isMissing(error)) throw infra(`cannot inspect ${shown}`, error);
  }
  const temp = join(dirname(dest), `.svc-copy-${randomBytes(6).toString('hex')}`);
  try {
    await copyFile(from, temp, constants.COPYFILE_EXCL);
    await chmod(temp, mode & 0o777);
    await rename(temp, dest);
  } catch (error) {
    await rm(temp, { force: true });
    throw infra(`cannot write ${shown}`, error);
  }
}
