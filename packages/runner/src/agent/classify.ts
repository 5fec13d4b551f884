import type { OutcomeFailureKind } from '@svc/contracts';
import { asRecord, num } from './protocol.js';

/**
 * Failure classification: what the agent reported (an `error` notification or a failed
 * turn's `error`) mapped to the service's outcome kinds.
 *
 * Choices where the spec names no kind:
 * - context window exceeded and usage limit (quota) exceeded are `provider-unavailable` with
 *   `reason` `context-window-exceeded` / `usage-limit-exceeded` and `retryable: false`: the
 *   provider refused the request, credentials were fine, and retrying the same request fails
 *   the same way until the history is compacted or the quota is raised.
 * - other 4xx answers (bad request, model not found) are `provider-unavailable`, not retryable.
 * - a missing provider key variable is `provider-auth-failed` (reason `credential-missing`).
 * - anything unrecognised is `backend-failed`: the agent failed in a way we cannot attribute.
 */

export type FailureClassification = 'provider' | 'infra' | 'backend';

export interface AgentFailure {
  failureKind: OutcomeFailureKind;
  classification: FailureClassification;
  retryable: boolean;
  /** Stable sub-reason, e.g. `http-401`, `rate-limited`, `stream-disconnected`. */
  reason: string;
  /** Human-readable, redacted and bounded by the caller before it leaves. */
  message: string;
  httpStatus: number | null;
  /** The agent's own error tag (small JSON), when it gave one. */
  codexErrorInfo: unknown;
}

export interface AgentErrorReport {
  message: string;
  codexErrorInfo: unknown;
  additionalDetails?: string | null;
}

export interface ClassifyContext {
  /** A compaction was running when the error came (compact request or auto-compaction). */
  compacting?: boolean;
}

/** The HTTP status the agent saw, from its error tag or its message. */
export function httpStatusOf(report: AgentErrorReport): number | null {
  const info = asRecord(report.codexErrorInfo);
  if (info) {
    for (const value of Object.values(info)) {
      const status = num(asRecord(value)?.['httpStatusCode']);
      if (status !== null) return status;
    }
  }
  const match = /\b(?:unexpected status|status(?: code)?:?)\s+(\d{3})\b/i.exec(report.message);
  return match ? Number(match[1]) : null;
}

function tagOf(info: unknown): string | null {
  if (typeof info === 'string') return info;
  const record = asRecord(info);
  const keys = record ? Object.keys(record) : [];
  return keys.length === 1 ? (keys[0] ?? null) : null;
}

const COMPACT_UNSUPPORTED = /not found|unsupported|not supported|no route|not implemented/i;

export function classifyAgentError(
  report: AgentErrorReport,
  context: ClassifyContext = {},
): AgentFailure {
  const status = httpStatusOf(report);
  const tag = tagOf(report.codexErrorInfo);
  const text = `${report.message} ${report.additionalDetails ?? ''}`;
  const base = {
    message: report.message,
    httpStatus: status,
    codexErrorInfo: report.codexErrorInfo,
  };
  const provider = (
    failureKind: OutcomeFailureKind,
    reason: string,
    retryable: boolean,
  ): AgentFailure => ({ ...base, failureKind, classification: 'provider', retryable, reason });

  const compactingHere = context.compacting === true || /\bcompact/i.test(report.message);
  if (
    compactingHere &&
    (status === 404 || status === 405 || status === 501 || COMPACT_UNSUPPORTED.test(text))
  ) {
    return provider('provider-compact-unsupported', 'compact-unsupported', false);
  }
  if (tag === 'unauthorized' || status === 401)
    return provider('provider-auth-failed', 'http-401', false);
  if (status === 403) return provider('provider-auth-failed', 'http-403', false);
  if (/missing environment variable/i.test(report.message)) {
    return {
      ...provider('provider-auth-failed', 'credential-missing', false),
      classification: 'infra',
    };
  }
  if (tag === 'contextWindowExceeded' || /context.?window|context_length_exceeded/i.test(text))
    return provider('provider-unavailable', 'context-window-exceeded', false);
  if (
    tag === 'usageLimitExceeded' ||
    tag === 'sessionBudgetExceeded' ||
    /insufficient_quota|exceeded your current quota|usage limit/i.test(text)
  )
    return provider('provider-unavailable', 'usage-limit-exceeded', false);
  if (tag === 'rateLimitExceeded' || status === 429)
    return provider('provider-unavailable', 'rate-limited', true);
  if (tag === 'serverOverloaded')
    return provider('provider-unavailable', 'server-overloaded', true);
  if (tag === 'internalServerError' || (status !== null && status >= 500))
    return provider(
      'provider-unavailable',
      status !== null ? `http-${status}` : 'server-error',
      true,
    );
  if (/idle timeout waiting for sse/i.test(text))
    return provider('provider-unavailable', 'stream-idle-timeout', true);
  if (
    tag === 'responseStreamDisconnected' ||
    /stream disconnected|stream closed before|connection (?:reset|closed|refused)|error sending request|error decoding response body/i.test(
      text,
    )
  )
    return provider('provider-unavailable', 'stream-disconnected', true);
  if (
    tag === 'responseStreamConnectionFailed' ||
    (tag === 'httpConnectionFailed' && status === null)
  )
    return provider('provider-unavailable', 'connection-failed', true);
  if (tag === 'modelNotFound') return provider('provider-unavailable', 'model-not-found', false);
  if (tag === 'badRequest' || (status !== null && status >= 400))
    return provider(
      'provider-unavailable',
      status !== null ? `http-${status}` : 'bad-request',
      false,
    );
  if (tag === 'responseTooManyFailedAttempts')
    return provider('provider-unavailable', 'too-many-failed-attempts', true);
  return {
    ...base,
    failureKind: 'backend-failed',
    classification: 'backend',
    retryable: false,
    reason: tag === 'sandboxError' ? 'sandbox-error' : 'agent-error',
  };
}

/** Failures this layer itself observes (not reported by the agent). */
export function localFailure(
  failureKind: OutcomeFailureKind,
  reason: string,
  message: string,
  options: { retryable?: boolean; classification?: FailureClassification } = {},
): AgentFailure {
  return {
    failureKind,
    classification: options.classification ?? 'backend',
    retryable: options.retryable ?? false,
    reason,
    message,
    httpStatus: null,
    codexErrorInfo: null,
  };
}

/** Resume errors: a missing rollout is distinct, anything else is a resume failure. */
export function isRolloutNotFound(message: string): boolean {
  return /no rollout found/i.test(message);
}
