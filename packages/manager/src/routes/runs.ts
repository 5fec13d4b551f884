import { CancelBody, Run, RunCreateBody, RunListQuery, RunPage } from '@svc/contracts';
import type { Ctx } from '../domain/context.js';
import { listRuns } from '../domain/runs/run-listing.js';
import { cancelRun, createRun, getRun } from '../domain/runs/runs.js';
import { errors, RUNNER, RunParams, type App } from './common.js';

export function runRoutes(app: App, ctx: Ctx): void {
  app.post(
    '/api/v1/runs',
    { schema: { body: RunCreateBody, response: { 201: Run, ...errors } } },
    async (request, reply) => {
      return reply.code(201).send(await createRun(ctx, request.body));
    },
  );

  app.get(
    '/api/v1/runs',
    { schema: { querystring: RunListQuery, response: { 200: RunPage, ...errors } } },
    async (request) => listRuns(ctx, request.query),
  );

  app.get(
    '/api/v1/runs/:runId',
    // A runner may read its own run.
    { config: RUNNER, schema: { params: RunParams, response: { 200: Run, ...errors } } },
    async (request) => getRun(ctx, request.params.runId),
  );

  app.post(
    '/api/v1/runs/:runId/cancel',
    { schema: { params: RunParams, body: CancelBody, response: { 200: Run, ...errors } } },
    async (request) => cancelRun(ctx, request.params.runId, request.body.reason),
  );
}
