// The coding agent's patch format: parse it, then apply it to files under a directory.
// Grammar (the codex apply_patch format):
//   Patch      := "*** Begin Patch" LF { FileOp } "*** End Patch" [LF]
//   FileOp     := AddFile | DeleteFile | UpdateFile
//   AddFile    := "*** Add File: " path LF { "+" line LF }
//   DeleteFile := "*** Delete File: " path LF
//   UpdateFile := "*** Update File: " path LF [ "*** Move to: " path LF ] Chunk { Chunk }
//   Chunk      := ( "@@" | "@@ " context ) LF { (" " | "-" | "+") line LF } [ "*** End of File" LF ]
// The first chunk of an update may omit its "@@" line. Like the reference implementation, the
// parser tolerates whitespace around markers and a patch wrapped in a `<<EOF` heredoc.
// Application is all-or-nothing: every file's new content is computed before any file is
// written, and each file is replaced atomically (temporary file, then rename).
import {
  chmod,
  lstat,
  mkdir,
  readFile,
  realpath,
  rename,
  rm,
  unlink,
  writeFile,
} from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';

const BEGIN = '*** Begin Patch';
const END = '*** End Patch';
const ADD = '*** Add File: ';
const DELETE = '*** Delete File: ';
const UPDATE = '*** Update File: ';
const MOVE = '*** Move to: ';
const EOF_MARK = '*** End of File';

export class PatchError extends Error {
  constructor(message, line) {
    super(line === undefined ? message : `line ${line}: ${message}`);
    this.name = 'PatchError';
  }
}

