import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError, type Redactor } from '@svc/contracts';
import { cleanBody, nestsDeeper, type SecretFieldMode } from './body-walk.js';

/** Nesting deeper than this is refused before anything walks the document. */
export const MAX_BODY_DEPTH = 64;

declare module 'fastify' {
  interface FastifyContextConfig {
    /** `replace`: U+0000 in the body is kept for the domain to replace (event data). */
    nulInBody?: 'reject' | 'replace';
    /**
     * Body fields (dotted paths from the body, e.g. `runnerJob.transientEnv`) that carry a secret on purpose. `as-sent`: taken exactly as sent (a
     * credential being written; the domain keeps it out of every record). `no-shapes`: known
     * secrets are masked but token-shaped values are kept (a job's transient environment).
     */
    secretFields?: Readonly<Record<string, SecretFieldMode>>;
  }
}

/**
 * The one JSON body parser of the manager, for every route. Size is bounded by Fastify's
 * bodyLimit; nesting is bounded by a scan of the raw text before parsing; then one iterative
 * walk makes strings storable (PostgreSQL text and jsonb hold no U+0000 and no lone
 * surrogates), drops `__proto__` keys, and scrubs every string: registered secret values in any
 * of their encodings and credential-shaped substrings nobody registered never reach the domain,
 * the store or a response.
 */
export function registerBodyParsing(app: FastifyInstance, redactor: Redactor): void {
  // JSON only: Fastify's own text/plain parser would hand a route a string, refused later as
  // a schema error; any other media type is 415 unsupported-media-type (http/errors.ts).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    'application/json',
    { parseAs: 'string' },
    (request: FastifyRequest, body, done) => {
      const text = body as string;
      if (text.trim() === '') {
        done(new ServiceError('schema-invalid', 'request body is empty; send a JSON object'));
        return;
      }
      if (nestsDeeper(text, MAX_BODY_DEPTH)) {
        done(
          new ServiceError(
            'schema-invalid',
            `request body nests deeper than ${MAX_BODY_DEPTH} levels`,
          ),
        );
        return;
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        done(new ServiceError('schema-invalid', 'request body is not valid JSON'));
        return;
      }
      const config = request.routeOptions.config;
      try {
        done(
          null,
          cleanBody(parsed, {
            scrub: (s) => redactor.scrub(s),
            mask: (s) => redactor.redactIncoming(s),
            keepNul: config.nulInBody === 'replace',
            secretFields: config.secretFields ?? {},
          }),
        );
      } catch (error) {
        done(error as Error);
      }
    },
  );

  // `curl -H 'content-type: application/json' -X POST …` with no data: no body, not bad JSON.
  app.addHook('onRequest', (request, _reply, done) => {
    const { headers } = request;
    const noBody =
      (headers['content-length'] === undefined || headers['content-length'] === '0') &&
      headers['transfer-encoding'] === undefined;
    if (noBody) delete headers['content-type'];
    done();
  });

  app.addHook('preValidation', (request: FastifyRequest, _reply, done) => {
    // A POST with no body at all (`curl -X POST …/cancel`) means "no options".
    if (
      request.body === undefined &&
      request.method !== 'GET' &&
      request.method !== 'DELETE' &&
      request.routeOptions.schema?.body
    )
      request.body = {};
    const at = flatNul(request.params, 'params') ?? flatNul(request.query, 'query');
    done(
      at
        ? new ServiceError('schema-invalid', `U+0000 is not allowed in requests (at ${at})`)
        : undefined,
    );
  });
}

/** Params and query strings are flat maps of strings (or arrays of them for repeated keys). */
function flatNul(value: unknown, where: string): string | null {
  if (value === null || typeof value !== 'object') return null;
  for (const [key, v] of Object.entries(value)) {
    const values: unknown[] = Array.isArray(v) ? v : [v];
    if (key.includes('\u0000') || values.some((x) => typeof x === 'string' && x.includes('\u0000')))
      return `${where}.${key}`;
  }
  return null;
}
