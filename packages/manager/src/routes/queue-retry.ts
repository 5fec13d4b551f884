import { Type } from '@sinclair/typebox';
import {
  Id,
  QueuePlan,
  Task,
  TaskRetryBody,
  TaskRetryBulkBody,
  TaskRetryBulkResponse,
} from '@svc/contracts';
import type { Ctx } from '../domain/context.js';
import { retryTask, retryTasks } from '../domain/queue/retry-task.js';
import { errors, type App } from './common.js';

const BASE = '/api/v1/queue';
const TaskParams = Type.Object({ taskId: Id }, { additionalProperties: false });

/** A retry's body is optional: no body means `{}` (a plain retry with the defaults). */
const optionalBody = {
  preValidation: (request: { body: unknown }, _reply: unknown, done: () => void) => {
    request.body ??= {};
    done();
  },
};

/** Who asked: the name the caller gave, else its kind (`operator`: the API key). */
const byOf = (request: { caller?: { kind: string } }, given: string | undefined) =>
  given ?? request.caller?.kind ?? 'operator';

/** Retry of failed work (domain/queue/retry-task.ts). Routes do HTTP only. */
export function queueRetryRoutes(app: App, ctx: Ctx): void {
  app.post(
    `${BASE}/tasks/:taskId/retry`,
    {
      ...optionalBody,
      schema: {
        params: TaskParams,
        body: TaskRetryBody,
        response: { 200: Type.Union([Task, QueuePlan]), ...errors },
      },
    },
    async (request) => {
      const by = byOf(request, request.body.by);
      const outcome = await retryTask(ctx, request.params.taskId, request.body, by);
      return outcome.kind === 'plan' ? outcome.plan : outcome.task;
    },
  );
  app.post(
    `${BASE}/tasks/retry`,
    {
      ...optionalBody,
      schema: { body: TaskRetryBulkBody, response: { 200: TaskRetryBulkResponse, ...errors } },
    },
    async (request) => retryTasks(ctx, request.body, byOf(request, request.body.by)),
  );
}
