import type { Redactor } from '@svc/contracts';
import { sanitizeUrl } from '@svc/contracts';

/**
 * Every string that leaves the agent layer passes here: registered secret values (and their
 * encodings) are replaced, and URLs lose user info and credential-like query parameters
 * (agent error messages quote the provider URL).
 */

const URL_PATTERN = /\bhttps?:\/\/[^\s"'<>]+/g;

export function scrubText(text: string, redactor: Redactor): string {
  const redacted = redactor.size > 0 ? redactor.redact(text) : text;
  if (!redacted.includes('://')) return redacted;
  return redacted.replace(URL_PATTERN, (url) => {
    const hasCredentials =
      /\/\/[^/@\s]*@/.test(url) ||
      /[?&][^=&]*(token|key|secret|password|auth|sig|credential)[^=&]*=/i.test(url);
    return hasCredentials ? sanitizeUrl(url) : url;
  });
}

/** A deep copy with every string scrubbed (keys included). */
export function scrubDeep<T>(value: T, redactor: Redactor): T {
  return walk(value, redactor) as T;
}

function walk(value: unknown, redactor: Redactor): unknown {
  if (typeof value === 'string') return scrubText(value, redactor);
  if (Array.isArray(value)) return value.map((v) => walk(v, redactor));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(value))
      out[scrubText(key, redactor)] = walk(child, redactor);
    return out;
  }
  return value;
}
