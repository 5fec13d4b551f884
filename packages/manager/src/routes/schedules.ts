import { Type } from '@sinclair/typebox';
import { Id, Schedule, ScheduleCreateBody, ScheduleListQuery, SchedulePage } from '@svc/contracts';
import type { Ctx } from '../domain/context.js';
import {
  createSchedule,
  deleteSchedule,
  getSchedule,
  listSchedules,
} from '../domain/schedules/store.js';
import { errors, type App } from './common.js';

const BASE = '/api/v1/queue/schedules';
const ScheduleParams = Type.Object({ scheduleId: Id }, { additionalProperties: false });

/** Recurring schedules (cron): each tick submits its task template to the queue. */
export function scheduleRoutes(app: App, ctx: Ctx): void {
  app.post(
    BASE,
    { schema: { body: ScheduleCreateBody, response: { 201: Schedule, ...errors } } },
    async (request, reply) => reply.code(201).send(await createSchedule(ctx, request.body)),
  );
  app.get(
    BASE,
    { schema: { querystring: ScheduleListQuery, response: { 200: SchedulePage, ...errors } } },
    async (request) => listSchedules(ctx.db, request.query),
  );
  app.get(
    `${BASE}/:scheduleId`,
    { schema: { params: ScheduleParams, response: { 200: Schedule, ...errors } } },
    async (request) => getSchedule(ctx.db, request.params.scheduleId),
  );
  app.delete(
    `${BASE}/:scheduleId`,
    { schema: { params: ScheduleParams, response: { 200: Schedule, ...errors } } },
    async (request) => deleteSchedule(ctx, request.params.scheduleId),
  );
}
