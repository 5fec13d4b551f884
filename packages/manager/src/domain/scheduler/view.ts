import type { SchedulerView } from '@svc/contracts';
import { sql } from 'kysely';
import type { SchedulerSettings } from '../../config.js';
import { iso } from '../../store/json.js';
import type { Executor } from '../../store/runs.js';
import { readCapacity } from './capacity.js';

/** The earliest `runAfter` of a queued task still in the future. */
export async function nextDueAt(db: Executor): Promise<Date | null> {
  const row = await db
    .selectFrom('queue_tasks')
    .select((eb) => eb.fn.min('run_after').as('due'))
    .where('state', '=', 'queued')
    .where('run_after', '>', sql<Date>`now()`)
    .executeTakeFirst();
  return row?.due ? new Date(row.due) : null;
}

export interface LoopState {
  enabled: boolean;
  instanceId: string;
  lastPassAt: Date | null;
  nextWakeAt: Date | null;
}

const record = (map: Map<string, number>) => Object.fromEntries([...map].sort());

/** What `queue scheduler` shows: limits, capacity in use, backlog, the next wake-up. */
export async function schedulerView(
  db: Executor,
  settings: SchedulerSettings,
  loop: LoopState,
): Promise<SchedulerView> {
  const [{ limits, use }, backlog, judges, lost] = await Promise.all([
    readCapacity(db, settings),
    sql<{
      tenant_id: string;
      queue: string;
      ready: number;
      waiting: number;
      next_run_after: Date | null;
    }>`
      SELECT tenant_id, queue,
        count(*) FILTER (WHERE run_after IS NULL OR run_after <= now())::int AS ready,
        count(*) FILTER (WHERE run_after > now())::int AS waiting,
        min(run_after) FILTER (WHERE run_after > now()) AS next_run_after
      FROM queue_tasks WHERE state = 'queued'
      GROUP BY tenant_id, queue ORDER BY tenant_id, queue LIMIT 500`.execute(db),
    db
      .selectFrom('queue_judge_runs')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('state', '=', 'requested')
      .executeTakeFirstOrThrow(),
    sql<{ n: number }>`
      SELECT count(DISTINCT r.run_id)::int AS n FROM runs r JOIN commands c ON c.run_id = r.run_id
      WHERE r.state IN ('claimed', 'running') AND r.lease_expires_at < now()
        AND c.state IN ('accepted', 'delivered', 'confirmed')`.execute(db),
  ]);
  const due = backlog.rows
    .map((b) => b.next_run_after)
    .filter((d): d is Date => d !== null)
    .map((d) => new Date(d))
    .sort((a, b) => a.getTime() - b.getTime())[0];
  const nextWake =
    loop.nextWakeAt && due ? (due < loop.nextWakeAt ? due : loop.nextWakeAt) : loop.nextWakeAt;
  return {
    enabled: loop.enabled,
    instanceId: loop.instanceId,
    generatedAt: new Date().toISOString(),
    limits: {
      global: settings.maxRunning,
      perTenant: settings.perTenant,
      tenants: settings.tenants,
      perProfile: settings.perProfile,
      profiles: settings.profiles,
      perQueue: settings.perQueue,
      queues: limits.queues,
    },
    inUse: {
      global: use.global,
      byTenant: record(use.byTenant),
      byProfile: record(use.byProfile),
      byQueue: record(use.byQueue),
    },
    backlog: backlog.rows.map((b) => ({
      tenantId: b.tenant_id,
      queue: b.queue,
      ready: b.ready,
      waiting: b.waiting,
      nextRunAfter: iso(b.next_run_after),
    })),
    judges: { open: Number(judges.n) },
    replacements: { pending: lost.rows[0]?.n ?? 0, maxPerRun: settings.replacement.maxPerRun },
    lastPassAt: iso(loop.lastPassAt),
    nextWakeAt: loop.enabled ? iso(nextWake) : null,
    scanIntervalMs: settings.scanIntervalMs,
  };
}
