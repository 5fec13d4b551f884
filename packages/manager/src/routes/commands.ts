import {
  CancelBody,
  Command,
  CommandCreateBody,
  CommandResultQuery,
  ResultEnvelope,
} from '@svc/contracts';
import { cancelCommand, createCommand, getCommand } from '../domain/runs/commands.js';
import type { Ctx } from '../domain/context.js';
import { waitForResult } from '../domain/runs/waits.js';
import { runWakeKey } from '../store/wakeups.js';
import {
  clientGone,
  CommandParams,
  errors,
  RunCommandParams,
  RunParams,
  type App,
} from './common.js';

export function commandRoutes(app: App, ctx: Ctx): void {
  app.post(
    '/api/v1/runs/:runId/commands',
    {
      schema: {
        params: RunParams,
        body: CommandCreateBody,
        response: { 200: Command, 201: Command, ...errors },
      },
    },
    async (request, reply) => {
      const { command, created } = await createCommand(ctx, request.params.runId, request.body);
      // Committed: this process's long-polls of the run (its runner's) wake now, not when the
      // NOTIFY sent by the creating transaction comes back (other replicas still get it).
      if (created) ctx.wakeups.committed(runWakeKey(command.runId));
      // 200 tells an idempotent retry apart from a first creation.
      return reply.code(created ? 201 : 200).send(command);
    },
  );

  app.get(
    '/api/v1/runs/:runId/commands/:commandId',
    { schema: { params: RunCommandParams, response: { 200: Command, ...errors } } },
    async (request) => getCommand(ctx, request.params.runId, request.params.commandId),
  );

  app.get(
    '/api/v1/runs/:runId/commands/:commandId/result',
    {
      schema: {
        params: RunCommandParams,
        querystring: CommandResultQuery,
        response: { 200: ResultEnvelope, ...errors },
      },
    },
    async (request) =>
      waitForResult(
        ctx,
        request.params.runId,
        { commandId: request.params.commandId, waitMs: request.query.waitMs ?? 0 },
        clientGone(request),
      ),
  );

  app.post(
    '/api/v1/commands/:commandId/cancel',
    { schema: { params: CommandParams, body: CancelBody, response: { 200: Command, ...errors } } },
    async (request) => cancelCommand(ctx, request.params.commandId, request.body.reason),
  );
}
