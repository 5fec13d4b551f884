import { readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import type { FastifyReply } from 'fastify';
// Its FastifySchema augmentation: `hide` keeps these pages out of the API reference.
import type {} from '@fastify/swagger';
import { consoleDir } from '@svc/console';
import type { App } from '../routes/common.js';

/** Paths the console's client-side router owns: each answers index.html. */
export const CONSOLE_ROUTES = [
  '/',
  '/index.html',
  '/runs',
  '/runs/:runId',
  '/sessions',
  '/sessions/:sessionId',
  '/queue',
  '/profiles',
] as const;

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
};

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

interface Asset {
  body: Buffer;
  type: string;
}

/** Read the built console once; the files are small and immutable for the process's life. */
function loadConsole(dir: string): { index: Buffer | null; assets: Map<string, Asset> } {
  const assets = new Map<string, Asset>();
  let index: Buffer | null = null;
  try {
    index = readFileSync(join(dir, 'index.html'));
    for (const name of readdirSync(join(dir, 'assets'))) {
      const type = TYPES[extname(name)];
      if (type) assets.set(name, { body: readFileSync(join(dir, 'assets', name)), type });
    }
  } catch {
    index = null;
  }
  return { index, assets };
}

const NOT_BUILT =
  '<!doctype html><title>Console not built</title><p>The web console has not been built. ' +
  'Run <code>npm run build</code> and restart the manager; the API works without it.</p>';

/**
 * The web console at `/`: public static files holding no data (every datum comes from the
 * authenticated API). Only files found at start are served, by exact name, so no request path
 * reaches the file system.
 */
export function registerConsole(app: App, dir: string = consoleDir): void {
  const { index, assets } = loadConsole(dir);
  const page = (_request: unknown, reply: FastifyReply) => {
    void reply.headers(SECURITY_HEADERS).header('cache-control', 'no-cache');
    if (!index) return reply.code(503).type('text/html; charset=utf-8').send(NOT_BUILT);
    return reply.type('text/html; charset=utf-8').send(index);
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
      return reply
        .headers(SECURITY_HEADERS)
        .header('cache-control', 'public, max-age=31536000, immutable')
        .type(asset.type)
        .send(asset.body);
    },
  );
}
