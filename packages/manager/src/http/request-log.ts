import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * `routine`: calls that come every few seconds from every runner or probe (lease renewals,
     * command polls, health probes, metric scrapes). Their request lines are debug, so the info
     * log shows what changed rather than who is still alive.
     */
    requestLog?: 'routine';
  }
}

/** Route config of a routine call (see `requestLog`). */
export const ROUTINE = { requestLog: 'routine' } as const;

/**
 * The request lines, in place of Fastify's own (which are always info): the same two lines,
 * `incoming request` and `request completed`, at debug for routine routes and info otherwise.
 * Registered on the root before any route, so every route and the not-found handler have it.
 */
export function registerRequestLogging(app: FastifyInstance): void {
  app.addHook('onRequest', (request, _reply, done) => {
    log(request, { req: request }, 'incoming request');
    done();
  });
  app.addHook('onResponse', (request, reply: FastifyReply, done) => {
    log(request, { res: reply, responseTime: reply.elapsedTime }, 'request completed');
    done();
  });
}

function log(request: FastifyRequest, fields: Record<string, unknown>, message: string): void {
  if (request.routeOptions.config.requestLog === 'routine') request.log.debug(fields, message);
  else request.log.info(fields, message);
}
