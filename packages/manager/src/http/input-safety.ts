import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError, type Redactor } from '@svc/contracts';

const MAX_DEPTH = 64;

declare module 'fastify' {
  interface FastifyContextConfig {
    /** `replace`: U+0000 in the body is kept for the domain to replace (event data). */
    nulInBody?: 'reject' | 'replace';
  }
}

/**
 * PostgreSQL text and jsonb cannot hold U+0000 or lone UTF-16 surrogates, and a deep enough
 * document overflows any recursive walk. These checks run before validation so bad input is a
 * 400, never a 500 from the store.
 */
export function registerInputSafety(app: FastifyInstance, redactor: Redactor): void {
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = body as string;
    if (text.trim() === '') {
      done(
        new ServiceError('schema-invalid', 'request body is empty; send a JSON object'),
        undefined,
      );
      return;
    }
    try {
      const parsed: unknown = JSON.parse(text);
      // Registered secret values (API key, store password) are redacted at the door: a secret
      // pasted into a prompt or printed by a tool never reaches the domain or the store.
      done(null, redactor.redactDeep(wellFormed(parsed, 0)));
    } catch (error) {
      done(
        error instanceof ServiceError
          ? error
          : new ServiceError('schema-invalid', 'request body is not valid JSON'),
        undefined,
      );
    }
  });

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
    const where = findNul(request.params, 'params') ?? findNul(request.query, 'query');
    const inBody =
      request.routeOptions.config.nulInBody === 'replace' ? null : findNul(request.body, 'body');
    const at = where ?? inBody;
    done(
      at
        ? new ServiceError('schema-invalid', `U+0000 is not allowed in requests (at ${at})`)
        : undefined,
    );
  });
}

/** Replace lone surrogates (which PostgreSQL rejects) and bound the depth. */
function wellFormed(value: unknown, depth: number): unknown {
  if (depth > MAX_DEPTH)
    throw new ServiceError('schema-invalid', `request body nests deeper than ${MAX_DEPTH} levels`);
  if (typeof value === 'string') return value.isWellFormed() ? value : value.toWellFormed();
  if (Array.isArray(value)) return value.map((v) => wellFormed(v, depth + 1));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const key = k.isWellFormed() ? k : k.toWellFormed();
      if (key === '__proto__') continue;
      out[key] = wellFormed(v, depth + 1);
    }
    return out;
  }
  return value;
}

function findNul(value: unknown, path: string): string | null {
  if (typeof value === 'string') return value.includes('\u0000') ? path : null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const hit = findNul(value[i], `${path}[${i}]`);
      if (hit) return hit;
    }
    return null;
  }
  if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k.includes('\u0000')) return `${path}.<key>`;
      const hit = findNul(v, `${path}.${k}`);
      if (hit) return hit;
    }
  }
  return null;
}
