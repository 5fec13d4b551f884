import { ServiceError } from '@svc/contracts';
import { sql } from 'kysely';
import type { SchedulerSettings } from '../../config.js';
import type { Executor, Tx } from '../../store/runs.js';
import { PREPARED } from '../../store/prepared.js';

/**
 * Capacity is a bound on live runners, counted in the database so every replica and a manual
 * dispatch see the same numbers. A task holds a slot for each live runner Job of its runs (its
 * attempts' and its judge's, `runs.queue_task_id`, until the launcher reports the Job ended),
 * and one for each piece of its open work still without a Job (see `capacityCtes`). A slot is
 * freed when the runner has ended, not when its command did. Decisions that take capacity
 * hold one transaction-scoped advisory lock: two replicas never both take the last slot.
 */
const CAPACITY_LOCK = 0x5c4ed001;

export async function lockCapacity(trx: Tx): Promise<void> {
  await sql`${PREPARED} SELECT pg_advisory_xact_lock(${CAPACITY_LOCK})`.execute(trx);
}

export interface InUse {
  global: number;
  byTenant: Map<string, number>;
  byProfile: Map<string, number>;
  byQueue: Map<string, number>;
  /** Slots held per concurrency key (tasks without a key hold none here). */
  byKey: Map<string, number>;
  /** Attempt starts over the last minute, per profile with a start rate. */
  starts: Map<string, number>;
}

export interface Slot {
  tenantId: string;
  backendProfile: string;
  queue: string;
  concurrencyKey?: string | null;
  concurrencyLimit?: number | null;
}

export function take(use: InUse, slot: Slot, n = 1, start = false): void {
  const add = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + n);
  use.global += n;
  add(use.byTenant, slot.tenantId);
  add(use.byProfile, slot.backendProfile);
  add(use.byQueue, slot.queue);
  if (slot.concurrencyKey) add(use.byKey, slot.concurrencyKey);
  if (start) add(use.starts, slot.backendProfile);
}

/** Where a limit in force comes from: configuration (the default) or set through the API. */
export type LimitSource = 'configured' | 'stored';

/** Limits set through `PUT /queue/limits`, as stored. */
export interface StoredLimits {
  global: number | null;
  tenants: Record<string, number>;
  profiles: Record<string, number>;
  profileRates: Record<string, number>;
}

/**
 * The limits in force: configuration overridden by what is stored in the database (per-queue
 * settings, paused queues, limits and start rates set at run time). `settings` holds the
 * effective global, tenant and profile limits.
 */
export interface Limits {
  settings: SchedulerSettings;
  queues: Record<string, number>;
  paused: ReadonlySet<string>;
  stored: StoredLimits;
  /** Per rated profile: starts per minute allowed, and when the window next has room. */
  rates: Record<string, { rate: number; freeAt: Date | null }>;
}

/** The capacity columns of a statement, as JSON: stored limits and slots in use. */
export interface CapacityColumns {
  capacity_queues: Array<{ queue: string; max: number }>;
  capacity_used: Array<{
    tenant: string;
    profile: string;
    queue: string;
    key: string | null;
    n: number;
  }>;
  capacity_paused: string[];
  capacity_stored: Array<{ scope: string; name: string; value: number }>;
  capacity_rates: Array<{ profile: string; rate: number; starts: number; free_at: string | null }>;
}

/**
 * CTEs `used` (slots held per tenant, profile and queue: see above) and `capacity` (one row:
 * the `CapacityColumns`, and `room`, how many attempts fit under the global limit, at most a
 * batch). A slot is a live runner Job of a task's run, or a piece of a task's open work that
 * has no live Job of its own: an open attempt (none launched yet, or its runner lost), a judge
 * run requested but not yet launched, a completed attempt whose judge has not been requested.
 * A task's earlier attempt whose runner still lives holds its own slot beside a retry.
 */
