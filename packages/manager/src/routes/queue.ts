import { Type } from '@sinclair/typebox';
import {
  Commander,
  CommanderQuery,
  DispatchBody,
  DispatchResponse,
  Id,
  QueueFilterQuery,
  QueuePlan,
  QueueStats,
  ReadCursor,
  RefreshBody,
  Task,
  TaskCancelBody,
  TaskListQuery,
  TaskPage,
  TaskReadBody,
  TaskSubmitBody,
} from '@svc/contracts';
import type { Ctx } from '../domain/context.js';
import { cancelTask, readTask } from '../domain/queue/cancel-read.js';
import { dispatchTask } from '../domain/queue/dispatch.js';
import type { QueueDeps } from '../domain/queue/launch.js';
import { commander, queueStats } from '../domain/queue/overview.js';
import { refreshTask } from '../domain/queue/refresh.js';
import { submitTask } from '../domain/queue/submit.js';
import { getTask, listTasks } from '../domain/queue/views.js';
import { queueRetryRoutes } from './queue-retry.js';
import { errors, type App } from './common.js';

const BASE = '/api/v1/queue';
const TaskParams = Type.Object({ taskId: Id }, { additionalProperties: false });
/** Cancel, dispatch and refresh bodies are optional (spec/3): no body means `{}`. */
const optionalBody = {
  preValidation: (request: { body: unknown }, _reply: unknown, done: () => void) => {
    request.body ??= {};
    done();
  },
};
/** A dry run of any mutation answers its plan (200) instead of the record. */
const orPlan = <T extends Parameters<typeof Type.Union>[0][number]>(schema: T) =>
  Type.Union([schema, QueuePlan]);

/** The task queue (spec/3). Routes do HTTP only; rules live in domain/queue. */
export function queueRoutes(app: App, ctx: Ctx, deps: QueueDeps): void {
  app.post(
    `${BASE}/tasks`,
    { schema: { body: TaskSubmitBody, response: { 200: orPlan(Task), 201: Task, ...errors } } },
    async (request, reply) => {
      const outcome = await submitTask(ctx, request.body);
      if (outcome.kind === 'plan') return reply.code(200).send(outcome.plan);
      return reply.code(outcome.created ? 201 : 200).send(outcome.task);
    },
  );
  app.get(
    `${BASE}/tasks`,
    { schema: { querystring: TaskListQuery, response: { 200: TaskPage, ...errors } } },
    async (request) => listTasks(ctx, request.query),
  );
  app.get(
    `${BASE}/tasks/:taskId`,
    { schema: { params: TaskParams, response: { 200: Task, ...errors } } },
    async (request) => getTask(ctx, request.params.taskId),
  );
  app.post(
    `${BASE}/tasks/:taskId/cancel`,
    {
      ...optionalBody,
      schema: {
        params: TaskParams,
        body: TaskCancelBody,
        response: { 200: orPlan(Task), ...errors },
      },
    },
    async (request) => {
      const outcome = await cancelTask(ctx, request.params.taskId, request.body);
      return outcome.kind === 'plan' ? outcome.plan : outcome.task;
    },
  );
  app.post(
    `${BASE}/tasks/:taskId/read`,
    {
      schema: {
        params: TaskParams,
        body: TaskReadBody,
        response: { 200: orPlan(ReadCursor), ...errors },
      },
    },
    async (request) => {
      const outcome = await readTask(ctx, request.params.taskId, request.body);
      return outcome.kind === 'plan' ? outcome.plan : outcome.cursor;
    },
  );
  app.post(
    `${BASE}/tasks/:taskId/dispatch`,
    {
      ...optionalBody,
      // The job's transient environment is checked (token-shaped values refused), not scrubbed.
      config: { secretFields: { 'runnerJob.transientEnv': 'no-shapes' } },
      schema: {
        params: TaskParams,
        body: DispatchBody,
        response: { 200: orPlan(DispatchResponse), 201: DispatchResponse, ...errors },
      },
    },
    async (request, reply) => {
      const outcome = await dispatchTask(ctx, deps, request.params.taskId, request.body);
      if (outcome.kind === 'plan') return reply.code(200).send(outcome.plan);
      return reply.code(outcome.response.created ? 201 : 200).send(outcome.response);
    },
  );
  app.post(
    `${BASE}/tasks/:taskId/refresh`,
    {
      ...optionalBody,
      schema: {
        params: TaskParams,
        body: RefreshBody,
        response: { 200: orPlan(Task), ...errors },
      },
    },
    async (request) => {
      const outcome = await refreshTask(ctx, request.params.taskId, request.body.dryRun ?? false);
      return outcome.kind === 'plan' ? outcome.plan : outcome.task;
    },
  );
  app.get(
    `${BASE}/stats`,
    { schema: { querystring: QueueFilterQuery, response: { 200: QueueStats, ...errors } } },
    async (request) => queueStats(ctx, request.query.queue),
  );
  app.get(
    `${BASE}/commander`,
    { schema: { querystring: CommanderQuery, response: { 200: Commander, ...errors } } },
    async (request) => commander(ctx, request.query),
  );
  queueRetryRoutes(app, ctx);
}
