/**
 * Finds any of a set of literal strings in one pass over a text, whatever the size of the set:
 * a rolling hash of every window of WINDOW characters is looked up among the hashes of the
 * literals' first WINDOW characters, and only a hit is compared in full. Building the set costs
 * one hash per literal, so a change of the mask set is cheap too.
 */
const WINDOW = 8;
const BASE = 0x01000193;
/** BASE^(WINDOW-1) in 32-bit arithmetic: the weight of the character leaving the window. */
const OUTGOING = (() => {
  let p = 1;
  for (let i = 1; i < WINDOW; i++) p = Math.imul(p, BASE);
  return p;
})();

function hashAt(text: string, start: number): number {
  let h = 0;
  for (let i = start; i < start + WINDOW; i++) h = (Math.imul(h, BASE) + text.charCodeAt(i)) | 0;
  return h;
}

/** Small-integer keys (V8 keeps them unboxed) and a bitmap that rejects most windows at once. */
const KEY_MASK = 0x3fffffff;
const FILTER_MASK = 0xffff;

export class LiteralMatcher {
  /** hash of the first WINDOW characters -> literals, longest first */
  readonly #byPrefix = new Map<number, string[]>();
  readonly #filter = new Uint8Array(FILTER_MASK + 1);

  /** Literals shorter than the window are ignored (callers register longer ones only). */
  constructor(literals: Iterable<string>) {
    for (const literal of new Set(literals)) {
      if (literal.length < WINDOW) continue;
      const h = hashAt(literal, 0) & KEY_MASK;
      this.#filter[h & FILTER_MASK] = 1;
      const list = this.#byPrefix.get(h);
      if (list) list.push(literal);
      else this.#byPrefix.set(h, [literal]);
    }
    for (const list of this.#byPrefix.values()) list.sort((a, b) => b.length - a.length);
  }

  get empty(): boolean {
    return this.#byPrefix.size === 0;
  }

  /** Every match replaced by `mark`: leftmost first, the longest literal at a position. */
  replace(text: string, mark: string): string {
    let out = '';
    let last = 0;
    this.#scan(text, (at, length) => {
      out += text.slice(last, at) + mark;
      last = at + length;
      return true;
    });
    return last === 0 ? text : out + text.slice(last);
  }

  /** True when the text holds any literal. */
  test(text: string): boolean {
    let found = false;
    this.#scan(text, () => {
      found = true;
      return false;
    });
    return found;
  }

  /** Calls `hit(at, length)` per match; it returns false to stop. */
  #scan(text: string, hit: (at: number, length: number) => boolean): void {
    if (this.#byPrefix.size === 0 || text.length < WINDOW) return;
    let i = 0;
    let h = hashAt(text, 0);
    const end = text.length - WINDOW;
    const filter = this.#filter;
    while (i <= end) {
      const match =
        filter[h & FILTER_MASK] === 1
          ? this.#byPrefix.get(h & KEY_MASK)?.find((literal) => text.startsWith(literal, i))
          : undefined;
      if (match) {
        if (!hit(i, match.length)) return;
        i += match.length;
        if (i > end) return;
        h = hashAt(text, i);
        continue;
      }
      if (i === end) return;
      h =
        (Math.imul(h - Math.imul(text.charCodeAt(i), OUTGOING), BASE) +
          text.charCodeAt(i + WINDOW)) |
        0;
      i++;
    }
  }
}
