import { newId, ServiceError, type TaskSubmitBody } from '@svc/contracts';
import { sql } from 'kysely';
import type { Logger } from '../../logging.js';
import { scheduleFires } from '../../metrics/registry.js';
import { QUEUE_SUBMIT_KEY } from '../../store/wakeups.js';
import type { Ctx } from '../context.js';
import { submitScheduled } from '../queue/submit.js';
import { nextTick } from './cron.js';

/**
 * The row still at this tick. Compared at millisecond precision: a tick is read into a
 * JavaScript Date, and one written by hand (SQL `now()`) carries microseconds.
 */
const atTick = (tick: Date) => sql<boolean>`date_trunc('milliseconds', next_run_at) = ${tick}`;

/** Due schedules fired per pass; more wait for the next pass (the loop is kicked again). */
const FIRE_BATCH = 100;

interface Due {
  schedule_id: string;
  cron: string;
  timezone: string;
  next_run_at: Date;
}

/**
 * Fire every schedule whose tick has come: one task per tick, whichever replica gets there
 * first. A schedule whose ticks were missed (no manager ran) fires once for all of them and
 * moves on to its next future tick. Returns the ticks fired (tasks made or refusals recorded).
 */
export async function fireDueSchedules(ctx: Ctx, logger: Logger): Promise<number> {
  const due = await ctx.db
    .selectFrom('queue_schedules')
    .select(['schedule_id', 'cron', 'timezone', 'next_run_at'])
    .where('next_run_at', '<=', sql<Date>`now()`)
    .orderBy('next_run_at')
    .limit(FIRE_BATCH)
    .execute();
  let fired = 0;
  for (const d of due) {
    const outcome = await fireTick(ctx, d).catch((error: unknown) => {
      logger.warn({ scheduleId: d.schedule_id, err: String(error) }, 'firing a schedule failed');
      return 'failed' as const;
    });
    if (outcome === 'task' || outcome === 'refused') {
      scheduleFires.inc({ outcome });
      fired += 1;
    }
  }
  // This replica's claims start now; the NOTIFY of each insert reaches the others on commit.
  if (fired > 0) ctx.wakeups.committed(QUEUE_SUBMIT_KEY);
  return fired;
}

/**
 * One tick, one transaction: the conditional update moves `next_run_at` from this tick to the
 * next one (a replica that read the same tick waits on the row lock, then updates nothing:
 * the tick is taken), and the task is inserted through the submit path in the same
 * transaction, so a tick is taken exactly when its task exists. A template that the submit
 * checks refuse now (a profile or session gone since) moves the tick on with the refusal
 * recorded on the schedule instead of retrying it on every pass.
 */
async function fireTick(ctx: Ctx, due: Due): Promise<'task' | 'refused' | 'taken'> {
  const tick = new Date(due.next_run_at);
  // After a downtime the next tick is the first one still in the future: missed ticks fire once.
  const next = nextTick(due.cron, due.timezone, new Date(Math.max(Date.now(), tick.getTime())));
  const taskId = newId('tsk');
  try {
    return await ctx.db.transaction().execute(async (trx) => {
      const claimed = await trx
        .updateTable('queue_schedules')
        .set({
          next_run_at: next,
          last_run_at: tick,
          last_task_id: taskId,
          fired_count: (eb) => eb('fired_count', '+', 1),
          last_error: null,
          last_error_at: null,
          updated_at: sql<Date>`now()`,
        })
        .where('schedule_id', '=', due.schedule_id)
        .where(atTick(tick))
        .returning('template')
        .executeTakeFirst();
      if (!claimed) return 'taken';
      const body = { ...(claimed.template as TaskSubmitBody), taskId };
      await submitScheduled(ctx, trx, body, { scheduleId: due.schedule_id, tick });
      return 'task';
    });
  } catch (error) {
    if (!(error instanceof ServiceError)) throw error;
    const recorded = await ctx.db
      .updateTable('queue_schedules')
      .set({
        next_run_at: next,
        last_error: `tick ${tick.toISOString()} made no task: ${error.message}`,
        last_error_at: sql<Date>`now()`,
        updated_at: sql<Date>`now()`,
      })
      .where('schedule_id', '=', due.schedule_id)
      .where(atTick(tick))
      .executeTakeFirst();
    return Number(recorded.numUpdatedRows) > 0 ? 'refused' : 'taken';
  }
}
