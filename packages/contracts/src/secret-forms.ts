/**
 * What a registered secret looks like once it has been copied somewhere: the encodings a tool,
 * a log line or an attacker is likely to produce, and which values are worth masking at all.
 */

export const REDACTED = '[redacted]';

/** Shorter values are never masked: redacting them would shred ordinary text. */
export const MIN_SECRET_LENGTH = 8;

/** Shorter encoded forms are not needles (they would match by chance). */
const MIN_FORM_LENGTH = 8;

/**
 * Values that are configuration words rather than secrets, whatever field they arrive in.
 * A credential write with `apiKey: "postgres"` must not turn every later "postgres" into
 * `[redacted]`.
 */
const COMMON_WORDS = new Set([
  'password',
  'passw0rd',
  'changeme',
  'changeit',
  'postgres',
  'postgresql',
  'localhost',
  'undefined',
  'anonymous',
  'username',
  'secret',
  'default',
  'example',
  'qwertyuiop',
  'abcdefgh',
  'abcdefghij',
  'letmein',
  'administrator',
  'redacted',
  '[redacted]',
  'apikey',
  'api-key',
  'api_key',
  'openai_api_key',
  'bearer',
  'builtin-a',
  'builtin-b',
  'builtin-c',
  'builtin-d',
  'svc-v01',
]);

/** Fewer bits than this (Shannon estimate over the value's own characters) is not a secret. */
const MIN_ENTROPY_BITS = 24;

/**
 * True when `value` is worth masking: long enough, not a number or a well-known word, not one
 * of the caller's own common words (tenant ids, profile names) and not low in entropy.
 */
export function isMaskable(value: string, common: ReadonlySet<string> = new Set()): boolean {
  if (value.length < MIN_SECRET_LENGTH) return false;
  const lower = value.toLowerCase();
  if (COMMON_WORDS.has(lower) || common.has(lower)) return false;
  if (value.includes(REDACTED)) return false;
  if (/^[\s\d.,:+-]+$/.test(value)) return false; // numbers, dates, times
  if (/^\d{4}-\d\d-\d\d[T ][\d:.]+(?:Z|[+-]\d\d:?\d\d)?$/i.test(value)) return false; // timestamps
  return entropyBits(value) >= MIN_ENTROPY_BITS;
}

function entropyBits(value: string): number {
  const counts = new Map<string, number>();
  for (const ch of value) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  const n = [...value].length;
  let bitsPerChar = 0;
  for (const c of counts.values()) bitsPerChar -= (c / n) * Math.log2(c / n);
  return bitsPerChar * n;
}

/**
 * Every form of `secret` to look for: as is; JSON-escaped (once and twice: a JSON string inside
 * a JSON log line); URL-encoded (component, form and every-byte, both hex cases); hex of its
 * bytes (both cases); and base64 and base64url at each of the three byte alignments, so the
 * value is found inside a longer encoded blob too.
 */
export function secretForms(secret: string): string[] {
  const bytes = Buffer.from(secret, 'utf8');
  const escaped = JSON.stringify(secret).slice(1, -1);
  const component = encodeURIComponent(secret);
  const everyByte = [...bytes].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
  const forms = [
    secret,
    escaped,
    JSON.stringify(escaped).slice(1, -1),
    component,
    component.replaceAll('%20', '+'),
    component.replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()),
    everyByte,
    everyByte.toUpperCase(),
    bytes.toString('hex'),
    bytes.toString('hex').toUpperCase(),
  ];
  for (let align = 0; align < 3; align++) {
    const core = base64Core(bytes, align);
    forms.push(core, core.replaceAll('+', '-').replaceAll('/', '_'));
  }
  return [...new Set(forms)].filter((f) => f.length >= MIN_FORM_LENGTH);
}

/**
 * The base64 characters that depend only on `bytes` when they start `align` bytes into a
 * 3-byte group: the leading characters mixed with the bytes before and the trailing ones
 * mixed with the bytes after are left out.
 */
function base64Core(bytes: Buffer, align: number): string {
  const padded = Buffer.concat([Buffer.alloc(align), bytes]);
  const encoded = padded.toString('base64').replace(/=+$/, '');
  const start = Math.ceil((8 * align) / 6);
  const end = Math.floor((8 * padded.length) / 6);
  return encoded.slice(start, end);
}
