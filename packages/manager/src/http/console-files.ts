import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

/** Encodings a console file is offered in besides identity, best first. */
export type Encoding = 'br' | 'gzip';
const ENCODINGS: readonly Encoding[] = ['br', 'gzip'];
const SUFFIX: Record<Encoding, string> = { br: '.br', gzip: '.gz' };

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
};
/** Already compressed formats gain nothing from another pass. */
const COMPRESSIBLE = new Set(['.html', '.js', '.css', '.svg']);
/** Below this, the headers cost more than the bytes saved. */
const MIN_COMPRESS_BYTES = 512;

/**
 * One file of the built console with its compressed forms: read from the `.br` / `.gz` files
 * the console's build writes beside it, else compressed on first use and kept.
 */
export class ConsoleFile {
  readonly #variants = new Map<Encoding, Buffer | null>();

  constructor(
    private readonly path: string,
    readonly body: Buffer,
    readonly type: string,
    readonly compressible: boolean,
  ) {}

  /** The body in `encoding`, or null when that form is not smaller. */
  variant(encoding: Encoding): Buffer | null {
    if (!this.compressible) return null;
    let found = this.#variants.get(encoding);
    if (found === undefined) {
      found = readVariant(this.path + SUFFIX[encoding]) ?? compress(this.body, encoding);
      if (found.length >= this.body.length) found = null;
      this.#variants.set(encoding, found);
    }
    return found;
  }
}

function readVariant(path: string): Buffer | null {
  return existsSync(path) ? readFileSync(path) : null;
}

function compress(body: Buffer, encoding: Encoding): Buffer {
  // Moderate levels: a file compressed here (no build-time form) is compressed once per process.
  return encoding === 'br'
    ? brotliCompressSync(body, { params: { [constants.BROTLI_PARAM_QUALITY]: 6 } })
    : gzipSync(body, { level: 6 });
}

export function consoleFile(path: string): ConsoleFile | null {
  const ext = extname(path);
  const type = TYPES[ext];
  if (!type) return null;
  const body = readFileSync(path);
  return new ConsoleFile(
    path,
    body,
    type,
    COMPRESSIBLE.has(ext) && body.length >= MIN_COMPRESS_BYTES,
  );
}

export interface ConsoleSite {
  index: ConsoleFile | null;
  /** By file name under assets/ (the names carry content hashes). */
  assets: Map<string, ConsoleFile>;
}

/** Read the built console once; the files are small and immutable for the process's life. */
export function loadConsoleSite(dir: string): ConsoleSite {
  const assets = new Map<string, ConsoleFile>();
  try {
    const index = consoleFile(join(dir, 'index.html'));
    for (const name of readdirSync(join(dir, 'assets'))) {
      const file = consoleFile(join(dir, 'assets', name));
      if (file) assets.set(name, file);
    }
    return { index, assets };
  } catch {
    return { index: null, assets };
  }
}

/**
 * The encoding to answer with for an Accept-Encoding header (RFC 9110 12.5.3): the best one
 * offered with a non-zero weight, the server's order (br, then gzip) breaking ties; `*` stands
 * for any encoding not named; identity when none is acceptable.
 */
export function negotiate(header: string | undefined, file: ConsoleFile): Encoding | null {
  if (!header || !file.compressible) return null;
  const weights = new Map<string, number>();
  for (const part of header.split(',')) {
    const [token, ...params] = part.trim().toLowerCase().split(';');
    if (!token) continue;
    const q = params.map((p) => /^\s*q=([0-9.]+)\s*$/.exec(p)?.[1]).find(Boolean);
    const weight = q === undefined ? 1 : Number(q);
    weights.set(token.trim(), Number.isFinite(weight) ? weight : 0);
  }
  let best: Encoding | null = null;
  let bestWeight = 0;
  for (const encoding of ENCODINGS) {
    const weight = weights.get(encoding) ?? weights.get('*') ?? 0;
    if (weight > bestWeight && file.variant(encoding)) {
      best = encoding;
      bestWeight = weight;
    }
  }
  return best;
}
