/**
 * Every failure kind the broker, its client adapter and the runner-local push check can report.
 * One registry: the error class, the HTTP error handler, the adapter and docs/auth-broker.md all
 * read it, and a test checks that the docs list exactly these kinds.
 *
 * `httpStatus` is null for kinds that never travel as a broker HTTP response (the adapter's
 * `auth-missing`, the runner's `git-remote-gap`).
 */
export type RunnerDisposition = 'ready' | 'infra-blocked' | 'business-failed';

export interface FailureKindSpec {
  httpStatus: number | null;
  runnerDisposition: Exclude<RunnerDisposition, 'ready'>;
  retryable: boolean;
  /** Who reports it: the broker service, the client adapter, or the runner itself. */
  origin: 'broker' | 'adapter' | 'runner';
  meaning: string;
  /** Bounded diagnostic commands or manual actions offered with the failure. */
  next: readonly string[];
}

export const BROKER_FAILURE_KINDS = {
  'auth-not-configured': {
    httpStatus: 503,
    runnerDisposition: 'infra-blocked',
    retryable: false,
    origin: 'broker',
    meaning: 'no credential reference configured, or the referenced credential is unreadable',
    next: [
      'operator: set AUTH_BROKER_CODEHOST_CREDENTIAL_REF=file:<path> (or env:<NAME>) on the broker',
      'auth-broker health',
    ],
  },
  'broker-unavailable': {
    httpStatus: 503,
    runnerDisposition: 'infra-blocked',
    retryable: true,
    origin: 'broker',
    meaning: 'broker or proxy unreachable, or the broker cannot write its audit log',
    next: ['auth-broker health', 'check SVC_AUTH_BROKER_URL and the broker process'],
  },
  'unauthorized-caller': {
    httpStatus: 403,
    runnerDisposition: 'infra-blocked',
    retryable: false,
    origin: 'broker',
    meaning:
      'caller outside the private boundary (loopback or AUTH_BROKER_TRUSTED_CIDRS), or a Host that is not the broker',
    next: [
      'operator: call from loopback or add the caller network to AUTH_BROKER_TRUSTED_CIDRS',
      'operator: address the broker by a name in AUTH_BROKER_ALLOWED_HOSTS or a loopback literal',
    ],
  },
  'repo-not-allowed': {
    httpStatus: 403,
    runnerDisposition: 'business-failed',
    retryable: false,
    origin: 'broker',
    meaning: 'repository not in the allowlist',
    next: ['operator: add the repository to AUTH_BROKER_ALLOWED_REPOS', 'auth-broker health'],
  },
  'operation-not-allowed': {
    httpStatus: 403,
    runnerDisposition: 'business-failed',
    retryable: false,
    origin: 'broker',
    meaning: 'operation or endpoint not in the allowlist',
    next: ['auth-broker contract'],
  },
  'dry-run-required': {
    httpStatus: 409,
    runnerDisposition: 'business-failed',
    retryable: false,
    origin: 'broker',
    meaning: 'mutation requested but only dry-run is allowed',
    next: ['resend with dryRun=true to get the planned request'],
  },
  'validation-failed': {
    httpStatus: 400,
    runnerDisposition: 'business-failed',
    retryable: false,
    origin: 'broker',
    meaning: 'missing or invalid structured parameters, malformed or oversized request body',
    next: ['auth-broker contract'],
  },
  'codehost-egress-failed': {
    httpStatus: 502,
    runnerDisposition: 'infra-blocked',
    retryable: true,
    origin: 'broker',
    meaning: 'code-host or proxy network path failed (connection error, timeout, upstream 5xx)',
    next: ['retry later', 'operator: check egress to AUTH_BROKER_CODEHOST_API_URL'],
  },
  'codehost-rate-limited': {
    httpStatus: 429,
    runnerDisposition: 'infra-blocked',
    retryable: true,
    origin: 'broker',
    meaning: 'code host returned rate limiting (primary or secondary)',
    next: ['retry after retryAfterSeconds'],
  },
  'codehost-permission-denied': {
    httpStatus: 403,
    runnerDisposition: 'infra-blocked',
    retryable: false,
    origin: 'broker',
    meaning: 'credential rejected, or lacks repository or action access',
    next: ['operator: check the broker-held credential and its repository access'],
  },
  'scope-insufficient': {
    httpStatus: 403,
    runnerDisposition: 'infra-blocked',
    retryable: false,
    origin: 'broker',
    meaning: 'accepted scopes or permissions of the endpoint are not granted to the credential',
    next: ['operator: grant the scopes listed in acceptedScopes to the broker-held credential'],
  },
  'repo-not-found': {
    httpStatus: 404,
    runnerDisposition: 'business-failed',
    retryable: false,
    origin: 'broker',
    meaning: 'allowed repository or resource does not exist, is hidden, or has moved',
    next: ['check the repository name and the issue or pull request number'],
  },
  'upstream-invalid-response': {
    httpStatus: 502,
    runnerDisposition: 'infra-blocked',
    retryable: true,
    origin: 'broker',
    meaning: 'code-host response could not be parsed safely',
    next: ['retry later', 'operator: check AUTH_BROKER_CODEHOST_API_URL points at a REST API'],
  },
  'auth-missing': {
    httpStatus: null,
    runnerDisposition: 'infra-blocked',
    retryable: false,
    origin: 'adapter',
    meaning: 'no broker address (SVC_AUTH_BROKER_URL / AUTH_BROKER_URL) in the runner environment',
    next: ['set SVC_AUTH_BROKER_URL to the private broker address', 'auth-broker contract'],
  },
  'git-remote-gap': {
    httpStatus: null,
    runnerDisposition: 'infra-blocked',
    retryable: false,
    origin: 'runner',
    meaning: 'runner-local `git push --dry-run` failed; the broker never checks pushes',
    next: ['runner: check its own git remote and git credentials'],
  },
} as const satisfies Record<string, FailureKindSpec>;