/** Parse patch text into file operations; throws PatchError naming the line. */
export function parsePatch(text) {
  let lines = text
    .trim()
    .split('\n')
    .map((l) => l.replace(/\r$/, ''));
  if (lines.length >= 4 && /^<<['"]?EOF['"]?$/.test(lines[0]) && lines.at(-1).endsWith('EOF')) {
    lines = lines.slice(1, -1);
  }
  if (lines[0]?.trim() !== BEGIN) throw new PatchError(`the first line must be '${BEGIN}'`);
  if (lines.length < 2 || lines.at(-1).trim() !== END) {
    throw new PatchError(`the last line must be '${END}'`);
  }
  const body = lines.slice(1, -1);
  const ops = [];
  let i = 0;
  const lineNo = (index) => index + 2;
  while (i < body.length) {
    const header = body[i].trim();
    if (header === '') {
      i += 1;
      continue;
    }
    if (header.startsWith(ADD)) {
      const path = header.slice(ADD.length).trim();
      const content = [];
      i += 1;
      while (i < body.length && body[i].startsWith('+')) content.push(body[i++].slice(1));
      ops.push({ type: 'add', path, contents: content.length ? `${content.join('\n')}\n` : '' });
    } else if (header.startsWith(DELETE)) {
      ops.push({ type: 'delete', path: header.slice(DELETE.length).trim() });
      i += 1;
    } else if (header.startsWith(UPDATE)) {
      const start = i;
      const path = header.slice(UPDATE.length).trim();
      i += 1;
      let movePath;
      if (i < body.length && body[i].trim().startsWith(MOVE)) {
        movePath = body[i].trim().slice(MOVE.length).trim();
        i += 1;
      }
      const chunks = [];
      while (i < body.length) {
        if (body[i].trim() === '') {
          i += 1;
          continue;
        }
        if (body[i].startsWith('*') && body[i].trim() !== EOF_MARK) break;
        const parsed = parseChunk(body, i, chunks.length === 0, lineNo);
        chunks.push(parsed.chunk);
        i = parsed.next;
      }
      if (chunks.length === 0) {
        throw new PatchError(`update of '${path}' has no hunks`, lineNo(start));
      }
      ops.push({ type: 'update', path, movePath, chunks });
    } else {
      throw new PatchError(
        `'${header}' is not a valid file operation (expected '${ADD}<path>', '${DELETE}<path>' or '${UPDATE}<path>')`,
        lineNo(i),
      );
    }
  }
  return ops;
}

function parseChunk(body, start, first, lineNo) {
  let i = start;
  let context = null;
  if (body[i] === '@@') i += 1;
  else if (body[i].startsWith('@@ ')) context = body[i++].slice(3);
  else if (!first) {
    throw new PatchError(`expected a '@@' hunk header, got '${body[i]}'`, lineNo(i));
  }
  const chunk = { context, oldLines: [], newLines: [], eof: false };
  let count = 0;
  for (; i < body.length; i++) {
    const line = body[i];
    if (line.trim() === EOF_MARK) {
      if (count === 0) throw new PatchError('hunk has no lines', lineNo(i));
      chunk.eof = true;
      i += 1;
      break;
    }
    const mark = line[0];
    if (line === '') {
      chunk.oldLines.push('');
      chunk.newLines.push('');
    } else if (mark === ' ') {
      chunk.oldLines.push(line.slice(1));
      chunk.newLines.push(line.slice(1));
    } else if (mark === '-') chunk.oldLines.push(line.slice(1));
    else if (mark === '+') chunk.newLines.push(line.slice(1));
    else if (count === 0) {
      throw new PatchError(
        `unexpected line '${line}' in a hunk: every line starts with ' ', '-' or '+'`,
        lineNo(i),
      );
    } else break;
    count += 1;
  }
  if (count === 0) throw new PatchError('hunk has no lines', lineNo(start));
  return { chunk, next: i };
}

/** Find `pattern` in `lines` at or after `start`, from exact to increasingly lenient matching. */
function seek(lines, pattern, start, eof) {
  if (pattern.length === 0) return start;
  if (pattern.length > lines.length) return -1;
  const norms = [
    (s) => s,
    (s) => s.trimEnd(),
    (s) => s.trim(),
    (s) =>
      s
        .trim()
        .replace(/[\u2010-\u2015\u2212]/g, '-')
        .replace(/[\u2018-\u201b]/g, "'")
        .replace(/[\u201c-\u201f]/g, '"')
        .replace(/[\u00a0\u2002-\u200a\u202f\u205f\u3000]/g, ' '),
  ];
  const last = lines.length - pattern.length;
  const starts = eof ? [last, start] : [start];
  for (const norm of norms) {
    const want = pattern.map(norm);
    for (const from of starts) {
      for (let at = from; at <= last; at++) {
        if (want.every((p, k) => norm(lines[at + k]) === p)) return at;
      }
    }
  }
  return -1;
}

/** New content of a file after its chunks; throws PatchError when a hunk does not apply. */
export function applyChunks(original, chunks, shown) {
  const crlf = original.includes('\r\n');
  const lines = original.split('\n').map((l) => (crlf ? l.replace(/\r$/, '') : l));
  if (lines.at(-1) === '') lines.pop();
  const replacements = [];
  let index = 0;
  for (const chunk of chunks) {
    if (chunk.context !== null) {
      const at = seek(lines, [chunk.context], index, false);
      if (at < 0) throw new PatchError(`cannot find context '${chunk.context}' in ${shown}`);
      index = at + 1;
    }
    if (chunk.oldLines.length === 0) {
      // Pure insertion: right after the context line when one was given, else at end of file.
      const at = chunk.context !== null && !chunk.eof ? index : lines.length;
      replacements.push([at, 0, chunk.newLines]);
      continue;
    }
    let pattern = chunk.oldLines;
    let replacement = chunk.newLines;
    let at = seek(lines, pattern, index, chunk.eof);
    if (at < 0 && pattern.at(-1) === '') {
      // A trailing empty line stands for the file's final newline.
      pattern = pattern.slice(0, -1);
      if (replacement.at(-1) === '') replacement = replacement.slice(0, -1);
      at = seek(lines, pattern, index, chunk.eof);
    }
    if (at < 0) {
      throw new PatchError(
        `hunk does not apply to ${shown}: expected lines not found:\n${chunk.oldLines.join('\n')}`,
      );
    }
    replacements.push([at, pattern.length, replacement]);
    index = at + pattern.length;
  }
  replacements.sort((a, b) => a[0] - b[0]);
  for (let k = 1; k < replacements.length; k++) {
    const [prevAt, prevLen] = replacements[k - 1];
    if (replacements[k][0] < prevAt + prevLen) {
      throw new PatchError(`hunks overlap in ${shown}`);
    }
  }
  for (const [at, length, replacement] of replacements.reverse()) {
    lines.splice(at, length, ...replacement);
  }
  return `${lines.join(crlf ? '\r\n' : '\n')}${crlf ? '\r\n' : '\n'}`;
}

/** A patch path: relative, inside `root` lexically and by real path (no symlink escape). */
async function safePath(root, realRoot, path) {
  if (!path) throw new PatchError('empty file path');
  // Control characters in a name hide it from listings and terminals (and break line-based tools).
  if ([...path].some((ch) => ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f)) {
    throw new PatchError(`path holds a control character: ${JSON.stringify(path)}`);
  }
  if (isAbsolute(path) || /^[A-Za-z]:[\\/]/.test(path)) {
    throw new PatchError(`path must be relative to the working directory: ${path}`);
  }
  const abs = resolve(root, path);
  const rel = relative(root, abs);
  if (rel === '' || rel.startsWith('..') || isAbsolute(rel)) {
    throw new PatchError(`path escapes the working directory: ${path}`);
  }
  let existing = abs;
  for (;;) {
    try {
      const real = await realpath(existing);
      const realRel = relative(realRoot, real);
      if (realRel.startsWith('..') || isAbsolute(realRel)) {
        throw new PatchError(`path escapes the working directory through a symlink: ${path}`);
      }
      return abs;
    } catch (error) {
      if (error instanceof PatchError) throw error;
      const parent = dirname(existing);
      if (parent === existing) return abs;
      existing = parent;
    }
  }
}

/**
 * Apply a parsed or textual patch under `cwd`. Returns the affected paths as given in the patch:
 * `{ added, modified, deleted }`.
 */
export async function applyPatch(patch, cwd) {
  const ops = typeof patch === 'string' ? parsePatch(patch) : patch;
  if (ops.length === 0) throw new PatchError('the patch changes no file');
  const root = resolve(cwd);
  const realRoot = await realpath(root);
  // Path -> { content: string | null (deleted), mode }; read through when absent.
  const state = new Map();
  const order = [];
  const current = async (abs, shown) => {
    if (state.has(abs)) return state.get(abs);
    let info;
    try {
      info = await lstat(abs);
    } catch {
      return { content: null, mode: undefined };
    }
    if (info.isDirectory()) throw new PatchError(`${shown} is a directory`);
    const content = await readFile(abs, 'utf8');
    return { content, mode: info.mode & 0o777 };
  };
  const set = (abs, value) => {
    if (!state.has(abs)) order.push(abs);
    state.set(abs, value);
  };
  const summary = { added: [], modified: [], deleted: [] };
  for (const op of ops) {
    const abs = await safePath(root, realRoot, op.path);
    if (op.type === 'add') {
      const before = await current(abs, op.path);
      // Adding never overwrites: changing an existing file is an Update File.
      if (before.content !== null)
        throw new PatchError(`cannot add ${op.path}: the file exists (use Update File)`);
      set(abs, { content: op.contents, mode: before.mode });
      summary.added.push(op.path);
    } else if (op.type === 'delete') {
      const before = await current(abs, op.path);
      if (before.content === null) throw new PatchError(`cannot delete ${op.path}: no such file`);
      set(abs, { content: null, mode: undefined });
      summary.deleted.push(op.path);
    } else {
      const before = await current(abs, op.path);
      if (before.content === null) throw new PatchError(`cannot update ${op.path}: no such file`);
      const content = applyChunks(before.content, op.chunks, op.path);
      if (op.movePath !== undefined) {
        const dest = await safePath(root, realRoot, op.movePath);
        set(abs, { content: null, mode: undefined });
        set(dest, { content, mode: before.mode });
        summary.modified.push(op.movePath);
      } else {
        set(abs, { content, mode: before.mode });
        summary.modified.push(op.path);
      }
    }
  }
  for (const abs of order) {
    const { content, mode } = state.get(abs);
    if (content === null) {
      await unlink(abs).catch((error) => {
        if (error.code !== 'ENOENT') throw error;
      });
      continue;
    }
    await mkdir(dirname(abs), { recursive: true });
    const temp = join(dirname(abs), `.apply_patch-${randomBytes(6).toString('hex')}`);
    try {
      await writeFile(temp, content, { flag: 'wx' });
      await chmod(temp, mode ?? 0o644);
      await rename(temp, abs);
    } catch (error) {
      await rm(temp, { force: true });
      throw error;
    }
  }
  return summary;
}
