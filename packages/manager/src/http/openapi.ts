import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { FAILURE_KINDS } from '@svc/contracts';
import type { App } from '../routes/common.js';
import { OPERATIONS, TAGS, type OperationInfo } from './operations.js';

/** Paths anyone may read without a key (DESIGN, "Who may do what"). */
const PUBLIC = /^\/(health(\/.*)?|openapi\.json|docs(\/.*)?)$/;

/**
 * The OpenAPI 3.1 document, generated from the TypeBox schemas the routes validate with (one
 * source), with bearer auth on every route except the public ones, and each operation named,
 * summarized, tagged and given its error statuses from one table (operations.ts). Must be
 * registered before any route.
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
        license: { name: 'UNLICENSED', identifier: 'LicenseRef-UNLICENSED' },
      },
      servers: [
        { url: 'http://127.0.0.1:8080', description: 'a manager started with npm start' },
        {
          url: 'http://svc-run-manager.svc-v01.svc:8080',
          description: 'inside a cluster installed from deploy/',
        },
      ],
      tags: [...TAGS],
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
    transformObject: (document) =>
      'openapiObject' in document
        ? nameOperations(document.openapiObject as OpenApiDocument)
        : document.swaggerObject,
  });
  await (app as unknown as FastifyInstance).register(swaggerUi, {
    routePrefix: '/docs',
    // The page and its scripts are served from the installed package: nothing from a CDN.
    staticCSP: true,
    uiConfig: { deepLinking: true },
  });
  app.get('/openapi.json', { schema: { hide: true } }, () => app.swagger());
}

interface OpenApiOperation {
  operationId?: string;
  summary?: string;
  tags?: string[];
  requestBody?: { content?: Record<string, { schema?: { required?: string[] } }> };
  responses?: Record<string, { description?: string; content?: unknown }>;
}
type OpenApiDocument = Record<string, unknown> & {
  paths?: Record<string, Record<string, OpenApiOperation>>;
};

/** `/runs/{runId}` (OpenAPI) is `/runs/:runId` (the route table's key). */
const routeUrl = (path: string) => path.replace(/\{(\w+)\}/g, ':$1');

/** HTTP status -> the failure kinds answered with it. */
const KINDS_BY_STATUS = new Map<number, string[]>();
for (const [kind, { httpStatus }] of Object.entries(FAILURE_KINDS))
  if (httpStatus !== null)
    KINDS_BY_STATUS.set(httpStatus, [...(KINDS_BY_STATUS.get(httpStatus) ?? []), kind]);

/**
 * The error statuses of one API operation: what every API route may answer (400 invalid input,
 * 401 no or wrong key, 500 fault, 503 no key configured in runtime mode), 404 for a path naming a
 * resource, 413 and 415 for one with a body, and the operation's own.
 */
export function errorStatuses(path: string, hasBody: boolean, info: OperationInfo): number[] {
  if (!path.startsWith('/api/')) return [...(info.errors ?? [])];
  const statuses = new Set([400, 401, 500, 503, ...(info.errors ?? [])]);
  if (path.includes('{')) statuses.add(404);
  if (hasBody) {
    statuses.add(413);
    statuses.add(415);
  }
  return [...statuses].sort((a, b) => a - b);
}

function nameOperations(doc: OpenApiDocument): OpenApiDocument {
  for (const [path, operations] of Object.entries(doc.paths ?? {})) {
    for (const [method, operation] of Object.entries(operations)) {
      const info = OPERATIONS[`${method.toUpperCase()} ${routeUrl(path)}`];
      if (!info) continue; // openapi-operations.test.ts names every route
      operation.operationId = info.operationId;
      operation.summary = info.summary;
      operation.tags = [info.tag];
      const body = operation.requestBody?.content?.['application/json']?.schema;
      if (body && info.requires)
        body.required = [...new Set([...(body.required ?? []), ...info.requires])];
      const responses = operation.responses ?? {};
      // The ranges the routes declare for serialization become the statuses they answer.
      const failure = responses['4XX'] ?? responses['5XX'];
      delete responses['4XX'];
      delete responses['5XX'];
      for (const status of errorStatuses(path, body !== undefined, info)) {
        const existing = responses[String(status)];
        const kinds = KINDS_BY_STATUS.get(status) ?? [];
        responses[String(status)] = {
          ...existing,
          description:
            existing?.description ??
            (kinds.length > 0 ? `failureKind ${kinds.join(', ')}` : 'failure'),
          ...(existing?.content ? {} : failure?.content ? { content: failure.content } : {}),
        };
      }
      operation.responses = responses;
    }
  }
  return doc;
}
