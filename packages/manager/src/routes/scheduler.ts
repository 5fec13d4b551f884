import { Type } from '@sinclair/typebox';
import {
  Id,
  JudgeRunList,
  QueueLimitsBody,
  QueueName,
  QueueSettings,
  QueueSettingsBody,
  SchedulerLimits,
  SchedulerView,
} from '@svc/contracts';
import type { Ctx } from '../domain/context.js';
import { toJudgeRun } from '../domain/queue/records.js';
import { listJudgeRuns } from '../domain/queue/store.js';
import { getTaskRow } from '../domain/queue/views.js';
import { setLimits, setQueueSettings } from '../domain/scheduler/controls.js';
import { schedulerView, type LoopState } from '../domain/scheduler/view.js';
import { QUEUE_WAKE_KEY } from '../store/wakeups.js';
import { errors, type App } from './common.js';

const BASE = '/api/v1/queue';

/** The scheduler's read, per-queue capacity settings, and a task's judge runs. */
export function schedulerRoutes(app: App, ctx: Ctx, deps: { loopState: () => LoopState }): void {
  app.get(
    `${BASE}/scheduler`,
    { schema: { response: { 200: SchedulerView, ...errors } } },
    async () => schedulerView(ctx.db, ctx.config.scheduler, deps.loopState()),
  );
  app.put(
    `${BASE}/queues/:queue/settings`,
    {
      schema: {
        params: Type.Object({ queue: QueueName }, { additionalProperties: false }),
        body: QueueSettingsBody,
        response: { 200: QueueSettings, ...errors },
      },
    },
    async (request) => {
      const settings = await setQueueSettings(ctx.db, request.params.queue, request.body);
      // A raised limit or a resumed queue may let waiting tasks start now.
      await ctx.wakeups.publish(QUEUE_WAKE_KEY);
      return settings;
    },
  );
  app.put(
    `${BASE}/limits`,
    { schema: { body: QueueLimitsBody, response: { 200: SchedulerLimits, ...errors } } },
    async (request) => {
      const limits = await setLimits(ctx.db, ctx.config.scheduler, request.body);
      await ctx.wakeups.publish(QUEUE_WAKE_KEY);
      return limits;
    },
  );
  app.get(
    `${BASE}/tasks/:taskId/judge-runs`,
    {
      schema: {
        params: Type.Object({ taskId: Id }, { additionalProperties: false }),
        response: { 200: JudgeRunList, ...errors },
      },
    },
    async (request) => {
      const task = await getTaskRow(ctx.db, request.params.taskId);
      const runs = await listJudgeRuns(ctx.db, task.task_id);
      return { taskId: task.task_id, judgeRuns: runs.map(toJudgeRun) };
    },
  );
}
