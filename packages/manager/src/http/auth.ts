import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { ServiceError } from '@svc/contracts';

export interface AuthSettings {
  apiKey: string | null;
  deploymentMode: 'local' | 'runtime';
}

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * Bearer auth on every /api/v1/ path. Tokens are compared as SHA-256 digests with
 * timingSafeEqual, so neither content nor length leaks through timing.
 */
export function registerAuth(app: FastifyInstance, settings: AuthSettings): void {
  const expected = settings.apiKey ? digest(settings.apiKey) : null;

  const check = (url: string, header: string | undefined): ServiceError | undefined => {
    if (!url.startsWith('/api/v1/') && url !== '/api/v1') return undefined;
    if (!expected) {
      // Without a key: permissive local self-test mode, unless this is a runtime deployment.
      return settings.deploymentMode === 'runtime'
        ? new ServiceError(
            'auth-missing',
            'the server has no API key configured; a runtime deployment must set SVC_API_KEY',
          )
        : undefined;
    }
    const match = typeof header === 'string' ? /^Bearer (\S+)$/i.exec(header.trim()) : null;
    if (!match?.[1])
      return new ServiceError(
        'auth-failed',
        'missing bearer token (Authorization: Bearer <API_KEY>)',
      );
    if (!timingSafeEqual(digest(match[1]), expected))
      return new ServiceError('auth-failed', 'bearer token rejected');
    return undefined;
  };

  app.addHook('onRequest', (request, _reply, done) => {
    done(check(request.url, request.headers.authorization));
  });
}
