import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

/**
 * Encodings of a planted value to paste into requests and to look for in output. Built here
 * independently of the service's own masking code, so a test never checks the masker with
 * itself.
 */
export function pastedForms(value: string): Record<string, string> {
  const bytes = (prefix: string) => Buffer.from(`${prefix}${value}`);
  const forms: Record<string, string> = {
    plain: value,
    urlencoded: [...Buffer.from(value)].map((b) => `%${b.toString(16).toUpperCase()}`).join(''),
    urlComponent: encodeURIComponent(value),
    hex: Buffer.from(value).toString('hex'),
    HEX: Buffer.from(value).toString('hex').toUpperCase(),
    jsonEscaped: JSON.stringify(JSON.stringify({ key: value })),
  };
  for (const prefix of ['', 'x', 'xy']) {
    forms[`base64@${prefix.length}`] = bytes(prefix).toString('base64');
    forms[`base64url@${prefix.length}`] = bytes(prefix).toString('base64url');
  }
  return forms;
}

/**
 * Substrings that betray `value` in any of those forms: the value itself, its hex, and for
 * base64 at each alignment the encoded middle (first and last four characters dropped: they
 * depend on the neighbouring bytes).
 */
export function leakNeedles(value: string): string[] {
  const needles = new Set<string>([value, Buffer.from(value).toString('hex')]);
  needles.add(Buffer.from(value).toString('hex').toUpperCase());
  needles.add([...Buffer.from(value)].map((b) => `%${b.toString(16).toUpperCase()}`).join(''));
  for (const prefix of ['', 'x', 'xy']) {
    for (const encoding of ['base64', 'base64url'] as const) {
      const text = Buffer.from(`${prefix}${value}`).toString(encoding).replace(/=+$/, '');
      needles.add(text.slice(4, -4));
    }
  }
  return [...needles].filter((n) => n.length >= 12);
}

/** Every needle of every value found in `haystack`, with a little context. */
export function leaksIn(haystack: string, values: readonly string[]): string[] {
  const hits: string[] = [];
  for (const value of values)
    for (const needle of leakNeedles(value)) {
      const at = haystack.indexOf(needle);
      if (at >= 0)
        hits.push(`${needle.slice(0, 16)}… near ${haystack.slice(Math.max(0, at - 80), at)}`);
    }
  return hits;
}

/** A plain-text dump of a PostgreSQL database (rows of every table). */
export async function pgDump(url: string): Promise<string> {
  const { stdout } = await promisify(execFile)('pg_dump', ['--data-only', '--no-owner', url], {
    maxBuffer: 256 * 1024 * 1024,
  });
  return stdout;
}
