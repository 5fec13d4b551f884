import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { BrokerError, failureEnvelope, isBrokerError } from '../errors.js';
import { contextOf } from './lifecycle.js';

/**
 * The one error handler. Every failure leaves as the spec's failure envelope with the status of
 * its kind. 4xx are logged at warn with the kind; anything unexpected is logged with the error
 * and answered without its text.
 */
export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const failure = classify(error);
    if (!isBrokerError(error) && failure.degradedReason === 'internal-error')
      request.log.error({ err: error }, 'request failed');
    return sendFailure(request, reply, failure);
  });

  app.setNotFoundHandler((request, reply) =>
    sendFailure(
      request,
      reply,
      new BrokerError(
        'operation-not-allowed',
        'no such endpoint; the broker serves only its allowlist',
        {
          degradedReason: 'unknown-endpoint',
        },
      ),
    ),
  );
}

export function sendFailure(
  request: FastifyRequest,
  reply: FastifyReply,
  failure: BrokerError,
): FastifyReply {
  const ctx = contextOf(request);
  ctx.failure = failure;
  if (failure.retryAfterSeconds !== undefined)
    void reply.header('retry-after', String(failure.retryAfterSeconds));
  return reply.code(failure.httpStatus).send(failureEnvelope(failure, ctx.requestId));
}

const BY_CODE: Partial<Record<string, [reason: string, message: string]>> = {
  FST_ERR_CTP_BODY_TOO_LARGE: ['body-too-large', 'the request body is larger than the limit'],
  FST_ERR_CTP_INVALID_MEDIA_TYPE: [
    'unsupported-media-type',
    'content-type must be application/json',
  ],
  FST_ERR_CTP_EMPTY_JSON_BODY: ['empty-body', 'the request body is empty; send a JSON object'],
  FST_ERR_CTP_INVALID_JSON_BODY: ['invalid-json', 'the request body is not valid JSON'],
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: [
    'invalid-content-length',
    'content-length does not match the body',
  ],
  FST_ERR_BAD_URL: ['bad-url', 'the request URL is malformed'],
};

function classify(error: FastifyError): BrokerError {
  if (isBrokerError(error)) return error;
  const mapped = BY_CODE[error.code];
  if (mapped) return new BrokerError('validation-failed', mapped[1], { degradedReason: mapped[0] });
  const status = error.statusCode ?? 500;
  if (status >= 400 && status < 500)
    return new BrokerError('validation-failed', 'malformed request', {
      degradedReason: 'malformed-request',
    });
  return new BrokerError(
    'broker-unavailable',
    'internal broker error; see the broker log for this requestId',
    {
      degradedReason: 'internal-error',
    },
  );
}