export const capacityCtes = (settings: SchedulerSettings, batch: number) => sql`
  live_jobs AS (
    SELECT j.run_id, j.attempt_id, r.queue_task_id AS task_id,
      r.metadata->>'judgeRunId' AS judge_run_id
    FROM runner_jobs j JOIN runs r ON r.run_id = j.run_id
    WHERE j.phase IN ('pending', 'starting', 'running') AND r.queue_task_id IS NOT NULL
  ),
  held AS (
    SELECT task_id FROM live_jobs
    UNION ALL
    SELECT a.task_id FROM queue_attempts a
    WHERE a.state IN ('dispatched', 'running')
      -- Two anti-joins, each on one key (hashable): the Job launched for the attempt, or a
      -- replacement on its run.
      AND NOT EXISTS (SELECT 1 FROM live_jobs l WHERE l.attempt_id = a.attempt_id)
      AND NOT EXISTS (SELECT 1 FROM live_jobs l WHERE l.run_id = a.run_id)
    UNION ALL
    SELECT jr.task_id FROM queue_judge_runs jr
    WHERE jr.state = 'requested' AND jr.run_id IS NULL AND NOT EXISTS (
      SELECT 1 FROM live_jobs l WHERE l.judge_run_id = jr.judge_run_id)
    UNION ALL
    SELECT t.task_id FROM queue_tasks t
    JOIN queue_attempts a ON a.attempt_id = t.latest_attempt_id
    WHERE t.state = 'running' AND t.judge IS NOT NULL AND a.state = 'completed'
      AND NOT EXISTS (SELECT 1 FROM queue_judge_runs jr WHERE jr.attempt_id = a.attempt_id)
      AND NOT EXISTS (SELECT 1 FROM live_jobs l WHERE l.run_id = a.run_id)
  ),
  used AS (
    SELECT t.tenant_id, t.backend_profile, t.queue, t.concurrency_key, count(*)::int AS n
    FROM held h JOIN queue_tasks t ON t.task_id = h.task_id
    GROUP BY t.tenant_id, t.backend_profile, t.queue, t.concurrency_key
  ),
  -- Per profile with a start rate: attempt starts over the last minute, and when the window
  -- next has room (the rate-th newest start, a minute on). No rate set: no row, nothing read.
  rates AS (
    SELECT l.name AS profile, l.value AS rate,
      (SELECT count(*)::int FROM queue_attempts a JOIN queue_tasks t ON t.task_id = a.task_id
       WHERE a.created_at > now() - interval '1 minute' AND t.backend_profile = l.name
      ) AS starts,
      (SELECT a.created_at + interval '1 minute'
       FROM queue_attempts a JOIN queue_tasks t ON t.task_id = a.task_id
       WHERE a.created_at > now() - interval '1 minute' AND t.backend_profile = l.name
       ORDER BY a.created_at DESC OFFSET l.value - 1 LIMIT 1) AS free_at
    FROM queue_limits l WHERE l.scope = 'profile-rate'
  ),
  capacity AS (
    SELECT
      (SELECT coalesce(json_agg(json_build_object('queue', queue, 'max', max_running)), '[]')
       FROM queue_settings WHERE max_running IS NOT NULL) AS capacity_queues,
      (SELECT coalesce(json_agg(json_build_object(
         'tenant', tenant_id, 'profile', backend_profile, 'queue', queue,
         'key', concurrency_key, 'n', n)), '[]')
       FROM used) AS capacity_used,
      (SELECT coalesce(json_agg(queue), '[]') FROM queue_settings WHERE paused)
        AS capacity_paused,
      (SELECT coalesce(json_agg(json_build_object('scope', scope, 'name', name, 'value', value)),
         '[]') FROM queue_limits) AS capacity_stored,
      (SELECT coalesce(json_agg(json_build_object('profile', profile, 'rate', rate,
         'starts', starts, 'free_at', free_at)), '[]') FROM rates) AS capacity_rates,
      greatest(0, least(${batch}::int,
        coalesce((SELECT value FROM queue_limits WHERE scope = 'global'), ${settings.maxRunning}::int)
          - (SELECT coalesce(sum(n), 0) FROM used)))::int AS room
  )`;

