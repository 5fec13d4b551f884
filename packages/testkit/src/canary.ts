import { randomBytes } from 'node:crypto';

/**
 * Canary secrets: distinctive values planted where secrets live (API keys, auth.json text,
 * tokens, passwords). A test then asserts none of them, nor their common encodings, appears in
 * any captured output.
 */
export function canary(label: string): string {
  return `CANARY-${label}-${randomBytes(9).toString('hex')}`;
}

function forms(value: string): string[] {
  return [
    value,
    Buffer.from(value).toString('base64'),
    Buffer.from(value).toString('base64url'),
    encodeURIComponent(value),
    JSON.stringify(value).slice(1, -1),
  ];
}

/** Every canary form found in `haystack`, as `label: where` lines (empty when clean). */
export function findCanaries(haystack: string, canaries: readonly string[]): string[] {
  const hits: string[] = [];
  for (const value of canaries) {
    for (const form of forms(value)) {
      const at = haystack.indexOf(form);
      if (at >= 0)
        hits.push(
          `${value.slice(0, 20)}… at offset ${at}: ${haystack.slice(Math.max(0, at - 60), at + 20)}`,
        );
    }
  }
  return hits;
}
