import type { FastifyInstance } from 'fastify';
import { BrokerError } from '../errors.js';

const SUSPICIOUS_KEY = /"(?:__proto__|constructor)"\s*:/;

/**
 * The broker's only body parser: JSON objects under the body limit. Keys that could reach an
 * object prototype are refused outright rather than stripped, so a caller learns the request
 * was not what it meant. Every other media type is `validation-failed` (unsupported-media-type).
 */
export function registerJsonBody(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = body as string;
    if (text.trim() === '') {
      done(
        new BrokerError('validation-failed', 'the request body is empty; send a JSON object', {
          degradedReason: 'empty-body',
        }),
        undefined,
      );
      return;
    }
    try {
      done(null, SUSPICIOUS_KEY.test(text) ? JSON.parse(text, refuseProtoKeys) : JSON.parse(text));
    } catch (error) {
      done(
        error instanceof BrokerError
          ? error
          : new BrokerError('validation-failed', 'the request body is not valid JSON', {
              degradedReason: 'invalid-json',
            }),
        undefined,
      );
    }
  });
}

function refuseProtoKeys(this: unknown, key: string, value: unknown): unknown {
  const isConstructorPrototype =
    key === 'constructor' &&
    value !== null &&
    typeof value === 'object' &&
    Object.hasOwn(value, 'prototype');
  if (key === '__proto__' || isConstructorPrototype)
    throw new BrokerError(
      'validation-failed',
      'the request body holds a forbidden key (__proto__ or constructor.prototype)',
      { degradedReason: 'forbidden-key' },
    );
  return value;
}
