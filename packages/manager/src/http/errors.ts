import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  isServiceError,
  REPO_URL_PATTERN,
  ServiceError,
  type ErrorBody,
  type FailureKind,
} from '@svc/contracts';

import { RouteMethods, unrouted } from './methods.js';

const MAX_ISSUES = 10;

/** A not-found answer for the paths a page owns (the console's), undefined for every other. */
export type PageNotFound = (
  request: FastifyRequest,
  reply: FastifyReply,
) => FastifyReply | undefined;

/**
 * The one error handler. 4xx: the structured body, logged at warn. 5xx: logged with the stack,
 * answered with a generic message and the traceId to find the log line. An unknown path is a
 * JSON `not-found`, unless `pages` answers it.
 */
export function registerErrorHandling(app: FastifyInstance, pages?: PageNotFound): void {
  // Before any route: it records the methods of each path as routes are added.
  const methods = new RouteMethods();
  methods.register(app);
  app.decorate('routeMethods', methods);
  app.setErrorHandler(async (error: FastifyError, request, reply) => {
    const failure = classify(error);
    // A client still sending a large body reads no answer if the connection closes under it:
    // the rest of the body is read (and dropped) first, then the 413 is sent.
    // Fastify closes the connection after a refused body; once the body has been read whole,
    // the connection is as good as after any answer and is kept.
    if (failure.failureKind === 'body-too-large') {
      if (await drained(request)) reply.removeHeader('connection');
      else reply.header('connection', 'close');
    }
    if (failure.httpStatus >= 500) {
      request.log.error({ err: error }, 'request failed');
    } else {
      request.log.warn(
        { failureKind: failure.failureKind, reason: failure.message },
        'request refused',
      );
    }
    return sendFailure(request, reply, failure);
  });

  app.setNotFoundHandler((request, reply) => pages?.(request, reply) ?? notFound(request, reply));
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The methods of every registered path (404 or 405 for a request no route took). */
    routeMethods: RouteMethods;
  }
}

/** No route took the request: 405 with Allow when its path exists with other methods, else 404. */
export function notFound(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return sendFailure(request, reply, unrouted(request.server.routeMethods, request, reply));
}

/** Past this, a client still sending is answered and the connection closed after the 413. */
const DRAIN_MAX_BYTES = 64 * 1024 * 1024;
const DRAIN_MAX_MS = 10_000;

function drained(request: FastifyRequest): Promise<boolean> {
  const raw = request.raw;
  if (raw.complete || raw.readableEnded || raw.destroyed) return Promise.resolve(true);
  return new Promise((resolve) => {
    let seen = 0;
    const finish = (ok: boolean) => {
      clearTimeout(timer);
      raw.off('data', onData).off('end', onEnd).off('error', onError).off('close', onEnd);
      if (!ok) raw.pause();
      resolve(ok);
    };
    const onData = (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > DRAIN_MAX_BYTES) finish(false);
    };
    const onEnd = () => finish(true);
    const onError = () => finish(false);
    const timer = setTimeout(() => finish(false), DRAIN_MAX_MS);
    raw.on('data', onData).on('end', onEnd).on('error', onError).on('close', onEnd);
    raw.resume();
  });
}

/** Fastify's own early failures (malformed URL, param too long) in the same structured shape. */
export function frameworkFailure(
  error: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): void {
  void sendFailure(
    request,
    reply,
    new ServiceError('schema-invalid', `malformed request: ${error.code}`),
  );
}

export function sendFailure(
  request: FastifyRequest,
  reply: FastifyReply,
  failure: ServiceError,
): FastifyReply {
  const body: ErrorBody = {
    failureKind: failure.failureKind,
    message: failure.message,
    traceId: request.id,
    ...(failure.details ? { details: { ...failure.details } } : {}),
  };
  // A refusal that says when to come back says it in the standard header too.
  const retryAfter = failure.details?.['retryAfterSeconds'];
  if (typeof retryAfter === 'number' && Number.isFinite(retryAfter))
    reply.header('retry-after', String(Math.max(0, Math.ceil(retryAfter))));
  return reply.code(failure.httpStatus).send(body);
}

function classify(error: FastifyError): ServiceError {
  if (isServiceError(error)) return error;
  if (error.validation) {
    const context = error.validationContext ?? 'body';
    const issues = error.validation
      .slice(0, MAX_ISSUES)
      .map((issue) => describeIssue(context, issue));
    return new ServiceError(
      'schema-invalid',
      `invalid ${context}: ${issues.map((i) => i.message).join('; ')}`,
      {
        context,
        issues,
      },
    );
  }
  const byCode: Partial<Record<string, [FailureKind, string]>> = {
    FST_ERR_CTP_BODY_TOO_LARGE: ['body-too-large', 'request body is larger than the limit'],
    FST_ERR_CTP_INVALID_MEDIA_TYPE: [
      'unsupported-media-type',
      'content-type must be application/json',
    ],
    FST_ERR_CTP_EMPTY_JSON_BODY: ['schema-invalid', 'request body is empty; send a JSON object'],
    FST_ERR_CTP_INVALID_JSON_BODY: ['schema-invalid', 'request body is not valid JSON'],
    FST_ERR_CTP_INVALID_CONTENT_LENGTH: [
      'schema-invalid',
      'content-length does not match the body',
    ],
  };
  const mapped = byCode[error.code];
  if (mapped) return new ServiceError(mapped[0], mapped[1]);
  if (error instanceof SyntaxError)
    return new ServiceError('schema-invalid', 'request body is not valid JSON');
  const status = error.statusCode ?? 500;
  if (status >= 400 && status < 500) return new ServiceError('schema-invalid', 'malformed request');
  return new ServiceError('internal-error', 'internal error; see the server log for this traceId');
}

interface AjvIssue {
  instancePath?: string;
  message?: string;
  keyword?: string;
  params?: Record<string, unknown>;
}

const LEGACY_HINTS: Record<string, string> = {
  gitMirror: 'a Git mirror is infrastructure, not a field: declare the original repoUrl',
  toolAliases: 'legacy field; tools come from the bundle tools/ directory',
  skillRefs: 'legacy field; use requiredSkills and .agents/skills in the bundle',
  workspaceFiles: 'legacy field; files come only from the git bundle',
  subdir: 'legacy field; use bundles[].subpath',
  sparsePaths: 'legacy field; use bundles[] items',
};

function describeIssue(context: string, issue: AjvIssue): { path: string; message: string } {
  const base = `${context}${(issue.instancePath ?? '').replaceAll('/', '.')}`;
  if (
    issue.keyword === 'additionalProperties' &&
    typeof issue.params?.['additionalProperty'] === 'string'
  ) {
    const field = issue.params['additionalProperty'];
    const hint = LEGACY_HINTS[field];
    return {
      path: `${base}.${field}`,
      message: `${base}.${field} is not allowed${hint ? ` (${hint})` : ''}`,
    };
  }
  if (issue.keyword === 'pattern' && issue.params?.['pattern'] === REPO_URL_PATTERN)
    return {
      path: base,
      message: `${base} must not embed credentials (user info); use a credentialRef`,
    };
  return { path: base, message: `${base} ${issue.message ?? 'is invalid'}` };
}
