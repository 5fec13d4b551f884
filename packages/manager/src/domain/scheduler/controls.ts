import type {
  QueueLimitsBody,
  QueueSettings,
  QueueSettingsBody,
  SchedulerLimits,
} from '@svc/contracts';
import { sql } from 'kysely';
import type { SchedulerSettings } from '../../config.js';
import { iso } from '../../store/json.js';
import type { Db } from '../../store/db.js';
import { lockCapacity, readCapacity } from './capacity.js';
import { limitsView } from './view.js';

/**
 * The scheduler's run-time controls: a queue's settings (its limit, paused or not) and the
 * limits set through the API. Each change is written under the capacity lock, as a decision
 * that takes capacity is made: a pass in progress commits first, and every pass after the
 * change (on any replica) reads it. A paused queue therefore gets no attempt created after
 * its pause has committed.
 */
export async function setQueueSettings(
  db: Db,
  queue: string,
  body: QueueSettingsBody,
): Promise<QueueSettings> {
  const row = await db.transaction().execute(async (trx) => {
    await lockCapacity(trx);
    const changes = {
      ...(body.maxRunning !== undefined ? { max_running: body.maxRunning } : {}),
      ...(body.paused !== undefined ? { paused: body.paused } : {}),
    };
    return trx
      .insertInto('queue_settings')
      .values({ queue, max_running: null, ...changes })
      .onConflict((oc) => oc.column('queue').doUpdateSet({ ...changes, updated_at: new Date() }))
      .returningAll()
      .executeTakeFirstOrThrow();
  });
  return {
    queue: row.queue,
    maxRunning: row.max_running,
    paused: row.paused,
    updatedAt: iso(row.updated_at)!,
  };
}

type Scope = 'global' | 'tenant' | 'profile' | 'profile-rate';

/**
 * Store limits set at run time: a value sets, null removes (back to configuration), a name
 * left out keeps what is stored. One transaction under the capacity lock; the limits in force
 * after it are returned.
 */
export async function setLimits(
  db: Db,
  settings: SchedulerSettings,
  body: QueueLimitsBody,
): Promise<SchedulerLimits> {
  const entries: Array<{ scope: Scope; name: string; value: number | null }> = [];
  if (body.global !== undefined) entries.push({ scope: 'global', name: '', value: body.global });
  const maps: Array<[Scope, Record<string, number | null> | undefined]> = [
    ['tenant', body.tenants],
    ['profile', body.profiles],
    ['profile-rate', body.profileRates],
  ];
  for (const [scope, map] of maps)
    for (const [name, value] of Object.entries(map ?? {})) entries.push({ scope, name, value });
  return db.transaction().execute(async (trx) => {
    await lockCapacity(trx);
    const set = entries.filter((e) => e.value !== null);
    const removed = entries.filter((e) => e.value === null);
    if (removed.length > 0)
      await sql`
        DELETE FROM queue_limits l USING unnest(
          ${removed.map((e) => e.scope)}::text[], ${removed.map((e) => e.name)}::text[]
        ) AS r(scope, name)
        WHERE l.scope = r.scope AND l.name = r.name`.execute(trx);
    if (set.length > 0)
      await trx
        .insertInto('queue_limits')
        .values(set.map((e) => ({ scope: e.scope, name: e.name, value: e.value! })))
        .onConflict((oc) =>
          oc.columns(['scope', 'name']).doUpdateSet((eb) => ({
            value: eb.ref('excluded.value'),
            updated_at: new Date(),
          })),
        )
        .execute();
    const { limits } = await readCapacity(trx, settings);
    return limitsView(settings, limits);
  });
}
