/**
 * Redaction by exact value. Names-based redaction (a `password` key) misses a token pasted into
 * a message; value-based redaction catches it wherever it lands, including its common encodings.
 */
export const REDACTED = '[redacted]';

/** Secrets shorter than this are not registered: redacting "a" would shred every log line. */
const MIN_SECRET_LENGTH = 6;

export class Redactor {
  readonly #needles = new Set<string>();
  #sorted: string[] = [];

  /** Register a secret value; its base64, base64url, URL-encoded and JSON-escaped forms too. */
  add(secret: string | undefined | null): this {
    if (!secret || secret.length < MIN_SECRET_LENGTH) return this;
    const forms = [
      secret,
      Buffer.from(secret).toString('base64'),
      Buffer.from(secret).toString('base64url'),
      encodeURIComponent(secret),
      JSON.stringify(secret).slice(1, -1),
    ];
    for (const form of forms) if (form.length >= MIN_SECRET_LENGTH) this.#needles.add(form);
    // Longest first, so a value containing another is replaced whole.
    this.#sorted = [...this.#needles].sort((a, b) => b.length - a.length);
    return this;
  }

  get size(): number {
    return this.#needles.size;
  }

  redact(text: string): string {
    let out = text;
    for (const needle of this.#sorted) {
      if (out.includes(needle)) out = out.split(needle).join(REDACTED);
    }
    return out;
  }

  /** The same value with every string (and object key) redacted. */
  redactDeep<T>(value: T): T {
    if (this.#sorted.length === 0) return value;
    return deep(value, (text) => this.redact(text)) as T;
  }

  /** True when the text holds any registered secret form. */
  leaks(text: string): boolean {
    return this.#sorted.some((needle) => text.includes(needle));
  }
}

function deep(value: unknown, redact: (text: string) => string): unknown {
  if (typeof value === 'string') return redact(value);
  if (Array.isArray(value)) return value.map((v) => deep(v, redact));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [redact(k), deep(v, redact)]));
  }
  return value;
}

/**
 * Strip credentials from a URL for printing: user info, and query parameters whose names look
 * like credentials. Unparseable input is replaced whole rather than echoed.
 */
export function sanitizeUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return '[unparseable-url]';
  }
  if (url.username || url.password) {
    url.username = url.username ? REDACTED : '';
    url.password = '';
  }
  for (const name of [...url.searchParams.keys()]) {
    if (/token|key|secret|password|auth|sig|credential/i.test(name))
      url.searchParams.set(name, REDACTED);
  }
  return url.toString();
}

/** The password of a connection string, for registration with a Redactor. */
export function connectionStringPassword(raw: string | undefined): string | undefined {
  if (!raw) return undefined;
  try {
    const url = new URL(raw);
    return url.password ? decodeURIComponent(url.password) : undefined;
  } catch {
    return undefined;
  }
}
