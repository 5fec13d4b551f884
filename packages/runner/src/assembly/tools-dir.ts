import { chmod, lstat, open, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { ServiceError, sha256Hex } from '@svc/contracts';
import { assertRealInside, checkWritableRoot, infra, isMissing } from './paths.js';
import { walkTree } from './walk.js';

/**
 * Workspace `tools/` (spec/3, "Tools directory"): top-level files with a shebang are the tools
 * and become executable; everything else is a support file. `tools/` joins the search path.
 * When a resource bin path is configured, it receives only shims that exec the workspace tool,
 * so there is one copy of every tool and its support files stay next to it.
 */
export const TOOLS_DIR = 'tools';
const SHIM_MARKER = '# svc-resource-shim';
const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$/;
const MAX_TOOLS = 256;
const MAX_LISTED_SUPPORT = 50;

export interface ToolFact {
  name: string;
  /** Workspace-relative path, `tools/<name>`. */
  path: string;
  sha256: string;
  bytes: number;
  /** Interpreter named by the shebang (`node` for `#!/usr/bin/env node`). */
  interpreter: string;
  shebang: string;
  /** Absolute path of its shim in the resource bin path, or null. */
  shimPath: string | null;
}

export interface ToolsSummary {
  dir: string;
  present: boolean;
  pathEntry: string | null;
  tools: ToolFact[];
  toolsTruncated: boolean;
  supportFiles: { count: number; bytes: number; names: string[] };
  skipped: Array<{ name: string; reason: 'unsafe-name' | 'too-many-tools' }>;
  resourceBinPath: string | null;
  shims: number;
}

export interface PrepareToolsOptions {
  /** Real path of the workspace. */
  workspaceRoot: string;
  /** SVC_RESOURCE_BIN_PATH: where shims go; null or undefined for none. */
  resourceBinPath?: string | null | undefined;
  forbiddenRoots: readonly string[];
}

export interface PreparedTools {
  summary: ToolsSummary;
  /** Directories to put in front of PATH, in order. */
  pathEntries: string[];
}

export async function prepareToolsDir(options: PrepareToolsOptions): Promise<PreparedTools> {
  const dir = join(options.workspaceRoot, TOOLS_DIR);
  const summary: ToolsSummary = {
    dir: TOOLS_DIR,
    present: false,
    pathEntry: null,
    tools: [],
    toolsTruncated: false,
    supportFiles: { count: 0, bytes: 0, names: [] },
    skipped: [],
    resourceBinPath: options.resourceBinPath ?? null,
    shims: 0,
  };
  try {
    const info = await lstat(dir);
    if (!info.isDirectory() && !info.isSymbolicLink()) return { summary, pathEntries: [] };
  } catch (error) {
    if (isMissing(error)) return { summary, pathEntries: [] };
    throw infra('cannot read tools/', error);
  }
  await assertRealInside(options.workspaceRoot, dir, 'tools', TOOLS_DIR);
  summary.present = true;
  summary.pathEntry = dir;

  for (const name of (await readdir(dir)).sort()) {
    const abs = join(dir, name);
    const shown = `${TOOLS_DIR}/${name}`;
    const real = await assertRealInside(options.workspaceRoot, abs, 'tools', shown);
    const info = await lstat(real);
    const shebang = info.isFile() && !name.startsWith('.') ? await readShebang(real) : null;
    if (shebang === null) {
      await countSupport(summary, abs, shown, name, options.workspaceRoot);
      continue;
    }
    if (!SAFE_NAME.test(name) || summary.tools.length >= MAX_TOOLS) {
      summary.skipped.push({
        name,
        reason: SAFE_NAME.test(name) ? 'too-many-tools' : 'unsafe-name',
      });
      summary.toolsTruncated ||= summary.tools.length >= MAX_TOOLS;
      await countSupport(summary, abs, shown, name, options.workspaceRoot);
      continue;
    }
    await chmod(real, (info.mode & 0o777) | 0o111).catch((error: unknown) => {
      throw infra(`cannot make ${shown} executable`, error);
    });
    const content = await readFile(real);
    summary.tools.push({
      name,
      path: shown,
      sha256: sha256Hex(content),
      bytes: content.length,
      interpreter: interpreterOf(shebang),
      shebang: shebang.slice(0, 200),
      shimPath: null,
    });
  }

  const pathEntries = [dir];
  if (options.resourceBinPath) {
    const bin = await checkWritableRoot(options.resourceBinPath, 'SVC_RESOURCE_BIN_PATH', {
      forbiddenRoots: options.forbiddenRoots,
      create: true,
    });
    await writeShims(bin, dir, summary);
    summary.resourceBinPath = bin;
    pathEntries.push(bin);
  }
  return { summary, pathEntries };
}

/** The first line when it is a shebang, else null. */
async function readShebang(path: string): Promise<string | null> {
  const handle = await open(path, 'r');
  try {
    const buffer = Buffer.alloc(512);
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    const head = buffer.subarray(0, bytesRead).toString('utf8');
    if (!head.startsWith('#!')) return null;
    const line = head.split('\n', 1)[0] ?? '';
    return line.replace(/\r$/, '');
  } finally {
    await handle.close();
  }
}

/** `#!/usr/bin/env -S node --flag` -> `node`; `#!/bin/bash -e` -> `bash`. */
export function interpreterOf(shebang: string): string {
  const words = shebang.slice(2).trim().split(/\s+/).filter(Boolean);
  let index = 0;
  const base = (word: string | undefined) => (word ?? '').split('/').pop() ?? '';
  if (base(words[0]) === 'env') {
    index = 1;
    while (words[index]?.startsWith('-') || /^[A-Za-z_][A-Za-z0-9_]*=/.test(words[index] ?? '')) {
      index += 1;
    }
  }
  return base(words[index]) || 'unknown';
}

async function countSupport(
  summary: ToolsSummary,
  abs: string,
  shown: string,
  name: string,
  workspaceRoot: string,
): Promise<void> {
  const tree = await walkTree(abs, {
    realRoot: workspaceRoot,
    field: 'tools',
    shown,
    maxFiles: 50_000,
    maxBytes: Number.MAX_SAFE_INTEGER,
  });
  summary.supportFiles.count += tree.files;
  summary.supportFiles.bytes += tree.bytes;
  if (summary.supportFiles.names.length < MAX_LISTED_SUPPORT) summary.supportFiles.names.push(name);
}

function shimText(target: string): string {
  const quoted = `'${target.replace(/'/g, `'\\''`)}'`;
  return `#!/bin/sh\n${SHIM_MARKER}: runs the workspace tool, never a copy of it\nexec ${quoted} "$@"\n`;
}

/** Write one shim per tool; remove shims of earlier assemblies whose tool is gone. */
async function writeShims(bin: string, toolsDir: string, summary: ToolsSummary): Promise<void> {
  const wanted = new Set(summary.tools.map((t) => t.name));
  for (const name of await readdir(bin)) {
    if (wanted.has(name)) continue;
    const path = join(bin, name);
    const text = await readFile(path, 'utf8').catch(() => '');
    if (text.includes(SHIM_MARKER)) await rm(path, { force: true });
  }
  for (const tool of summary.tools) {
    const dest = join(bin, tool.name);
    const existing = await lstat(dest).catch(() => undefined);
    if (existing?.isDirectory()) {
      throw new ServiceError(
        'infra-failed',
        `SVC_RESOURCE_BIN_PATH holds a directory named ${tool.name}; a shim cannot be written`,
        { path: dest },
      );
    }
    const temp = join(bin, `.svc-shim-${randomBytes(6).toString('hex')}`);
    try {
      await writeFile(temp, shimText(join(toolsDir, tool.name)), { mode: 0o755 });
      await chmod(temp, 0o755);
      await rename(temp, dest);
    } catch (error) {
      await rm(temp, { force: true });
      throw infra(`cannot write the shim for ${tool.name}`, error);
    }
    tool.shimPath = dest;
    summary.shims += 1;
  }
}