export type BrokerFailureKind = keyof typeof BROKER_FAILURE_KINDS;

export const BROKER_FAILURE_KIND_NAMES = Object.keys(BROKER_FAILURE_KINDS) as BrokerFailureKind[];

export function isBrokerFailureKind(value: unknown): value is BrokerFailureKind {
  return typeof value === 'string' && Object.hasOwn(BROKER_FAILURE_KINDS, value);
}

export interface BrokerErrorOptions {
  /** Short machine-readable reason within the kind, e.g. `rate-limit-primary`. */
  degradedReason?: string;
  next?: readonly string[];
  retryAfterSeconds?: number;
  /** Extra structured context; serialized as is, so never a secret value. */
  details?: Record<string, unknown>;
}

/** The one error class of the broker. Its status, disposition and retry hint come from the kind. */
export class BrokerError extends Error {
  readonly failureKind: BrokerFailureKind;
  readonly degradedReason: string;
  readonly next: readonly string[];
  readonly retryAfterSeconds: number | undefined;
  readonly details: Readonly<Record<string, unknown>> | undefined;

  constructor(failureKind: BrokerFailureKind, message: string, options: BrokerErrorOptions = {}) {
    super(message);
    this.name = 'BrokerError';
    this.failureKind = failureKind;
    this.degradedReason = options.degradedReason ?? failureKind;
    this.next = options.next ?? BROKER_FAILURE_KINDS[failureKind].next;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.details = options.details;
  }

  get spec(): FailureKindSpec {
    return BROKER_FAILURE_KINDS[this.failureKind];
  }

  /** HTTP status on the broker's wire; adapter/runner kinds never travel there (500 guards it). */
  get httpStatus(): number {
    return this.spec.httpStatus ?? 500;
  }
}

export function isBrokerError(value: unknown): value is BrokerError {
  return value instanceof BrokerError;
}

/** The failure envelope every failed request and adapter command returns. */
export interface FailureEnvelope {
  ok: false;
  message: string;
  requestId: string;
  failureKind: BrokerFailureKind;
  degradedReason: string;
  runnerDisposition: Exclude<RunnerDisposition, 'ready'>;
  retryable: boolean;
  next: string[];
  retryAfterSeconds?: number;
  details?: Record<string, unknown>;
}

export function failureEnvelope(error: BrokerError, requestId: string): FailureEnvelope {
  return {
    ok: false,
    message: error.message,
    requestId,
    failureKind: error.failureKind,
    degradedReason: error.degradedReason,
    runnerDisposition: error.spec.runnerDisposition,
    retryable: error.spec.retryable,
    next: [...error.next],
    ...(error.retryAfterSeconds !== undefined
      ? { retryAfterSeconds: error.retryAfterSeconds }
      : {}),
    ...(error.details ? { details: { ...error.details } } : {}),
  };
}
