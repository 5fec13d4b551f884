import { FAILURE_KINDS, type FailureKind } from './failure-kinds.js';

/**
 * The one error class of the service. Domain code throws it; the HTTP error handler turns it
 * into `{ failureKind, message, traceId, details? }` with the registered status.
 * `details` must never hold a secret value: it is serialized as is.
 */
export class ServiceError extends Error {
  readonly failureKind: FailureKind;
  readonly details: Readonly<Record<string, unknown>> | undefined;

  constructor(failureKind: FailureKind, message: string, details?: Record<string, unknown>) {
    super(message);
    this.name = 'ServiceError';
    this.failureKind = failureKind;
    this.details = details;
  }

  /**
   * An error that is an answer, not a fault: no stack is captured. A manager past its capacity
   * refuses thousands of calls a second, when it can least afford the capture, which is most
   * of an error's cost; such a refusal's stack would only show the admission hook.
   */
  static answer(
    failureKind: FailureKind,
    message: string,
    details?: Record<string, unknown>,
  ): ServiceError {
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      return new ServiceError(failureKind, message, details);
    } finally {
      Error.stackTraceLimit = limit;
    }
  }

  get httpStatus(): number {
    return FAILURE_KINDS[this.failureKind].httpStatus ?? 500;
  }
}

export function isServiceError(value: unknown): value is ServiceError {
  return value instanceof ServiceError;
}

/** Normalize anything thrown into an Error, so callers never handle strings or plain objects. */
export function toError(value: unknown): Error {
  if (value instanceof Error) return value;
  if (typeof value === 'string') return new Error(value);
  try {
    return new Error(JSON.stringify(value));
  } catch {
    return new Error(String(value));
  }
}
