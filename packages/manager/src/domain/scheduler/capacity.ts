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
}

export interface Slot {
  tenantId: string;
  backendProfile: string;
  queue: string;
}

export function take(use: InUse, slot: Slot, n = 1): void {
  use.global += n;
  use.byTenant.set(slot.tenantId, (use.byTenant.get(slot.tenantId) ?? 0) + n);
  use.byProfile.set(slot.backendProfile, (use.byProfile.get(slot.backendProfile) ?? 0) + n);
  use.byQueue.set(slot.queue, (use.byQueue.get(slot.queue) ?? 0) + n);
}

/** The limits in force: configuration, with per-queue settings stored in the database. */
export interface Limits {
  settings: SchedulerSettings;
  queues: Record<string, number>;
}

/** The capacity columns of a statement, as JSON: stored per-queue limits and slots in use. */
export interface CapacityColumns {
  capacity_queues: Array<{ queue: string; max: number }>;
  capacity_used: Array<{ tenant: string; profile: string; queue: string; n: number }>;
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
    SELECT t.tenant_id, t.backend_profile, t.queue, count(*)::int AS n
    FROM held h JOIN queue_tasks t ON t.task_id = h.task_id
    GROUP BY t.tenant_id, t.backend_profile, t.queue
  ),
  capacity AS (
    SELECT
      (SELECT coalesce(json_agg(json_build_object('queue', queue, 'max', max_running)), '[]')
       FROM queue_settings WHERE max_running IS NOT NULL) AS capacity_queues,
      (SELECT coalesce(json_agg(json_build_object(
         'tenant', tenant_id, 'profile', backend_profile, 'queue', queue, 'n', n)), '[]')
       FROM used) AS capacity_used,
      greatest(0, least(${batch}::int,
        ${settings.maxRunning}::int - (SELECT coalesce(sum(n), 0) FROM used)))::int AS room
  )`;

export function capacityOf(
  settings: SchedulerSettings,
  row: CapacityColumns,
): { limits: Limits; use: InUse } {
  const queues = { ...settings.queues };
  for (const q of row.capacity_queues) queues[q.queue] = q.max;
  const use: InUse = { global: 0, byTenant: new Map(), byProfile: new Map(), byQueue: new Map() };
  for (const u of row.capacity_used)
    take(use, { tenantId: u.tenant, backendProfile: u.profile, queue: u.queue }, u.n);
  return { limits: { settings, queues }, use };
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
    SELECT capacity_queues, capacity_used FROM capacity`.execute(db);
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

/** Manual dispatch counts against the same capacity: refused, before anything is written. */
export async function assertCapacity(trx: Tx, settings: SchedulerSettings, slot: Slot) {
  await lockCapacity(trx);
  const { limits, use } = await readCapacity(trx, settings);
  const blocked = blockingLimit(limits, use, slot);
  if (blocked)
    throw new ServiceError(
      'capacity-exhausted',
      `${blocked.scope}${blocked.name ? ` ${blocked.name}` : ''} has ${blocked.inUse} of ${blocked.limit} runners live; dispatch again when one has ended`,
      { ...blocked },
    );
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
      if (!blockingLimit(limits, use, next)) chosen = next;
    }
    if (list.length === 0) heads.delete(tenant);
    if (chosen) {
      picked.push(chosen);
      take(use, chosen);
    }
  }
  return picked;
}
