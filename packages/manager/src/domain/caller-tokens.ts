import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Runner Job tokens are told apart from API keys by this prefix (an API key may not use it). */
export const RUNNER_TOKEN_PREFIX = 'svcr_';
/** Lease tokens: returned by claim, sent back as `x-lease-token`. */
export const LEASE_TOKEN_PREFIX = 'svcl_';
export const LEASE_TOKEN_HEADER = 'x-lease-token';

/** 32 random bytes, base64url: 256 bits, nothing to guess. */
const mint = (prefix: string) => `${prefix}${randomBytes(32).toString('base64url')}`;

export const mintRunnerToken = () => mint(RUNNER_TOKEN_PREFIX);
export const mintLeaseToken = () => mint(LEASE_TOKEN_PREFIX);

/** Only this digest is stored; the token itself lives with its holder alone. */
export const tokenHash = (token: string) => createHash('sha256').update(token).digest('hex');

/** Digest comparison in constant time (both sides are fixed-length SHA-256 hex). */
export function sameHash(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && left.length > 0 && timingSafeEqual(left, right);
}
