import { Type } from '@sinclair/typebox';
import {
  EventAppendBody,
  EventAppendResponse,
  EventPage,
  EVENTS_PAGE_DEFAULT,
  EVENTS_PAGE_MAX,
  ResultEnvelope,
  ResultQuery,
  SeqPosition,
  WaitMs,
} from '@svc/contracts';
import type { Ctx } from '../domain/context.js';
import { appendEvents } from '../domain/runs/events.js';
import { waitForEvents, waitForResult } from '../domain/runs/waits.js';
import { clientGone, errors, leaseTokenOf, RUNNER, RunParams, type App } from './common.js';

const EventsQuery = Type.Object(
  {
    afterSeq: Type.Optional(SeqPosition),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: EVENTS_PAGE_MAX })),
    /** Wait for the first event after afterSeq (answers at once when one exists). */
    waitMs: Type.Optional(WaitMs),
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
      waitForEvents(
        ctx,
        request.params.runId,
        {
          afterSeq: request.query.afterSeq ?? 0,
          limit: request.query.limit ?? EVENTS_PAGE_DEFAULT,
          waitMs: request.query.waitMs ?? 0,
        },
        clientGone(request),
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
    async (request) => appendEvents(ctx, request.params.runId, request.body, leaseTokenOf(request)),
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
      waitForResult(
        ctx,
        request.params.runId,
        {
          ...(request.query.commandId ? { commandId: request.query.commandId } : {}),
          ...(request.query.afterSeq !== undefined ? { afterSeq: request.query.afterSeq } : {}),
          waitMs: request.query.waitMs ?? 0,
        },
        clientGone(request),
      ),
  );
}
