import type { SessionRef, TaskWaiting } from '@svc/contracts';
import { sql } from 'kysely';
import type { SchedulerSettings } from '../../config.js';
import { iso } from '../../store/json.js';
import type { Executor } from '../../store/runs.js';
import { holdOf, readCapacity, type Hold, type InUse, type Limits } from '../scheduler/capacity.js';
import { retryPolicyOf } from '../scheduler/task-policy.js';
import type { AttemptRow, TaskRow } from './store.js';
import { attemptsLeft } from './budget.js';

/**
 * Why a task waits, for every view of it (task, listing, commander), and whether a person's
 * dispatch would help: the same facts the scheduler and a manual dispatch decide on, read once
 * per page. Capacity is read through `readCapacity` only, so these answers follow however the
 * scheduler counts capacity.
 */
export interface WaitingView {
  now: Date;
  settings: SchedulerSettings;
  /** Capacity in use and the limits in force; null when not read (a fresh submit). */
  capacity: { limits: Limits; use: InUse } | null;
  /** Sessions of the page's queued tasks that serve a turn now: sessionId -> commandId. */
  busy: ReadonlyMap<string, string>;
  /** Paused queues among the page's (from `capacity` when it was read). */
  paused: ReadonlySet<string>;
}

const FAILED_OR_BLOCKED = ['failed', 'blocked'];
const sessionOf = (task: TaskRow) => (task.session_ref as SessionRef | null)?.sessionId ?? null;

/** Tasks whose answer depends on capacity: those that may start, by the scheduler or a person. */
const needsCapacity = (task: TaskRow) =>
  task.state === 'queued' || (FAILED_OR_BLOCKED.includes(task.state) && attemptsLeft(task));

/** What the views of these tasks need to say why they wait: at most two reads. */
export async function waitingView(
  db: Executor,
  settings: SchedulerSettings,
  tasks: readonly TaskRow[],
  options: { capacity?: boolean } = {},
): Promise<WaitingView> {
  const sessions = [
    ...new Set(
      tasks
        .filter(needsCapacity)
        .map(sessionOf)
        .filter((s): s is string => s !== null),
    ),
  ];
  const readsCapacity = (options.capacity ?? true) && tasks.some(needsCapacity);
  const queues = [...new Set(tasks.filter(needsCapacity).map((t) => t.queue))];
  const [capacity, busy, paused] = await Promise.all([
    readsCapacity ? readCapacity(db, settings) : Promise.resolve(null),
    busySessions(db, sessions),
    // Without the capacity read, a paused queue is still said: one keyed read.
    readsCapacity || queues.length === 0 ? Promise.resolve(null) : pausedOf(db, queues),
  ]);
  return {
    now: new Date(),
    settings,
    capacity,
    busy,
    paused: capacity?.limits.paused ?? paused ?? new Set(),
  };
}

async function pausedOf(db: Executor, queues: string[]): Promise<Set<string>> {
  const rows = await db
    .selectFrom('queue_settings')
    .select('queue')
    .where('queue', 'in', queues)
    .where('paused', '=', true)
    .execute();
  return new Set(rows.map((r) => r.queue));
}

/** Sessions among these whose active command is not terminal. */
async function busySessions(db: Executor, sessionIds: string[]): Promise<Map<string, string>> {
  if (sessionIds.length === 0) return new Map();
  const { rows } = await sql<{ session_id: string; command_id: string }>`
    SELECT s.session_id, c.command_id FROM sessions s
    JOIN commands c ON c.command_id = s.active_command_id
    WHERE s.session_id = ANY (${sessionIds}::text[])
      AND c.state IN ('accepted', 'delivered', 'confirmed')`.execute(db);
  return new Map(rows.map((r) => [r.session_id, r.command_id]));
}

const SCOPES = { global: 'global', tenant: 'tenant', backendProfile: 'profile', queue: 'queue' };
type Scope = NonNullable<TaskWaiting['limit']>['scope'];

/** What holds a new attempt of this task back now (paused queue, a limit, key, rate). */
function holdOfTask(task: TaskRow, view: WaitingView): Hold | null {
  if (!view.capacity) return null;
  return holdOf(
    view.capacity.limits,
    view.capacity.use,
    {
      tenantId: task.tenant_id,
      backendProfile: task.backend_profile,
      queue: task.queue,
      concurrencyKey: task.concurrency_key,
      concurrencyLimit: task.concurrency_limit,
    },
    view.now,
  );
}

/** The capacity limit a new attempt of this task would pass, in the API's terms. */
function capacityLimit(task: TaskRow, view: WaitingView): TaskWaiting['limit'] {
  const hold = holdOfTask(task, view);
  if (!hold || hold.kind !== 'capacity') return null;
  return {
    scope: SCOPES[hold.scope as keyof typeof SCOPES] as Scope,
    key: hold.name,
    limit: hold.limit,
    used: hold.inUse,
  };
}

