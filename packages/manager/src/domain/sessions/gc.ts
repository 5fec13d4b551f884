import type { Ctx } from '../context.js';
import { evictStorage, type SessionDeps } from './sessions.js';

/**
 * Session garbage collection: storage past `expires_at` whose session has no active run is
 * evicted (volume deleted, session marked). Safe with several replicas: eviction is a
 * conditional update and deleting a missing volume is a no-op.
 */
export async function collectExpiredSessions(
  ctx: Ctx,
  deps: SessionDeps,
  limit = 100,
): Promise<string[]> {
  const due = await ctx.db
    .selectFrom('sessions as s')
    .leftJoin('runs as r', 'r.run_id', 's.active_run_id')
    .select('s.session_id')
    .where('s.storage_kind', '=', 'pvc')
    .where('s.expires_at', '<', new Date())
    .where((eb) =>
      eb.or([
        eb('s.active_run_id', 'is', null),
        eb('r.state', 'in', ['completed', 'failed', 'blocked', 'cancelled']),
      ]),
    )
    .limit(limit)
    .execute();
  const evicted: string[] = [];
  for (const { session_id } of due) {
    await evictStorage(ctx, deps, session_id, 'expired');
    evicted.push(session_id);
  }
  return evicted;
}
