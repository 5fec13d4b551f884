import { randomBytes } from 'node:crypto';

/**
 * Time-ordered ids: `<prefix>-<12 hex ms><14 hex random>`, lowercase and DNS-1123 safe, so the
 * same id can name a Kubernetes Job or volume claim and sorts by creation time in cursors.
 */
export function newId(prefix: string): string {
  const time = Date.now().toString(16).padStart(12, '0');
  return `${prefix}-${time}${randomBytes(7).toString('hex')}`;
}

export const ID_PATTERN = '^[a-z][a-z0-9]{0,15}-[a-z0-9-]{4,80}$';
