import type { FastifyReply, FastifyRequest } from 'fastify';
// Its FastifySchema augmentation: `hide` keeps these pages out of the API reference.
import type {} from '@fastify/swagger';
import { consoleDir } from '@svc/console';
import type { App } from '../routes/common.js';
import { loadConsoleSite, negotiate, type ConsoleFile, type ConsoleSite } from './console-files.js';

/** Paths the console's client-side router owns: each answers index.html. */
export const CONSOLE_ROUTES = [
  '/',
  '/index.html',
  '/runs',
  '/runs/:runId',
  '/sessions',
  '/sessions/:sessionId',
  '/queue',
  '/tasks/:taskId',
  '/profiles',
] as const;

/**
 * Paths that are not the console's: an unknown path under them keeps the JSON failure of the
 * API (or its plain answer), never the console's page.
 */
const NOT_CONSOLE = ['/api', '/health', '/metrics', '/docs', '/openapi.json', '/assets'];

/**
 * The page may talk to this origin only: a reply or event that smuggles markup cannot load
 * anything from elsewhere or post anywhere, on top of the sanitizing the console does.
 */
const SECURITY_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; " +
    "frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

const NOT_BUILT =
  '<!doctype html><title>Console not built</title><p>The web console has not been built. ' +
  'Run <code>npm run build</code> and restart the manager; the API works without it.</p>';

/** Send a console file in the best encoding the client accepts; caches see it varies by that. */
function sendFile(request: FastifyRequest, reply: FastifyReply, file: ConsoleFile) {
  void reply.headers(SECURITY_HEADERS).type(file.type);
  if (file.compressible) void reply.header('vary', 'accept-encoding');
  const encoding = negotiate(request.headers['accept-encoding'], file);
  if (!encoding) return reply.send(file.body);
  return reply.header('content-encoding', encoding).send(file.variant(encoding));
}

export interface ConsolePages {
  /** The console's own not-found page for a path it could own; undefined for any other path. */
  notFound(request: FastifyRequest, reply: FastifyReply): FastifyReply | undefined;
}

/** Read the built console (once, at start) for `registerConsole` and the not-found handler. */
export function consoleSite(dir: string = consoleDir): ConsoleSite {
  return loadConsoleSite(dir);
}

/**
 * The web console at `/`: public static files holding no data (every datum comes from the
 * authenticated API). Only files found at start are served, by exact name, so no request path
 * reaches the file system.
 */
export function registerConsole(app: App, site: ConsoleSite): void {
  const { index, assets } = site;
  const page = (request: FastifyRequest, reply: FastifyReply) => {
    void reply.header('cache-control', 'no-cache');
    if (!index)
      return reply
        .code(503)
        .headers(SECURITY_HEADERS)
        .type('text/html; charset=utf-8')
        .send(NOT_BUILT);
    return sendFile(request, reply, index);
  };
  for (const path of CONSOLE_ROUTES) app.get(path, { schema: { hide: true } }, page);

  app.get<{ Params: { file: string } }>(
    '/assets/:file',
    { schema: { hide: true } },
    (request, reply) => {
      const asset = assets.get(request.params.file);
      if (!asset)
        return reply
          .code(404)
          .headers(SECURITY_HEADERS)
          .type('text/plain; charset=utf-8')
          .send('no such console asset');
      // Asset names carry a content hash: a changed file is a new name.
      void reply.header('cache-control', 'public, max-age=31536000, immutable');
      return sendFile(request, reply, asset);
    },
  );
}

/**
 * The path as a router could read it: without a scheme and authority, percent-decoded (to a
 * fixed point), lower-case, slashes collapsed, dot segments resolved; so no spelling of an API
 * path (`/API/v1`, `/%61pi`, `//api`, `/x/../api`, `http://host/api`) reads as a console path.
 */
function normalPath(url: string): string {
  let path = (url.replace(/^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i, '').split(/[?#;]/)[0] ?? '') || '/';
  for (let i = 0; i < 4 && path.includes('%'); i++) {
    try {
      const decoded = decodeURIComponent(path);
      if (decoded === path) break;
      path = decoded;
    } catch {
      break; // a malformed escape: judged as written
    }
  }
  const segments: string[] = [];
  for (const segment of path.toLowerCase().split(/[/\\]+/)) {
    if (segment === '..') segments.pop();
    else if (segment && segment !== '.') segments.push(segment);
  }
  return `/${segments.join('/')}`;
}

/** A client that says it wants JSON and not HTML (a script) keeps the JSON not-found. */
function asksForJsonOnly(accept: string | undefined): boolean {
  if (!accept) return false;
  return /application\/(json|problem\+json)/.test(accept) && !/text\/html/.test(accept);
}

/**
 * An unknown path outside the API's, health's, metrics', docs' and the assets' paths is a
 * console address (mistyped, stale, or a page this build lacks): GET or HEAD answers 404 with
 * the console itself, which shows its own not-found page with a way back. A client asking for
 * JSON only, and every other method, keeps the JSON `not-found`.
 */
export function consolePages(site: ConsoleSite): ConsolePages {
  return {
    notFound(request, reply) {
      if (request.method !== 'GET' && request.method !== 'HEAD') return undefined;
      if (asksForJsonOnly(request.headers.accept)) return undefined;
      const path = normalPath(request.url);
      if (NOT_CONSOLE.some((prefix) => path === prefix || path.startsWith(`${prefix}/`)))
        return undefined;
      void reply.code(404).header('cache-control', 'no-cache');
      if (!site.index)
        return reply.headers(SECURITY_HEADERS).type('text/html; charset=utf-8').send(NOT_BUILT);
      return sendFile(request, reply, site.index);
    },
  };
}
