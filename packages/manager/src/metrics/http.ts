import type { FastifyInstance } from 'fastify';
import { httpDuration } from './registry.js';

/**
 * Request durations by route pattern (never the raw URL: run ids would make one series per run).
 * Unmatched URLs share one label so scanners cannot grow the series set.
 */
export function registerHttpMetrics(app: FastifyInstance): void {
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    httpDuration.observe(
      { method: request.method, route, status_code: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
  });
}
