/**
 * Byte bounds for text that leaves this layer. Everything is measured in UTF-8 bytes (what the
 * manager stores and limits) and cut on code point boundaries.
 */

export function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/** The longest prefix of `bytes` at most `max` long that does not split a code point. */
function prefixEnd(bytes: Buffer, max: number): number {
  if (bytes.length <= max) return bytes.length;
  let end = max;
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return end;
}

/** The shortest suffix start so that the suffix is at most `max` bytes, on a boundary. */
function suffixStart(bytes: Buffer, max: number): number {
  if (bytes.length <= max) return 0;
  let start = bytes.length - max;
  while (start < bytes.length && ((bytes[start] ?? 0) & 0xc0) === 0x80) start++;
  return start;
}

export interface BoundedText {
  text: string;
  originalBytes: number;
  keptBytes: number;
  truncated: boolean;
}

/** Keep the first `max` bytes. */
export function headBytes(text: string, max: number): BoundedText {
  const bytes = Buffer.from(text, 'utf8');
  const end = prefixEnd(bytes, max);
  const kept = end === bytes.length ? text : bytes.subarray(0, end).toString('utf8');
  return { text: kept, originalBytes: bytes.length, keptBytes: end, truncated: end < bytes.length };
}

export const ELISION = '\n[… output truncated …]\n';

/**
 * Keep the head and the tail of long output (where commands print what they do and how they
 * ended), at most `max` bytes of original text in total, with a marker between.
 */
export function headTailBytes(text: string, max: number): BoundedText {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= max) {
    return { text, originalBytes: bytes.length, keptBytes: bytes.length, truncated: false };
  }
  const half = Math.floor(max / 2);
  const headEnd = prefixEnd(bytes, half);
  const tailStart = suffixStart(bytes, max - half);
  const kept = headEnd + (bytes.length - tailStart);
  return {
    text:
      bytes.subarray(0, headEnd).toString('utf8') +
      ELISION +
      bytes.subarray(tailStart).toString('utf8'),
    originalBytes: bytes.length,
    keptBytes: kept,
    truncated: true,
  };
}

/** Split into parts of at most `partBytes` each, keeping at most `maxParts` parts. */
export function splitBytes(
  text: string,
  partBytes: number,
  maxParts: number,
): { parts: string[]; originalBytes: number; truncated: boolean } {
  const bytes = Buffer.from(text, 'utf8');
  const parts: string[] = [];
  let offset = 0;
  while (offset < bytes.length && parts.length < maxParts) {
    const rest = bytes.subarray(offset);
    const end = prefixEnd(rest, partBytes);
    parts.push(rest.subarray(0, end).toString('utf8'));
    offset += end;
  }
  if (parts.length === 0) parts.push('');
  return { parts, originalBytes: bytes.length, truncated: offset < bytes.length };
}

/** One line summary of at most `maxChars` characters (for command lines in tool events). */
export function summarize(text: string, maxChars: number): string {
  const oneLine = text.replace(/\s+/g, ' ').trim();
  const chars = [...oneLine];
  return chars.length <= maxChars ? oneLine : `${chars.slice(0, maxChars - 1).join('')}…`;
}

/**
 * A byte-bounded ring of the most recent output (the agent's stderr): kept for diagnostics of
 * a crash, never logged wholesale.
 */
export class ByteRing {
  #chunks: Buffer[] = [];
  #size = 0;
  #dropped = 0;

  constructor(readonly capacity: number) {}

  push(chunk: Buffer): void {
    if (chunk.length >= this.capacity) {
      this.#dropped += this.#size + chunk.length - this.capacity;
      this.#chunks = [chunk.subarray(chunk.length - this.capacity)];
      this.#size = this.capacity;
      return;
    }
    this.#chunks.push(chunk);
    this.#size += chunk.length;
    while (this.#size > this.capacity) {
      const first = this.#chunks[0];
      if (!first) break;
      const excess = this.#size - this.capacity;
      if (first.length <= excess) {
        this.#chunks.shift();
        this.#size -= first.length;
        this.#dropped += first.length;
      } else {
        this.#chunks[0] = first.subarray(excess);
        this.#size -= excess;
        this.#dropped += excess;
      }
    }
  }

  /** Bytes that fell out of the ring. */
  get dropped(): number {
    return this.#dropped;
  }

  /** The retained text (a leading partial code point is dropped). */
  text(): string {
    return this.tail(this.capacity);
  }

  /** The last `maxBytes` of the retained text. */
  tail(maxBytes: number): string {
    const all = Buffer.concat(this.#chunks);
    let start = suffixStart(all, maxBytes);
    while (start < all.length && ((all[start] ?? 0) & 0xc0) === 0x80) start++;
    return all.subarray(start).toString('utf8');
  }
}
