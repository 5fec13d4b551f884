import type { FastifyInstance } from 'fastify';
import { runOperation, type OperationDeps } from '../domain/operate.js';
import { runPreflight } from '../domain/preflight.js';
import { contextOf } from '../http/lifecycle.js';

/** The two operation endpoints. HTTP only: parsing and rules live in the domain modules. */
export function codehostRoutes(app: FastifyInstance, deps: OperationDeps): void {
  app.post('/v1/codehost/cli', (request) => runOperation(deps, contextOf(request), request.body));
  app.post('/v1/codehost/pr-preflight', (request) =>
    runPreflight(deps, contextOf(request), request.body),
  );
}