/** Why a ready task is held back by its queue, key or profile rate; null for none. */
function heldWaiting(task: TaskRow, view: WaitingView): TaskWaiting | null {
  const hold = holdOfTask(task, view);
  if (!hold) return null;
  switch (hold.kind) {
    case 'paused':
      return wait(
        'queue-paused',
        `its queue ${hold.queue} is paused; queue resume ${hold.queue} lets it start`,
      );
    case 'key':
      return wait(
        'concurrency-key',
        `concurrency key ${hold.key} has ${hold.inUse} of this task's limit of ${hold.limit} attempts open; it starts when one of them ends`,
        null,
        { scope: 'concurrency-key', key: hold.key, limit: hold.limit, used: hold.inUse },
      );
    case 'rate':
      return wait(
        'profile-rate',
        `profile ${hold.profile} started ${hold.starts} of its ${hold.rate} attempts per minute; it can start at ${hold.at.toISOString()}`,
        hold.at,
        { scope: 'profile-rate', key: hold.profile, limit: hold.rate, used: hold.starts },
      );
    case 'capacity': {
      const limit = capacityLimit(task, view)!;
      return wait('capacity', `${limitText(limit)}; it starts when one of them ends`, null, limit);
    }
  }
}

/** Whether the scheduler will retry this failed task by itself (its policy, attempts left). */
function willRetry(task: TaskRow, attempt: AttemptRow | null, view: WaitingView): boolean {
  if (!view.settings.enabled || task.state !== 'failed' || !attemptsLeft(task)) return false;
  if (!attempt || attempt.state !== 'failed' || !attempt.failure_kind) return false;
  return retryPolicyOf(task, view.settings).retryOn.includes(attempt.failure_kind);
}

const wait = (
  reason: string,
  message: string,
  until: Date | null = null,
  limit: TaskWaiting['limit'] = null,
): TaskWaiting => ({ reason, message, until: iso(until), limit });

function limitText(limit: NonNullable<TaskWaiting['limit']>): string {
  const who = limit.scope === 'global' ? 'this service' : `${limit.scope} ${limit.key}`;
  return `${who} runs ${limit.used} of its ${limit.limit} attempts at once`;
}

/** Why this task waits now, or null when it does not (running, or it needs a person). */
export function waitingOf(
  task: TaskRow,
  attempt: AttemptRow | null,
  view: WaitingView,
): TaskWaiting | null {
  const scheduler = view.settings.enabled;
  if (task.state === 'dispatched') {
    const job = attempt?.job_name ? ` (runner job ${attempt.job_name})` : '';
    return wait(
      'waiting-runner',
      `attempt ${task.attempt_count} was dispatched${job}; no runner has taken its turn yet`,
    );
  }
  if (willRetry(task, attempt, view))
    return wait(
      'backoff',
      `attempt ${task.attempt_count} failed (${attempt!.failure_kind}); the scheduler queues it again after a backoff`,
    );
  if (task.state !== 'queued') return null;
  if (!attemptsLeft(task))
    return wait(
      'blocked',
      `it used all ${task.max_attempts} of its attempts; submit a new task to go on, or cancel it`,
    );
  // A paused queue says so first: nothing of it starts, whatever else it waits for.
  if (view.paused.has(task.queue))
    return wait(
      'queue-paused',
      `its queue ${task.queue} is paused; queue resume ${task.queue} lets it start`,
    );
  const runAfter = task.run_after ? new Date(task.run_after) : null;
  const later = scheduler && runAfter && runAfter > view.now ? runAfter : null;
  const session = sessionOf(task);
  const serving = session ? view.busy.get(session) : undefined;
  if (serving)
    return wait(
      'session-busy',
      `its session ${session} serves command ${serving}; it starts when that turn ends`,
      later,
    );
  if (later) {
    const refusal = task.last_refusal as { failureKind?: string; message?: string } | null;
    if (task.deferrals > 0 && refusal)
      return wait(
        'backoff',
        `the scheduler could not start it (${refusal.failureKind ?? 'refused'}: ${refusal.message ?? ''}); it tries again then`,
        later,
      );
    if (task.attempt_count > 0)
      return wait(
        'backoff',
        `attempt ${task.attempt_count} failed; the retry waits out its backoff`,
        later,
      );
    return wait('run-after', 'its runAfter has not come yet', later);
  }
  const held = heldWaiting(task, view);
  if (held) return held;
  if (!scheduler)
    return wait(
      'scheduler-off',
      `ready, but the scheduler is off on this manager: queue dispatch ${task.task_id} starts it`,
    );
  if (!view.capacity)
    return wait(
      'dispatching',
      `queued: the scheduler starts it as soon as capacity allows (queue show ${task.task_id} names a limit it waits on)`,
    );
  return wait('dispatching', 'ready: the scheduler starts it on its next pass');
}

/**
 * Whether a person's `queue dispatch` is the next step: attempts are left, the scheduler will
 * not start or retry it by itself, and the dispatch would not be refused for capacity or a
 * busy session.
 */
export function dispatchHelps(
  task: TaskRow,
  attempt: AttemptRow | null,
  waiting: TaskWaiting | null,
  view: WaitingView,
): boolean {
  if (!attemptsLeft(task)) return false;
  if (task.state === 'queued') return waiting?.reason === 'scheduler-off';
  if (!FAILED_OR_BLOCKED.includes(task.state)) return false;
  if (willRetry(task, attempt, view)) return false;
  const session = sessionOf(task);
  if (session && view.busy.has(session)) return false;
  if (!view.capacity) return false;
  return holdOfTask(task, view) === null;
}
