import { sql } from 'kysely';
import { Gauge } from 'prom-client';
import {
  COMMAND_STATES,
  RUN_ACTIVITIES,
  RUN_STATES,
  RUNNER_JOB_PHASES,
  TASK_STATES,
  TERMINAL_RUN_STATES,
} from '@svc/contracts';
import { activityOf } from '../store/run-view.js';
import type { Db } from '../store/db.js';
import { registry } from './registry.js';

export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

interface Counts {
  runs: Map<string, number>;
  activities: Map<string, number>;
  /** Failed and blocked runs by failure kind, keyed `state failureKind`. */
  failures: Map<string, number>;
  commands: Map<string, number>;
  runnerJobs: Map<string, number>;
  queueTasks: Map<string, number>;
  schedules: number;
  /** Paused queues, each with its queued tasks. */
  paused: Map<string, number>;
}

const gauge = (name: string, help: string, label: string) =>
  new Gauge({ name, help, labelNames: [label], registers: [registry] });

const runs = gauge('svc_runs', 'Runs in the store by state', 'state');
const activities = gauge(
  'svc_runs_activity',
  'Runs by what they do now (waiting-runner, turn-active, idle, closed)',
  'activity',
);
const failures = new Gauge({
  name: 'svc_runs_failed',
  help: 'Failed and blocked runs in the store by state and failure kind (a run ends in its last turn outcome)',
  labelNames: ['state', 'failure_kind'] as const,
  registers: [registry],
});
const commands = gauge('svc_commands', 'Commands in the store by state', 'state');
const runnerJobs = gauge('svc_runner_jobs', 'Runner jobs in the store by phase', 'phase');
const queueTasks = gauge('svc_queue_tasks', 'Queue tasks in the store by state', 'state');
const schedules = new Gauge({
  name: 'svc_queue_schedules',
  help: 'Recurring schedules in the store',
  registers: [registry],
});
const pausedQueues = gauge(
  'svc_queue_paused',
  'Paused queues: 1 per queue paused (nothing of it is dispatched until resumed)',
  'queue',
);
const pausedTasks = new Gauge({
  name: 'svc_queue_paused_tasks',
  help: 'Queued tasks in paused queues (they wait on purpose: SvcQueueBackingUp leaves them out)',
  registers: [registry],
});
const ageSeconds = new Gauge({
  name: 'svc_store_counts_age_seconds',
  help: 'Age of the per-state store counts shown above',
  registers: [registry],
});
const pool = new Gauge({
  name: 'svc_db_pool_connections',
  help: 'Database pool connections by state (total, idle, waiting requests)',
  labelNames: ['state'] as const,
  registers: [registry],
});

/**
 * Per-state totals of durable records. A scrape never queries the store: it shows the last
 * aggregate and, when that is older than `maxAgeMs`, starts one refresh in the background (at
 * most one at a time), so a scrape costs the same with a thousand runs or a million and scrapes
 * from many replicas or a tight interval add no load beyond one aggregate per interval.
 */
export class StoreGauges {
  #at = 0;
  #refreshing: Promise<void> | undefined;
  #closed = false;

  constructor(
    private readonly db: Db,
    private readonly maxAgeMs: number,
    private readonly poolStats: () => PoolStats | null,
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Called before each scrape: refresh when stale, never wait for it (except the first one). */
  async beforeScrape(): Promise<void> {
    const stats = this.poolStats();
    if (stats)
      for (const state of ['total', 'idle', 'waiting'] as const) pool.set({ state }, stats[state]);
    if (Date.now() - this.#at >= this.maxAgeMs) {
      const refresh = this.refresh();
      if (this.#at === 0) await refresh;
    }
    if (this.#at > 0) ageSeconds.set((Date.now() - this.#at) / 1000);
  }

  refresh(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#refreshing ??= this.#load()
      .then((counts) => {
        this.#at = Date.now();
        publish(runs, 'state', RUN_STATES, counts.runs);
        const closed = TERMINAL_RUN_STATES.reduce(
          (n, state) => n + (counts.runs.get(state) ?? 0),
          0,
        );
        publish(
          activities,
          'activity',
          RUN_ACTIVITIES,
          new Map([...counts.activities, ['closed', closed]]),
        );
        failures.reset();
        for (const [key, n] of counts.failures) {
          const [state = '', kind = ''] = key.split(' ');
          failures.set({ state, failure_kind: kind }, n);
        }
        publish(commands, 'state', COMMAND_STATES, counts.commands);
        publish(runnerJobs, 'phase', RUNNER_JOB_PHASES, counts.runnerJobs);
        publish(queueTasks, 'state', TASK_STATES, counts.queueTasks);
        schedules.set(counts.schedules);
        pausedQueues.reset();
        for (const queue of counts.paused.keys()) pausedQueues.set({ queue }, 1);
        pausedTasks.set([...counts.paused.values()].reduce((sum, n) => sum + n, 0));
      })
      .catch(this.onError)
      .finally(() => {
        this.#refreshing = undefined;
      });
    return this.#refreshing;
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#refreshing;
  }

  async #load(): Promise<Counts> {
    // One grouped count per table, in parallel; runs and queue tasks count from their state indexes.
    // Activities are counted over open runs only (closed is the sum of the terminal states).
    const scheduleCount = sql<{ n: number }>`SELECT count(*)::int AS n FROM queue_schedules`
      .execute(this.db)
      .then((result) => result.rows[0]?.n ?? 0);
    const [[r, a, f, c, j, q, p], scheduleTotal] = await Promise.all([
      Promise.all(
        [
          sql<{
            k: string;
            n: number;
          }>`SELECT state AS k, count(*)::int AS n FROM runs GROUP BY state`,
          sql<{ k: string; n: number }>`
            SELECT a.k, count(*)::int AS n FROM (
              SELECT ${activityOf} AS k FROM runs
              WHERE runs.state NOT IN ('completed', 'failed', 'blocked', 'cancelled')
            ) a GROUP BY a.k`,
          sql<{ k: string; n: number }>`
            SELECT state || ' ' || coalesce(failure_kind, 'none') AS k, count(*)::int AS n
            FROM runs WHERE state IN ('failed', 'blocked') GROUP BY state, failure_kind`,
          sql<{
            k: string;
            n: number;
          }>`SELECT state AS k, count(*)::int AS n FROM commands GROUP BY state`,
          sql<{
            k: string;
            n: number;
          }>`SELECT phase AS k, count(*)::int AS n FROM runner_jobs GROUP BY phase`,
          sql<{
            k: string;
            n: number;
          }>`SELECT state AS k, count(*)::int AS n FROM queue_tasks GROUP BY state`,
          sql<{ k: string; n: number }>`
            SELECT s.queue AS k, (SELECT count(*)::int FROM queue_tasks t
              WHERE t.state = 'queued' AND t.queue = s.queue) AS n
            FROM queue_settings s WHERE s.paused`,
        ].map(async (query) => new Map((await query.execute(this.db)).rows.map((x) => [x.k, x.n]))),
      ),
      scheduleCount,
    ]);
    return {
      runs: r!,
      activities: a!,
      failures: f!,
      commands: c!,
      runnerJobs: j!,
      queueTasks: q!,
      schedules: scheduleTotal,
      paused: p!,
    };
  }
}

/** Every known state is shown, 0 when empty, so a state that emptied does not keep its last value. */
function publish(
  target: Gauge<string>,
  label: string,
  known: readonly string[],
  counts: Map<string, number>,
): void {
  for (const state of new Set([...known, ...counts.keys()]))
    target.set({ [label]: state }, counts.get(state) ?? 0);
}
