import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Redactor } from '@svc/contracts';
import type { AuditSink } from '../audit.js';
import { BrokerError, failureEnvelope } from '../errors.js';
import type { CallerBoundary } from './caller-boundary.js';
import { requestHosts, type HostCheck } from './host-check.js';
import { auditRecordFor, newRequestContext, type RequestContext } from './context.js';

const contexts = new WeakMap<FastifyRequest, RequestContext>();

/** The request's context, created on first use (some framework errors skip onRequest). */
export function contextOf(request: FastifyRequest): RequestContext {
  let ctx = contexts.get(request);
  if (!ctx) {
    ctx = newRequestContext(request.method, request.url, request.socket.remoteAddress);
    contexts.set(request, ctx);
  }
  return ctx;
}

export interface LifecycleDeps {
  boundary: CallerBoundary;
  hosts: HostCheck;
  audit: AuditSink;
  redactor: Redactor;
  credentialRef: string;
}

/**
 * The per-request frame: caller boundary first; then, as the response leaves, redaction by
 * value and exactly one audit line. If the line cannot be written the response is replaced by
 * a failure: nothing the broker did is returned unaudited.
 */
export function registerLifecycle(app: FastifyInstance, deps: LifecycleDeps): void {
  app.addHook('onRequest', (request, _reply, done) => {
    contextOf(request);
    if (!deps.boundary.allows(request.socket.remoteAddress))
      return done(
        new BrokerError(
          'unauthorized-caller',
          'the caller is outside the private boundary of the broker',
          { degradedReason: 'caller-not-trusted' },
        ),
      );
    if (!requestHosts(request.raw).every((host) => deps.hosts.allows(host)))
      return done(
        new BrokerError(
          'unauthorized-caller',
          'the request names a host that is not the broker (a configured name or loopback)',
          { degradedReason: 'host-not-allowed' },
        ),
      );
    done();
  });

  app.addHook('onSend', async (request, reply, payload) => {
    const ctx = contextOf(request);
    const safe = typeof payload === 'string' ? deps.redactor.redact(payload) : payload;
    void reply.header('x-request-id', ctx.requestId);
    try {
      await deps.audit.write(auditRecordFor(ctx, reply.statusCode, deps.credentialRef));
      return safe;
    } catch (error) {
      request.log.error(
        { requestId: ctx.requestId, code: (error as NodeJS.ErrnoException).code ?? 'error' },
        'audit write failed; response withheld',
      );
      return withheld(reply, ctx);
    }
  });

  app.addHook('onResponse', async (request, reply) => {
    const ctx = contextOf(request);
    request.log.info(
      {
        requestId: ctx.requestId,
        endpoint: `${ctx.endpoint.method} ${ctx.endpoint.path}`,
        operation: ctx.operation,
        repo: ctx.repo,
        status: reply.statusCode,
        failureKind: ctx.failure?.failureKind ?? null,
        degradedReason: ctx.failure?.degradedReason ?? null,
        upstreamCalls: ctx.upstreamCalls.length,
        durationMs: Math.round(reply.elapsedTime * 100) / 100,
      },
      ctx.failure ? 'request refused' : 'request served',
    );
  });
}

function withheld(reply: FastifyReply, ctx: RequestContext): string {
  const failure = new BrokerError(
    'broker-unavailable',
    'the broker cannot write its audit log, so it serves nothing',
    { degradedReason: 'audit-log-unwritable' },
  );
  ctx.failure = failure;
  void reply.code(failure.httpStatus);
  void reply.header('content-type', 'application/json; charset=utf-8');
  reply.removeHeader('retry-after');
  return JSON.stringify(failureEnvelope(failure, ctx.requestId));
}