export function capacityOf(
  settings: SchedulerSettings,
  row: CapacityColumns,
): { limits: Limits; use: InUse } {
  const queues = { ...settings.queues };
  for (const q of row.capacity_queues) queues[q.queue] = q.max;
  const stored: StoredLimits = { global: null, tenants: {}, profiles: {}, profileRates: {} };
  for (const l of row.capacity_stored) {
    if (l.scope === 'global') stored.global = l.value;
    else if (l.scope === 'tenant') stored.tenants[l.name] = l.value;
    else if (l.scope === 'profile') stored.profiles[l.name] = l.value;
    else if (l.scope === 'profile-rate') stored.profileRates[l.name] = l.value;
  }
  const effective: SchedulerSettings = {
    ...settings,
    maxRunning: stored.global ?? settings.maxRunning,
    tenants: { ...settings.tenants, ...stored.tenants },
    profiles: { ...settings.profiles, ...stored.profiles },
  };
  const use: InUse = {
    global: 0,
    byTenant: new Map(),
    byProfile: new Map(),
    byQueue: new Map(),
    byKey: new Map(),
    starts: new Map(),
  };
  for (const u of row.capacity_used)
    take(
      use,
      { tenantId: u.tenant, backendProfile: u.profile, queue: u.queue, concurrencyKey: u.key },
      u.n,
    );
  const rates: Limits['rates'] = {};
  for (const r of row.capacity_rates) {
    rates[r.profile] = { rate: r.rate, freeAt: r.free_at ? new Date(r.free_at) : null };
    use.starts.set(r.profile, r.starts);
  }
  const paused = new Set(row.capacity_paused);
  return { limits: { settings: effective, queues, paused, stored, rates }, use };
}

/**
 * The limits in force and the slots held (live runners), in one statement (one round trip
 * under the capacity lock). Per-queue limits stored in the database override configuration.
 */
export async function readCapacity(
  db: Executor,
  settings: SchedulerSettings,
): Promise<{ limits: Limits; use: InUse }> {
  const { rows } = await sql<CapacityColumns>`${PREPARED}
    WITH ${capacityCtes(settings, 0)}
    SELECT capacity_queues, capacity_used, capacity_paused, capacity_stored, capacity_rates
    FROM capacity`.execute(db);
  return capacityOf(settings, rows[0]!);
}

const limitOf = (map: Record<string, number>, key: string, fallback: number | null) =>
  Object.hasOwn(map, key) ? map[key]! : fallback;

/** The first limit a new attempt in this slot would pass, or null when it fits. */
export function blockingLimit(
  limits: Limits,
  use: InUse,
  slot: Slot,
): { scope: string; name: string | null; limit: number; inUse: number } | null {
  const s = limits.settings;
  if (use.global >= s.maxRunning)
    return { scope: 'global', name: null, limit: s.maxRunning, inUse: use.global };
  const checks: [string, string, number | null, Map<string, number>][] = [
    ['tenant', slot.tenantId, limitOf(s.tenants, slot.tenantId, s.perTenant), use.byTenant],
    [
      'backendProfile',
      slot.backendProfile,
      limitOf(s.profiles, slot.backendProfile, s.perProfile),
      use.byProfile,
    ],
    ['queue', slot.queue, limitOf(limits.queues, slot.queue, s.perQueue), use.byQueue],
  ];
  for (const [scope, name, limit, map] of checks) {
    const inUse = map.get(name) ?? 0;
    if (limit !== null && inUse >= limit) return { scope, name, limit, inUse };
  }
  return null;
}

/** What holds a new attempt in this slot back, first match: see `holdOf`. */
export type Hold =
  | { kind: 'paused'; queue: string }
  | { kind: 'capacity'; scope: string; name: string | null; limit: number; inUse: number }
  | { kind: 'key'; key: string; limit: number; inUse: number }
  | { kind: 'rate'; profile: string; rate: number; starts: number; at: Date };

/**
 * Whether a new attempt in this slot may start now, and if not, why: its queue is paused, a
 * capacity limit is reached, its concurrency key holds its limit of slots (the task's own
 * limit: tasks of one key may carry different limits, and each starts only while the key's
 * slots are below its own), or its profile used its starts of the last minute.
 */
