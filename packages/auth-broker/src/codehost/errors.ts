import { BrokerError, isBrokerError } from '../errors.js';

/**
 * Map anything a code-host call throws to the spec's error table. Upstream message text is not
 * copied into the failure: it is the code host's prose, and the status and headers say enough.
 */
export interface HttpErrorLike {
  status: number;
  response?: { status: number; headers: Record<string, string | number | undefined> };
  cause?: unknown;
  name?: string;
}

const FALLBACK_RETRY_AFTER_SECONDS = 60;

export function toBrokerError(error: unknown, now: number = Date.now()): BrokerError {
  if (isBrokerError(error)) return error;
  if (!isHttpErrorLike(error) || !error.response) return egressError(error);
  const { status } = error.response;
  const headers = error.response.headers;
  if (status === 429 || (status === 403 && isRateLimited(headers))) {
    const secondary = headerText(headers, 'x-ratelimit-remaining') !== '0';
    const retryAfterSeconds = retryAfter(headers, now);
    return new BrokerError(
      'codehost-rate-limited',
      `the code host is rate limiting the broker credential; retry after ${retryAfterSeconds} s`,
      {
        degradedReason: secondary ? 'rate-limit-secondary' : 'rate-limit-primary',
        retryAfterSeconds,
        details: { upstreamStatus: status },
      },
    );
  }
  if (status === 403) return forbidden(headers);
  if (status === 401)
    return new BrokerError(
      'codehost-permission-denied',
      'the code host rejected the broker-held credential (401)',
      { degradedReason: 'credential-rejected', details: { upstreamStatus: status } },
    );
  if (status === 404 || status === 410)
    return new BrokerError(
      'repo-not-found',
      'the repository or resource does not exist or is not visible to the broker credential',
      { degradedReason: status === 410 ? 'resource-gone' : 'not-found' },
    );
  if (status >= 300 && status < 400)
    return new BrokerError(
      'repo-not-found',
      'the repository has moved (renamed or transferred); update AUTH_BROKER_ALLOWED_REPOS',
      { degradedReason: 'repo-moved', details: { upstreamStatus: status } },
    );
  if (status === 422)
    return new BrokerError('validation-failed', 'the code host rejected the parameters (422)', {
      degradedReason: 'codehost-rejected-params',
    });
  if (status >= 500)
    return new BrokerError('codehost-egress-failed', `the code host answered ${status}`, {
      degradedReason: 'codehost-server-error',
      details: { upstreamStatus: status },
    });
  return new BrokerError('upstream-invalid-response', `unexpected code-host status ${status}`, {
    degradedReason: 'unexpected-status',
    details: { upstreamStatus: status },
  });
}

function egressError(error: unknown): BrokerError {
  const names = [errorName(error), errorName((error as { cause?: unknown } | null)?.cause)];
  const timedOut = names.includes('TimeoutError') || names.includes('AbortError');
  return new BrokerError(
    'codehost-egress-failed',
    timedOut ? 'the code host did not answer in time' : 'the code host could not be reached',
    { degradedReason: timedOut ? 'codehost-timeout' : 'codehost-unreachable' },
  );
}

function forbidden(headers: Headers): BrokerError {
  const accepted = splitList(headerText(headers, 'x-accepted-oauth-scopes'));
  const granted = splitList(headerText(headers, 'x-oauth-scopes'));
  const permissions = headerText(headers, 'x-accepted-github-permissions');
  if (accepted.length > 0 && !accepted.some((scope) => granted.includes(scope))) {
    return new BrokerError(
      'scope-insufficient',
      `the broker credential lacks a scope this operation accepts (${accepted.join(', ')})`,
      {
        degradedReason: 'oauth-scope-missing',
        details: { acceptedScopes: accepted, grantedScopes: granted },
      },
    );
  }
  if (permissions) {
    return new BrokerError(
      'scope-insufficient',
      `the broker credential lacks a permission this operation needs (${permissions})`,
      {
        degradedReason: 'permission-missing',
        details: { acceptedPermissions: permissions.slice(0, 200) },
      },
    );
  }
  return new BrokerError(
    'codehost-permission-denied',
    'the broker credential has no access to this repository or action (403)',
    { degradedReason: 'access-denied' },
  );
}

type Headers = NonNullable<HttpErrorLike['response']>['headers'];

function isRateLimited(headers: Headers): boolean {
  return (
    headerText(headers, 'x-ratelimit-remaining') === '0' ||
    headerText(headers, 'retry-after') !== undefined
  );
}

/** Seconds to wait: `retry-after` when given, else until `x-ratelimit-reset`, else a minute. */
function retryAfter(headers: Headers, now: number): number {
  const after = Number(headerText(headers, 'retry-after'));
  if (Number.isFinite(after) && after >= 0) return Math.ceil(after);
  const reset = Number(headerText(headers, 'x-ratelimit-reset'));
  if (Number.isFinite(reset) && reset > 0) return Math.max(1, Math.ceil(reset - now / 1000));
  return FALLBACK_RETRY_AFTER_SECONDS;
}

function headerText(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  return value === undefined ? undefined : String(value).trim();
}

function splitList(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

function errorName(value: unknown): string | undefined {
  return value instanceof Error ? value.name : undefined;
}

function isHttpErrorLike(value: unknown): value is HttpErrorLike {
  return value instanceof Error && typeof (value as Partial<HttpErrorLike>).status === 'number';
}
