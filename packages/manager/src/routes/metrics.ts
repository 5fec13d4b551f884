import { Type } from '@sinclair/typebox';
import { ROUTINE } from '../http/request-log.js';
import { registry } from '../metrics/registry.js';
import type { StoreGauges } from '../metrics/store-gauges.js';
import { errors, type App } from './common.js';

/** Prometheus text exposition; protected by the API key like /api/v1 (see http/auth.ts). */
export function metricsRoutes(app: App, gauges: StoreGauges): void {
  app.get(
    '/metrics',
    {
      config: ROUTINE,
      schema: {
        summary: 'Prometheus metrics (text exposition format)',
        response: {
          200: {
            description: 'metrics in the Prometheus text format',
            content: { 'text/plain': { schema: Type.String() } },
          },
          ...errors,
        },
      },
    },
    async (_request, reply) => {
      await gauges.beforeScrape();
      const text = await registry.metrics();
      return reply.header('content-type', registry.contentType).send(text);
    },
  );
}
