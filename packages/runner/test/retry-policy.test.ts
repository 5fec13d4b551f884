import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiError, UnreachableError } from '@svc/contracts';
import { BACKOFF, backoffMs, retryable } from '../src/retry.js';

describe("the runner's retry policy", () => {
  it('retries refusals for load, other 5xx, timeouts and lost connections; nothing else', () => {
    const api = (status: number, after: number | null = null) =>
      new ApiError(status, 'x', 'x', null, undefined, after);
    assert.deepEqual(retryable(api(503, 1000)), { reason: 'overloaded', retryAfterMs: 1000 });
    assert.deepEqual(retryable(api(429, 2000)), { reason: 'overloaded', retryAfterMs: 2000 });
    assert.deepEqual(retryable(api(502)), { reason: 'server-error', retryAfterMs: null });
    for (const status of [400, 401, 404, 409, 413]) assert.equal(retryable(api(status)), null);
    const timeout = new DOMException('timed out', 'TimeoutError');
    assert.equal(retryable(new UnreachableError('http://m', timeout))?.reason, 'timeout');
    const refused = new TypeError('fetch failed', { cause: new Error('ECONNREFUSED') });
    assert.equal(retryable(new UnreachableError('http://m', refused))?.reason, 'unreachable');
    assert.equal(retryable(new Error('a bug')), null);
  });

  it('waits with full jitter under an exponential bound, never sooner than Retry-After', () => {
    const policy = BACKOFF.events;
    for (let attempt = 1; attempt <= 12; attempt++) {
      const bound = Math.min(policy.maxMs, policy.baseMs * 2 ** (attempt - 1));
      assert.equal(
        backoffMs(policy, attempt, null, () => 0),
        0,
        'full jitter starts at 0',
      );
      assert.ok(backoffMs(policy, attempt, null, () => 0.999) <= bound);
      assert.ok(backoffMs(policy, attempt, null, () => 0.999) > bound * 0.99);
      const asked = backoffMs(policy, attempt, 1000, Math.random);
      assert.ok(asked >= 1000 && asked <= 1000 + Math.max(1000, bound), `${asked}`);
    }
    // A fleet refused together spreads out: waits differ.
    const waits = new Set(Array.from({ length: 50 }, () => Math.round(backoffMs(policy, 3, 1000))));
    assert.ok(waits.size > 40);
  });
});
