import { Type } from '@sinclair/typebox';
import {
  ControlBody,
  EventPage,
  Id,
  ReadBody,
  SendBody,
  SendResponse,
  Session,
  SessionCreateBody,
  SessionEventsQuery,
  SessionListQuery,
  SessionPage,
  StorageRefreshBody,
  StorageResponse,
} from '@svc/contracts';
import type { Ctx } from '../domain/context.js';
import { sendToSession, type SendDeps } from '../domain/sessions/send.js';
import { sessionEvents } from '../domain/sessions/trace.js';
import {
  controlSession,
  createSession,
  evictStorage,
  getSession,
  getStorage,
  listSessions,
  markRead,
  refreshStorage,
  type SessionDeps,
} from '../domain/sessions/sessions.js';
import { errors, leaseTokenOf, RUNNER, type App } from './common.js';

const SessionParams = Type.Object({ sessionId: Id }, { additionalProperties: false });
const ReaderQuery = Type.Object(
  {
    readerId: Type.Optional(
      Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._:@-]+$' }),
    ),
  },
  { additionalProperties: false },
);
const ControlResponse = Type.Object({
  sessionId: Type.String(),
  action: Type.String(),
  cancelled: Type.Object({
    commandId: Type.Union([Type.String(), Type.Null()]),
    runId: Type.Union([Type.String(), Type.Null()]),
  }),
  session: Session,
});

export function sessionRoutes(app: App, ctx: Ctx, deps: SessionDeps & SendDeps): void {
  app.post(
    '/api/v1/sessions',
    { schema: { body: SessionCreateBody, response: { 200: Session, 201: Session, ...errors } } },
    async (request, reply) => {
      const { session, created } = await createSession(ctx, deps, request.body);
      return reply.code(created ? 201 : 200).send(session);
    },
  );
  app.get(
    '/api/v1/sessions',
    { schema: { querystring: SessionListQuery, response: { 200: SessionPage, ...errors } } },
    async (request) => listSessions(ctx, request.query),
  );
  app.get(
    '/api/v1/sessions/:sessionId',
    {
      schema: {
        params: SessionParams,
        querystring: ReaderQuery,
        response: { 200: Session, ...errors },
      },
    },
    async (request) => getSession(ctx, request.params.sessionId, request.query.readerId),
  );
  app.get(
    '/api/v1/sessions/:sessionId/trace',
    {
      schema: {
        params: SessionParams,
        querystring: SessionEventsQuery,
        response: { 200: EventPage, ...errors },
      },
    },
    async (request) => sessionEvents(ctx, request.params.sessionId, request.query, 'trace'),
  );
  app.get(
    '/api/v1/sessions/:sessionId/output',
    {
      schema: {
        params: SessionParams,
        querystring: SessionEventsQuery,
        response: { 200: EventPage, ...errors },
      },
    },
    async (request) => sessionEvents(ctx, request.params.sessionId, request.query, 'output'),
  );
  app.post(
    '/api/v1/sessions/:sessionId/read',
    { schema: { params: SessionParams, body: ReadBody, response: { 200: Session, ...errors } } },
    async (request) => markRead(ctx, request.params.sessionId, request.body.readerId),
  );
  app.post(
    '/api/v1/sessions/:sessionId/control',
    {
      schema: {
        params: SessionParams,
        body: ControlBody,
        response: { 200: ControlResponse, ...errors },
      },
    },
    async (request) => controlSession(ctx, request.params.sessionId, request.body),
  );
  app.post(
    '/api/v1/sessions/:sessionId/send',
    {
      config: { secretFields: { 'runnerJob.transientEnv': 'no-shapes' } },
      schema: {
        params: SessionParams,
        body: SendBody,
        response: { 200: SendResponse, 201: SendResponse, ...errors },
      },
    },
    async (request, reply) => {
      const result = await sendToSession(ctx, deps, request.params.sessionId, request.body);
      return reply.code(result.mutation ? 201 : 200).send(result);
    },
  );
  app.get(
    '/api/v1/sessions/:sessionId/storage',
    { schema: { params: SessionParams, response: { 200: StorageResponse, ...errors } } },
    async (request) => getStorage(ctx, deps, request.params.sessionId),
  );
  app.delete(
    '/api/v1/sessions/:sessionId/storage',
    { schema: { params: SessionParams, response: { 200: StorageResponse, ...errors } } },
    async (request) => evictStorage(ctx, deps, request.params.sessionId, 'deleted through the API'),
  );
  app.post(
    '/api/v1/sessions/:sessionId/storage/refresh',
    {
      // The runner of the session's current run reports what the volume holds after a turn.
      config: RUNNER,
      schema: {
        params: SessionParams,
        body: StorageRefreshBody,
        response: { 200: StorageResponse, ...errors },
      },
    },
    async (request) =>
      refreshStorage(ctx, request.params.sessionId, request.body, leaseTokenOf(request)),
  );
}
