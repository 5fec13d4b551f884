import { Type } from '@sinclair/typebox';
import { Id, RunnerJob, RunnerJobCreateBody, RunnerJobList } from '@svc/contracts';
import type { Ctx } from '../domain/context.js';
import {
  createRunnerJob,
  getRunnerJob,
  listRunnerJobs,
  type RunnerJobDeps,
} from '../domain/runner-jobs/runner-jobs.js';
import { errors, RunParams, type App } from './common.js';

const JobParams = Type.Object({ runId: Id, runnerJobId: Id }, { additionalProperties: false });
const ListQuery = Type.Object({ commandId: Type.Optional(Id) }, { additionalProperties: false });

export function runnerJobRoutes(app: App, ctx: Ctx, deps: RunnerJobDeps): void {
  app.post(
    '/api/v1/runs/:runId/runner-jobs',
    {
      // transientEnv values are the job's own credentials (a lab API key): masked if they are a
      // registered secret, but not rewritten for looking like a token.
      config: { secretFields: { transientEnv: 'no-shapes' } },
      schema: {
        params: RunParams,
        body: RunnerJobCreateBody,
        response: { 200: RunnerJob, 201: RunnerJob, ...errors },
      },
    },
    async (request, reply) => {
      const { job, created } = await createRunnerJob(ctx, deps, request.params.runId, request.body);
      return reply.code(created ? 201 : 200).send(job);
    },
  );
  app.get(
    '/api/v1/runs/:runId/runner-jobs',
    {
      schema: {
        params: RunParams,
        querystring: ListQuery,
        response: { 200: RunnerJobList, ...errors },
      },
    },
    async (request) => listRunnerJobs(ctx, deps, request.params.runId, request.query.commandId),
  );
  app.get(
    '/api/v1/runs/:runId/runner-jobs/:runnerJobId',
    { schema: { params: JobParams, response: { 200: RunnerJob, ...errors } } },
    async (request) => getRunnerJob(ctx, deps, request.params.runId, request.params.runnerJobId),
  );
}
