/**
 * Every failure kind the run manager can return, with its HTTP status. One registry: the error
 * class, the error handler, the OpenAPI document and docs/failure-kinds.md all read it, and a
 * test checks the docs list exactly these kinds.
 *
 * `httpStatus` is null for outcome kinds: they appear in results, events and command records,
 * never as an HTTP error.
 */
export const FAILURE_KINDS = {
  'schema-invalid': {
    httpStatus: 400,
    meaning:
      'missing or invalid fields, legacy or forbidden input fields, unsatisfiable tool endpoint requirement',
  },
  'auth-failed': { httpStatus: 401, meaning: 'client bearer token missing or wrong' },
  'tenant-policy-denied': {
    httpStatus: 403,
    meaning: 'tenant, project, provider or policy boundary violation',
  },
  'not-found': { httpStatus: 404, meaning: 'no such resource' },
  'method-not-allowed': {
    httpStatus: 405,
    meaning:
      'the path exists but not with this method; the Allow header lists the methods it takes',
  },
  'unsupported-media-type': {
    httpStatus: 415,
    meaning: 'the request body is not application/json',
  },
  'idempotency-conflict': {
    httpStatus: 409,
    meaning: 'same idempotency key with a different payload hash',
  },
  'runner-lease-conflict': {
    httpStatus: 409,
    meaning: 'another runner holds an unexpired lease on the run',
  },
  'run-terminal': {
    httpStatus: 409,
    meaning: 'the run is terminal and accepts no new command, claim or runner job',
  },
  'state-conflict': {
    httpStatus: 409,
    meaning: 'the requested transition is not allowed from the current state',
  },
  'attempt-in-progress': {
    httpStatus: 409,
    meaning:
      'the queue task has an attempt that is dispatched or running; refresh it, or wait for its outcome',
  },
  'task-terminal': {
    httpStatus: 409,
    meaning: 'the queue task is completed or cancelled and accepts no dispatch',
  },
  'attempts-exhausted': {
    httpStatus: 409,
    meaning:
      'the queue task used all of its maxAttempts; retry it (`queue retry`) for a fresh budget',
  },
  'capacity-exhausted': {
    httpStatus: 429,
    meaning:
      'a scheduler capacity limit (global, tenant, backend profile or queue) on live runners is reached; dispatch again when one has ended',
  },
  'queue-paused': {
    httpStatus: 409,
    meaning:
      "the task's queue is paused: nothing of it is dispatched, by the scheduler or by hand, until `queue resume`",
  },
  'build-required': {
    httpStatus: 409,
    meaning:
      'no digest-pinned image exists for this environment specification yet; build it through controlled CI',
  },
  'session-store-evicted': {
    httpStatus: 410,
    meaning: 'session volume removed, or the rollout of the thread was not found on it',
  },
  'body-too-large': { httpStatus: 413, meaning: 'request body over the size limit' },
  'prompt-too-large': {
    httpStatus: 413,
    meaning: 'a prompt or the assembled prompts exceed the size cap',
  },
  'capacity-exceeded': {
    httpStatus: 429,
    meaning:
      'this process already holds its limit of client long-polls and event streams; retry after the Retry-After seconds',
  },
  'secret-unavailable': {
    httpStatus: 424,
    meaning: 'matching provider or tool Secret missing; no profile fallback',
  },
  'required-skill-unavailable': {
    httpStatus: 424,
    meaning: 'a required skill is missing at assembly',
  },
  'prompt-unavailable': { httpStatus: 424, meaning: 'a required prompt file is missing' },
  'infra-failed': {
    httpStatus: 502,
    meaning: 'infrastructure failure, including runner startup failures and missing required tools',
  },
  'auth-missing': {
    httpStatus: 503,
    meaning: 'server token absent while the runtime requires authentication',
  },
  overloaded: {
    httpStatus: 503,
    meaning:
      'this replica would have made the call wait past its queue-time budget; retry after the Retry-After header, with jitter',
  },
  'internal-error': {
    httpStatus: 500,
    meaning: 'unexpected server fault; details are in the server log under the traceId',
  },
  'backend-failed': { httpStatus: null, meaning: 'coding agent failure (crash, protocol error)' },
  'provider-auth-failed': { httpStatus: null, meaning: 'provider authentication failure' },
  'provider-unavailable': {
    httpStatus: null,
    meaning: 'provider unavailable (429, 5xx, cut stream); retryable',
  },
  'provider-compact-unsupported': {
    httpStatus: null,
    meaning: 'upstream compact path unsupported',
  },
  'idle-timeout': {
    httpStatus: null,
    meaning: 'the idle budget of executionPolicy.timeoutMs passed with no agent activity',
  },
  cancelled: { httpStatus: null, meaning: 'cancellation' },
  'thread-resume-failed': {
    httpStatus: null,
    meaning: 'thread resume failure other than eviction',
  },
  'command-expired': {
    httpStatus: null,
    meaning: 'the command was not delivered to a runner within its TTL',
  },
  'unsupported-operation': {
    httpStatus: null,
    meaning: 'tool route not implemented (tran upload, download, Windows)',
  },
} as const satisfies Record<string, { httpStatus: number | null; meaning: string }>;

export type FailureKind = keyof typeof FAILURE_KINDS;

export const FAILURE_KIND_NAMES = Object.keys(FAILURE_KINDS) as FailureKind[];

export function isFailureKind(value: unknown): value is FailureKind {
  return typeof value === 'string' && Object.hasOwn(FAILURE_KINDS, value);
}

/** Kinds a runner may report as a command or run outcome. */
export const OUTCOME_FAILURE_KINDS = [
  'backend-failed',
  'provider-auth-failed',
  'provider-unavailable',
  'provider-compact-unsupported',
  'idle-timeout',
  'cancelled',
  'thread-resume-failed',
  'session-store-evicted',
  'required-skill-unavailable',
  'prompt-unavailable',
  'prompt-too-large',
  'secret-unavailable',
  'infra-failed',
  'schema-invalid',
  'tenant-policy-denied',
  'unsupported-operation',
] as const satisfies readonly FailureKind[];

export type OutcomeFailureKind = (typeof OUTCOME_FAILURE_KINDS)[number];

/**
 * Kinds that block the whole run, not one command: the run's assembly cannot serve any turn
 * (a required skill or prompt is missing or too large), so every later command would be refused
 * the same way.
 */
export const RUN_BLOCKING_KINDS = [
  'required-skill-unavailable',
  'prompt-unavailable',
  'prompt-too-large',
] as const satisfies readonly OutcomeFailureKind[];
