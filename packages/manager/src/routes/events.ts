import { Type } from '@sinclair/typebox';
import {
  EventAppendBody,
  EventAppendResponse,
  EventPage,
  EVENTS_PAGE_DEFAULT,
  EVENTS_PAGE_MAX,
  ResultEnvelope,
  ResultQuery,
} from '@svc/contracts';
import type { Ctx } from '../domain/context.js';
import { appendEvents, listEvents } from '../domain/events.js';
import { buildResult } from '../domain/results.js';
import { errors, RUNNER, RunParams, type App } from './common.js';

const EventsQuery = Type.Object(
  {
    afterSeq: Type.Optional(Type.Integer({ minimum: 0 })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: EVENTS_PAGE_MAX })),
  },
  { additionalProperties: false },
);

export function eventRoutes(app: App, ctx: Ctx): void {
  app.get(
    '/api/v1/runs/:runId/events',
    {
      schema: {
        params: RunParams,
        querystring: EventsQuery,
        response: { 200: EventPage, ...errors },
      },
    },
    async (request) =>
      listEvents(
        ctx,
        request.params.runId,
        request.query.afterSeq ?? 0,
        request.query.limit ?? EVENTS_PAGE_DEFAULT,
      ),
  );

  app.post(
    '/api/v1/runs/:runId/events',
    {
      schema: {
        params: RunParams,
        body: EventAppendBody,
        response: { 200: EventAppendResponse, ...errors },
      },
      // Agent output may hold U+0000; the domain replaces it and flags the event.
      config: { ...RUNNER, nulInBody: 'replace' },
    },
    async (request) => appendEvents(ctx, request.params.runId, request.body),
  );

  app.get(
    '/api/v1/runs/:runId/result',
    {
      schema: {
        params: RunParams,
        querystring: ResultQuery,
        response: { 200: ResultEnvelope, ...errors },
      },
    },
    async (request) =>
      buildResult(ctx, request.params.runId, {
        ...(request.query.commandId ? { commandId: request.query.commandId } : {}),
        ...(request.query.afterSeq !== undefined ? { afterSeq: request.query.afterSeq } : {}),
      }),
  );
}
