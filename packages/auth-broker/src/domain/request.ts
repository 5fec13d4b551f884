import type { CallerPlane } from '../audit.js';
import { BrokerError } from '../errors.js';
import type { RequestContext } from '../http/context.js';
import { isOperationName, type OperationName } from './operations.js';
import {
  describeType,
  field,
  isPlainObject,
  optionalBoolean,
  Problems,
  rejectUnknownKeys,
  type JsonObject,
} from './validation.js';

/**
 * The envelope of the operation endpoint (spec/1 "Operation request"). Parsing records what it
 * learns in the request context as it goes, so a refused request is still audited with its
 * caller and id.
 */
export interface OperationRequest {
  operation: OperationName;
  /** The caller's repository text; the allowlist decides what it maps to. */
  repo: string;
  dryRun: boolean | undefined;
  params: JsonObject;
}

export const CALLER_PLANES: readonly CallerPlane[] = [
  'code-queue',
  'ci',
  'commander',
  'manual-cli',
  'unknown',
];

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const CORRELATION_ID = /^[A-Za-z0-9._:/-]{1,128}$/;
const ENVELOPE_FIELDS = ['requestId', 'caller', 'repo', 'operation', 'dryRun', 'params'];

export function parseOperationRequest(body: unknown, ctx: RequestContext): OperationRequest {
  const object = requireObject(body);
  const problems = new Problems();
  readCommon(object, ctx, problems);
  rejectUnknownKeys(object, ENVELOPE_FIELDS, 'request', problems);
  const dryRun = optionalBoolean(field(object, 'dryRun'), 'dryRun', problems);
  if (dryRun !== undefined) ctx.requestedDryRun = dryRun;
  const params = field(object, 'params') ?? {};
  if (!isPlainObject(params))
    problems.add(`params must be an object (got ${describeType(params)})`);
  const operation = field(object, 'operation');
  if (typeof operation !== 'string')
    problems.add(
      operation === undefined
        ? 'operation is required'
        : `operation must be a string (got ${describeType(operation)})`,
    );
  const repo = field(object, 'repo');
  if (typeof repo !== 'string')
    problems.add(
      repo === undefined ? 'repo is required' : `repo must be a string (got ${describeType(repo)})`,
    );
  problems.throwIfAny('operation request');
  if (!isOperationName(operation))
    throw new BrokerError('operation-not-allowed', 'the operation is not in the allowlist', {
      degradedReason: 'unknown-operation',
    });
  ctx.operation = operation;
  return { operation, repo: repo as string, dryRun, params: params as JsonObject };
}

export function requireObject(body: unknown): JsonObject {
  if (!isPlainObject(body))
    throw new BrokerError(
      'validation-failed',
      `the request body must be a JSON object (got ${describeType(body)})`,
      { degradedReason: 'body-not-object' },
    );
  return body;
}

/** requestId and caller, shared by both POST endpoints. */
export function readCommon(object: JsonObject, ctx: RequestContext, problems: Problems): void {
  const requestId = field(object, 'requestId');
  if (typeof requestId === 'string' && UUID.test(requestId))
    ctx.requestId = requestId.toLowerCase();
  else if (requestId !== undefined && requestId !== null)
    problems.add('requestId must be a UUID (the broker generates one when it is absent)');

  const caller = field(object, 'caller');
  if (caller === undefined || caller === null) return;
  if (!isPlainObject(caller)) {
    problems.add(`caller must be an object (got ${describeType(caller)})`);
    return;
  }
  rejectUnknownKeys(caller, ['plane', 'taskId', 'queueId'], 'caller', problems);
  const plane = field(caller, 'plane') ?? 'unknown';
  if (typeof plane === 'string' && (CALLER_PLANES as readonly string[]).includes(plane))
    ctx.caller.plane = plane as CallerPlane;
  else problems.add(`caller.plane must be one of ${CALLER_PLANES.join(', ')}`);
  for (const key of ['taskId', 'queueId'] as const) {
    const value = field(caller, key);
    if (value === undefined || value === null) continue;
    if (typeof value === 'string' && CORRELATION_ID.test(value)) ctx.caller[key] = value;
    else problems.add(`caller.${key} must be null or an id of 1-128 characters [A-Za-z0-9._:/-]`);
  }
}
