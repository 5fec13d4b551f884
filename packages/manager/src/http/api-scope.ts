import type { FastifyInstance, RouteOptions } from 'fastify';
import type { App } from '../routes/common.js';
import { installAuth, type AuthSettings } from './auth.js';
import { notFound } from './errors.js';

/** The public API's prefix; every route under it lives in the authenticated scope. */
export const API_PREFIX = '/api/v1';

/**
 * Register the authenticated API scope. Every `/api/v1` route is added by `routes` inside one
 * Fastify plugin scope whose hooks authenticate: a route is protected by where it is registered,
 * whatever spelling of its URL reaches the router (percent-encoding, absolute form, ...).
 * Routes that are not API routes but still need a key (metrics) may be added here too.
 *
 * Deny by default, by structure: a route under `/api` registered anywhere else is a startup
 * error, so a new route cannot be made public by forgetting where it belongs.
 */
export async function registerApiScope(
  app: App,
  settings: AuthSettings,
  routes: (scope: App) => void,
): Promise<RouteTable> {
  const scoped = new Set<RouteOptions>();
  const all: RouteOptions[] = [];
  app.addHook('onRoute', (route) => {
    all.push(route);
  });
  await app.register((scope: FastifyInstance) => {
    installAuth(scope, settings);
    scope.addHook('onRoute', (route) => {
      scoped.add(route);
    });
    routes(scope);
    // An unknown path under the prefix is answered inside the scope too: without a credential
    // it is a 401 like any other API path, so nothing tells which API routes exist.
    return scope.register(
      (prefixed: FastifyInstance) => {
        prefixed.setNotFoundHandler(notFound);
        return Promise.resolve();
      },
      { prefix: API_PREFIX },
    );
  });
  app.addHook('onReady', (done) => {
    const stray = all.filter((r) => isApiPath(r.url) && !scoped.has(r));
    done(
      stray.length > 0
        ? new Error(
            `routes under /api must be registered in the authenticated API scope: ${stray
              .map((r) => `${String(r.method)} ${r.url}`)
              .join(', ')}`,
          )
        : undefined,
    );
  });
  return () =>
    all.flatMap((r) =>
      [r.method].flat().map((method) => ({
        method: String(method),
        url: r.url,
        authenticated: scoped.has(r),
        access: r.config?.access ?? 'operator',
      })),
    );
}

export interface RouteEntry {
  method: string;
  url: string;
  /** Registered inside the authenticated scope. */
  authenticated: boolean;
  access: 'operator' | 'runner';
}

/** Every route registered after the scope was set up (for operators and tests to audit). */
export type RouteTable = () => RouteEntry[];

/** Case-insensitive, like any client may spell it; the router itself is case-sensitive. */
const isApiPath = (url: string) => /^\/+api(\/|$)/i.test(url);
