import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError } from '@svc/contracts';

/**
 * The methods each registered path takes, to answer a known path asked with another method
 * 405 Method Not Allowed with an `Allow` header (RFC 9110), and only an unknown path 404.
 * Patterns are Fastify's (`:param` one segment, `*` the rest); filled by an onRoute hook
 * registered before any route.
 */
export class RouteMethods {
  readonly #routes = new Map<string, { pattern: RegExp; methods: Set<string> }>();

  register(app: FastifyInstance): void {
    app.addHook('onRoute', (route) => {
      const entry = this.#routes.get(route.url) ?? {
        pattern: patternOf(route.url),
        methods: new Set<string>(),
      };
      for (const method of [route.method].flat()) entry.methods.add(String(method));
      this.#routes.set(route.url, entry);
    });
  }

  /** Every method some route takes on `path` (empty: no route has this path). */
  allowed(path: string): string[] {
    const methods = new Set<string>();
    for (const { pattern, methods: m } of this.#routes.values())
      if (pattern.test(path)) for (const method of m) methods.add(method);
    return [...methods].sort();
  }
}

function patternOf(url: string): RegExp {
  const source = url
    .split('/')
    .map((segment) =>
      segment === '*'
        ? '.*'
        : segment.startsWith(':')
          ? '[^/]+'
          : segment.replace(/[.+?^${}()|[\]\\*]/g, '\\$&'),
    )
    .join('/');
  return new RegExp(`^${source}$`);
}

/** The failure for a request no route took: 405 with Allow when the path exists, else 404. */
export function unrouted(methods: RouteMethods, request: FastifyRequest, reply: FastifyReply) {
  const path = request.url.split('?')[0] ?? '/';
  const allowed = methods.allowed(path);
  if (allowed.length > 0) {
    reply.header('allow', allowed.join(', '));
    return new ServiceError(
      'method-not-allowed',
      `${request.method} is not allowed on ${path}; it takes ${allowed.join(', ')}`,
      { allow: allowed },
    );
  }
  return new ServiceError('not-found', `no route ${request.method} ${path}`);
}
