import { LiteralMatcher } from './literal-matcher.js';
import { isMaskable, REDACTED, secretForms } from './secret-forms.js';
import { scrubSecretShapes } from './secret-patterns.js';

export { REDACTED } from './secret-forms.js';

/** Values one source may register (a Secret has a handful of keys). */
const MAX_VALUES_PER_SOURCE = 64;
const STATIC_SOURCE = '';

/**
 * Redaction by exact value. Names-based redaction (a `password` key) misses a token pasted into
 * a message; value-based redaction catches it wherever it lands, including its common encodings.
 *
 * Values are registered per source (a Secret's name, the API keys, the store password): writing
 * a source again replaces its values, and a value is forgotten once no source holds it, so the
 * mask set stays as large as the secrets that exist. Values too short, too common or too low in
 * entropy to be secrets are never registered. The encoded forms of each value are computed at
 * registration; one matcher per mask-set version finds them all in a single pass.
 */
export class Redactor {
  readonly #common = new Set<string>();
  readonly #sources = new Map<string, Set<string>>();
  /** Sources whose values are masked on the way out only (see `registerOutgoing`). */
  readonly #outgoing = new Set<string>();
  /** value -> its forms, how many sources hold it, and how many of those are outgoing-only */
  readonly #values = new Map<string, { forms: string[]; holders: number; outgoing: number }>();
  #matcher: LiteralMatcher | null = null;
  #incomingMatcher: LiteralMatcher | null = null;
  #stale = false;

  /** Words that are never secrets here (tenant ids, profile names): never registered. */
  ignore(words: Iterable<string | undefined | null>): this {
    for (const word of words) if (word) this.#common.add(word.toLowerCase());
    for (const [source, values] of this.#sources)
      for (const value of values)
        if (this.#common.has(value.toLowerCase())) {
          values.delete(value);
          this.#release(value, this.#outgoing.has(source));
          if (values.size === 0) {
            this.#sources.delete(source);
            this.#outgoing.delete(source);
          }
        }
    return this;
  }

  /** Register a secret value for good (values a program holds for its whole life). */
  add(secret: string | undefined | null): this {
    const values = this.#sources.get(STATIC_SOURCE) ?? new Set<string>();
    if (secret && !values.has(secret) && this.#acceptable(secret)) {
      values.add(secret);
      this.#hold(secret, false);
      this.#sources.set(STATIC_SOURCE, values);
    }
    return this;
  }

  /**
   * The values of one source, replacing what it registered before. Call only once the values
   * are in force (a write succeeded): a refused write must register nothing.
   */
  register(source: string, values: Iterable<string | undefined | null>): this {
    return this.#register(source, values, false);
  }

  /**
   * Values masked in everything that goes out (responses, logs, stored events) but taken as
   * sent when a request carries them in a field that holds them on purpose (`redactIncoming`):
   * a job's transient environment, which the next job of the same task is sent again.
   */
  registerOutgoing(source: string, values: Iterable<string | undefined | null>): this {
    return this.#register(source, values, true);
  }

  /** Forget a source's values (its Secret was deleted), unless another source holds them. */
  unregister(source: string): this {
    return this.#register(source, [], this.#outgoing.has(source));
  }

  #register(source: string, values: Iterable<string | undefined | null>, outgoing: boolean): this {
    if (this.#sources.has(source) && this.#outgoing.has(source) !== outgoing)
      this.#register(source, [], !outgoing);
    const next = new Set<string>();
    for (const value of values) {
      if (next.size >= MAX_VALUES_PER_SOURCE) break;
      if (value && this.#acceptable(value)) next.add(value);
    }
    const previous = this.#sources.get(source) ?? new Set<string>();
    for (const value of next) if (!previous.has(value)) this.#hold(value, outgoing);
    for (const value of previous) if (!next.has(value)) this.#release(value, outgoing);
    if (next.size > 0) {
      this.#sources.set(source, next);
      if (outgoing) this.#outgoing.add(source);
      else this.#outgoing.delete(source);
    } else {
      this.#sources.delete(source);
      this.#outgoing.delete(source);
    }
    return this;
  }

  /** How many distinct secret values are masked. */
  get size(): number {
    return this.#values.size;
  }

  /** How many needles (values and their encoded forms) the matcher looks for. */
  get formCount(): number {
    let n = 0;
    for (const entry of this.#values.values()) n += entry.forms.length;
    return n;
  }

  redact(text: string): string {
    const matcher = this.#current();
    return matcher ? matcher.replace(text, REDACTED) : text;
  }

  /** `redact` without the outgoing-only values: for request fields that carry them on purpose. */
  redactIncoming(text: string): string {
    this.#current();
    return this.#incomingMatcher ? this.#incomingMatcher.replace(text, REDACTED) : text;
  }

  /** Registered values and credential-shaped substrings nobody registered, both replaced. */
  scrub(text: string): string {
    return scrubSecretShapes(this.redact(text));
  }

  /** The same value with every string (and object key) redacted. */
  redactDeep<T>(value: T): T {
    if (this.#values.size === 0) return value;
    return deep(value, (text) => this.redact(text)) as T;
  }

  /** The same value with every string (and object key) scrubbed. */
  scrubDeep<T>(value: T): T {
    return deep(value, (text) => this.scrub(text)) as T;
  }

  /** True when the text holds any registered secret form. */
  leaks(text: string): boolean {
    const matcher = this.#current();
    return matcher ? matcher.test(text) : false;
  }

  #acceptable(value: string): boolean {
    return isMaskable(value, this.#common);
  }

  #hold(value: string, outgoing: boolean): void {
    const entry = this.#values.get(value);
    const wasIncoming = entry !== undefined && entry.holders > entry.outgoing;
    if (entry) {
      entry.holders++;
      if (outgoing) entry.outgoing++;
    } else {
      this.#values.set(value, {
        forms: secretForms(value),
        holders: 1,
        outgoing: outgoing ? 1 : 0,
      });
    }
    const now = this.#values.get(value)!;
    if (!entry || wasIncoming !== now.holders > now.outgoing) this.#stale = true;
  }

  #release(value: string, outgoing: boolean): void {
    const entry = this.#values.get(value);
    if (!entry) return;
    const wasIncoming = entry.holders > entry.outgoing;
    entry.holders--;
    if (outgoing) entry.outgoing--;
    if (entry.holders === 0) {
      this.#values.delete(value);
      this.#stale = true;
    } else if (wasIncoming !== entry.holders > entry.outgoing) this.#stale = true;
  }

  #current(): LiteralMatcher | null {
    if (this.#stale) {
      const forms: string[] = [];
      const incoming: string[] = [];
      for (const entry of this.#values.values()) {
        forms.push(...entry.forms);
        if (entry.holders > entry.outgoing) incoming.push(...entry.forms);
      }
      const matcher = new LiteralMatcher(forms);
      this.#matcher = matcher.empty ? null : matcher;
      const incomingMatcher =
        incoming.length === forms.length ? matcher : new LiteralMatcher(incoming);
      this.#incomingMatcher = incomingMatcher.empty ? null : incomingMatcher;
      this.#stale = false;
    }
    return this.#matcher;
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
