import type { SchedulerLimits, SchedulerView } from '@svc/contracts';
import { sql } from 'kysely';
import type { SchedulerSettings } from '../../config.js';
import { iso } from '../../store/json.js';
import type { Executor } from '../../store/runs.js';
import { readCapacity, type InUse, type Limits } from './capacity.js';

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

/**
 * The limits in force and where each comes from: configuration (`settings`, the defaults) or
 * set at run time (`limits.stored`).
 */
export function limitsView(settings: SchedulerSettings, limits: Limits): SchedulerLimits {
  const { stored } = limits;
  const sources = (configured: Record<string, number>, set: Record<string, number>) =>
    Object.fromEntries(
      [...new Set([...Object.keys(configured), ...Object.keys(set)])]
        .sort()
        .map((name) => [name, Object.hasOwn(set, name) ? 'stored' : 'configured'] as const),
    );
  return {
    global: limits.settings.maxRunning,
    perTenant: settings.perTenant,
    tenants: limits.settings.tenants,
    perProfile: settings.perProfile,
    profiles: limits.settings.profiles,
    perQueue: settings.perQueue,
    queues: limits.queues,
    profileRates: stored.profileRates,
    sources: {
      global: stored.global === null ? 'configured' : 'stored',
      tenants: sources(settings.tenants, stored.tenants),
      profiles: sources(settings.profiles, stored.profiles),
    },
  };
}

function ratesView(limits: Limits, use: InUse): SchedulerView['rates'] {
  return Object.entries(limits.rates)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([profile, { rate, freeAt }]) => {
      const starts = use.starts.get(profile) ?? 0;
      return {
        profile,
        perMinute: rate,
        startsLastMinute: starts,
        nextStartAt: starts >= rate ? iso(freeAt) : null,
      };
    });
}

/** What `queue scheduler` shows: limits, capacity in use, backlog, the next wake-up. */
export async function schedulerView(
  db: Executor,
  settings: SchedulerSettings,
  loop: LoopState,
): Promise<SchedulerView> {
  const [{ limits, use }, backlog, judges, lost, queues] = await Promise.all([
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
    db
      .selectFrom('queue_settings')
      .select(['queue', 'max_running', 'paused'])
      .orderBy('queue')
      .limit(500)
      .execute(),
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
    limits: limitsView(settings, limits),
    inUse: {
      global: use.global,
      byTenant: record(use.byTenant),
      byProfile: record(use.byProfile),
      byQueue: record(use.byQueue),
      byKey: record(use.byKey),
    },
    queues: queues.map((q) => ({ queue: q.queue, maxRunning: q.max_running, paused: q.paused })),
    rates: ratesView(limits, use),
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