export function holdOf(limits: Limits, use: InUse, slot: Slot, now = new Date()): Hold | null {
  if (limits.paused.has(slot.queue)) return { kind: 'paused', queue: slot.queue };
  const blocked = blockingLimit(limits, use, slot);
  if (blocked) return { kind: 'capacity', ...blocked };
  if (slot.concurrencyKey) {
    const limit = slot.concurrencyLimit ?? 1;
    const inUse = use.byKey.get(slot.concurrencyKey) ?? 0;
    if (inUse >= limit) return { kind: 'key', key: slot.concurrencyKey, limit, inUse };
  }
  const rate = limits.rates[slot.backendProfile];
  if (rate) {
    const starts = use.starts.get(slot.backendProfile) ?? 0;
    if (starts >= rate.rate) {
      // Starts of this very pass are not in the window read: a minute from now at the latest.
      const at = rate.freeAt && rate.freeAt > now ? rate.freeAt : new Date(now.getTime() + 60_000);
      return { kind: 'rate', profile: slot.backendProfile, rate: rate.rate, starts, at };
    }
  }
  return null;
}

/** The refusal of a manual dispatch held back by `hold`. */
export function holdError(hold: Hold): ServiceError {
  switch (hold.kind) {
    case 'paused':
      return new ServiceError(
        'queue-paused',
        `queue ${hold.queue} is paused; queue resume ${hold.queue} lets its tasks start`,
        { queue: hold.queue },
      );
    case 'capacity':
      return new ServiceError(
        'capacity-exhausted',
        `${hold.scope}${hold.name ? ` ${hold.name}` : ''} has ${hold.inUse} of ${hold.limit} runners live; dispatch again when one has ended`,
        { scope: hold.scope, name: hold.name, limit: hold.limit, inUse: hold.inUse },
      );
    case 'key':
      return new ServiceError(
        'capacity-exhausted',
        `concurrency key ${hold.key} has ${hold.inUse} of ${hold.limit} attempts open; dispatch again when one has ended`,
        { scope: 'concurrency-key', name: hold.key, limit: hold.limit, inUse: hold.inUse },
      );
    case 'rate':
      return new ServiceError(
        'capacity-exhausted',
        `profile ${hold.profile} started ${hold.starts} of its ${hold.rate} attempts this minute; dispatch again at ${hold.at.toISOString()}`,
        {
          scope: 'profile-rate',
          name: hold.profile,
          limit: hold.rate,
          inUse: hold.starts,
          retryAt: hold.at.toISOString(),
        },
      );
  }
}

/** Manual dispatch counts against the same capacity: refused, before anything is written. */
export async function assertCapacity(trx: Tx, settings: SchedulerSettings, slot: Slot) {
  await lockCapacity(trx);
  const { limits, use } = await readCapacity(trx, settings);
  const hold = holdOf(limits, use, slot);
  if (hold) throw holdError(hold);
}

export interface Candidate extends Slot {
  taskId: string;
}

/**
 * Fair share: tenants take turns, the tenant with the fewest running attempts first, each
 * turn its next task in queue order (priority, then submission). A candidate over a limit is
 * skipped; the others of its tenant may still fit (another queue or profile).
 */
export function pickFair(
  byTenant: Map<string, Candidate[]>,
  limits: Limits,
  use: InUse,
  max: number,
): Candidate[] {
  const picked: Candidate[] = [];
  const heads = new Map([...byTenant].map(([tenant, list]) => [tenant, [...list]]));
  while (picked.length < max && heads.size > 0) {
    if (use.global >= limits.settings.maxRunning) break;
    const order = [...heads.keys()].sort(
      (a, b) => (use.byTenant.get(a) ?? 0) - (use.byTenant.get(b) ?? 0) || (a < b ? -1 : 1),
    );
    const tenant = order[0]!;
    const list = heads.get(tenant)!;
    let chosen: Candidate | undefined;
    while (list.length > 0 && !chosen) {
      const next = list.shift()!;
      if (!holdOf(limits, use, next)) chosen = next;
    }
    if (list.length === 0) heads.delete(tenant);
    if (chosen) {
      picked.push(chosen);
      take(use, chosen, 1, true);
    }
  }
  return picked;
}
