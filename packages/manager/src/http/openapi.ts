import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import type { App } from '../routes/common.js';

/** Paths anyone may read without a key (DESIGN, "Who may do what"). */
const PUBLIC = /^\/(health(\/.*)?|openapi\.json|docs(\/.*)?)$/;

/**
 * The OpenAPI 3.1 document, generated from the TypeBox schemas the routes validate with (one
 * source), with bearer auth on every route except the public ones. Must be registered before
 * any route.
 */
export async function registerOpenApi(app: App, info: { version: string }): Promise<void> {
  await (app as unknown as FastifyInstance).register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Agent run service: run manager API',
        version: info.version,
        description:
          'Runs, commands, events, results, runner jobs, sessions, provider profiles and the task queue. ' +
          'Every failure is `{ failureKind, message, traceId }` (see docs/failure-kinds.md).',
      },
      components: {
        securitySchemes: {
          bearer: {
            type: 'http',
            scheme: 'bearer',
            description: 'SVC_API_KEY, or a runner Job token on the runner-facing routes',
          },
        },
      },
      security: [{ bearer: [] }],
    },
    transform: ({ schema, url }) => {
      const publicRoute = PUBLIC.test(url);
      return {
        url,
        schema: {
          ...schema,
          ...(publicRoute ? { security: [] } : {}),
        },
      };
    },
  });
  await (app as unknown as FastifyInstance).register(swaggerUi, {
    routePrefix: '/docs',
    // The page and its scripts are served from the installed package: nothing from a CDN.
    staticCSP: true,
    uiConfig: { deepLinking: true },
  });
  app.get('/openapi.json', { schema: { hide: true } }, () => app.swagger());
}
