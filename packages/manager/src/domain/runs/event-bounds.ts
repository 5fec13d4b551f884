/**
 * Bounds on what an event may hold. Output can be arbitrarily large and may contain U+0000,
 * which PostgreSQL cannot store; neither may turn an append into a 500. Strings are cut at a
 * UTF-8 boundary with their original byte counts kept, NULs become U+FFFD, and the event says
 * so in flags a reader can see.
 */
export const MAX_STRING_BYTES = 64 * 1024;
export const MAX_EVENT_BYTES = 256 * 1024;
const MAX_DEPTH = 32;

export interface BoundedData {
  data: Record<string, unknown>;
  truncated: boolean;
  nulReplaced: boolean;
}

export function boundEventData(
  category: string,
  input: Record<string, unknown> | undefined,
): BoundedData {
  const state: WalkState = {
    truncated: false,
    nulReplaced: false,
    cuts: {},
  };
  const walked = walk(input ?? {}, '', 0, state) as Record<string, unknown>;
  let data: Record<string, unknown> = walked;
  if (Object.keys(state.cuts).length > 0) data.truncation = state.cuts;
  if (state.nulReplaced) data.nulReplaced = true;

  const size = Buffer.byteLength(JSON.stringify(data));
  if (size > MAX_EVENT_BYTES) {
    // Too many fields even after cutting strings: keep the scalars that identify the event.
    const kept: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(data)) {
      if (
        value === null ||
        ['number', 'boolean'].includes(typeof value) ||
        (typeof value === 'string' && value.length <= 256)
      )
        kept[key] = value;
    }
    data = { ...kept, dataTruncated: true, originalBytes: size };
    state.truncated = true;
  }
  if (state.truncated) {
    if (category === 'assistant_message') data.textTruncated = true;
    if (category === 'command_output' || category === 'tool_call' || category === 'diff')
      data.outputTruncated = true;
  }
  return { data, truncated: state.truncated, nulReplaced: state.nulReplaced };
}

interface WalkState {
  truncated: boolean;
  nulReplaced: boolean;
  cuts: Record<string, { originalBytes: number; keptBytes: number }>;
}

function walk(value: unknown, path: string, depth: number, state: WalkState): unknown {
  if (typeof value === 'string') return boundString(value, path, state);
  if (depth >= MAX_DEPTH) {
    state.truncated = true;
    return '[nested too deep]';
  }
  if (Array.isArray(value)) return value.map((v, i) => walk(v, `${path}[${i}]`, depth + 1, state));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [rawKey, child] of Object.entries(value)) {
      const key = rawKey.includes('\u0000') ? replaceNul(rawKey, state) : rawKey;
      out[key] = walk(child, path ? `${path}.${key}` : key, depth + 1, state);
    }
    return out;
  }
  return value;
}

function replaceNul(text: string, state: WalkState): string {
  state.nulReplaced = true;
  return text.replaceAll('\u0000', '\uFFFD');
}

function boundString(text: string, path: string, state: WalkState): string {
  const clean = text.includes('\u0000') ? replaceNul(text, state) : text;
  // Cheap exit: a string of at most MAX/3 UTF-16 units cannot exceed MAX UTF-8 bytes.
  if (clean.length <= MAX_STRING_BYTES / 3) return clean;
  const bytes = Buffer.from(clean);
  if (bytes.length <= MAX_STRING_BYTES) return clean;
  let end = MAX_STRING_BYTES;
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--; // do not split a code point
  state.truncated = true;
  state.cuts[path] = { originalBytes: bytes.length, keptBytes: end };
  return bytes.subarray(0, end).toString();
}
