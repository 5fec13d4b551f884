import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * The process's metrics. Counters and gauges move in process as things happen (no query at
 * scrape time); per-state totals of durable records come from a small cached aggregate
 * (store-gauges.ts). One registry per process: several managers in one test process share it,
 * so tests compare before and after.
 */
export const registry = new Registry();
collectDefaultMetrics({ register: registry });

export const httpDuration = new Histogram({
  name: 'svc_http_request_duration_seconds',
  help: 'HTTP request duration by method, route pattern and status code',
  labelNames: ['method', 'route', 'status_code'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers: [registry],
});

export const runsCreated = new Counter({
  name: 'svc_runs_created_total',
  help: 'Runs created by this process',
  registers: [registry],
});

export const commandsCreated = new Counter({
  name: 'svc_commands_created_total',
  help: 'Commands created by this process, by type',
  labelNames: ['type'] as const,
  registers: [registry],
});

export const eventsAppended = new Counter({
  name: 'svc_events_appended_total',
  help: 'Events written to run event logs by this process (duplicates not counted)',
  registers: [registry],
});

export const leaseClaims = new Counter({
  name: 'svc_lease_claims_total',
  help: 'Run lease claims, by outcome (granted, conflict)',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export const leaseExpiries = new Counter({
  name: 'svc_lease_expiries_total',
  help: 'Expired leases found by a claim (the previous runner stopped heartbeating)',
  registers: [registry],
});

export const leaseTakeovers = new Counter({
  name: 'svc_lease_takeovers_total',
  help: 'Claims that took a run over from another runner',
  registers: [registry],
});

export const openWaits = new Gauge({
  name: 'svc_open_long_polls',
  help: 'Long-polls waiting now, by caller (runner command polls, client event and result waits)',
  labelNames: ['kind'] as const,
  registers: [registry],
});

export const openStreams = new Gauge({
  name: 'svc_open_event_streams',
  help: 'Server-Sent Events streams open now',
  registers: [registry],
});

export const clientWatches = new Counter({
  name: 'svc_client_watches_total',
  help: 'Client long-polls (waitMs) and event streams asked for, by kind and outcome (accepted, refused at the per-process bound)',
  labelNames: ['kind', 'outcome'] as const,
  registers: [registry],
});

export const runnerJobsFailed = new Counter({
  name: 'svc_runner_jobs_failed_total',
  help: 'Runner Jobs this process recorded as failed, by stage (launch: refused at creation; run: failed after it)',
  labelNames: ['stage'] as const,
  registers: [registry],
});

export const tasksRetried = new Counter({
  name: 'svc_queue_tasks_retried_total',
  help: 'Queue tasks a person retried through this process (requeued with a fresh attempt budget), by queue',
  labelNames: ['queue'] as const,
  registers: [registry],
});

/**
 * 1, labelled with what runs: the version, the source commit and the Node.js version. Join on
 * it in queries, or count its versions to see a rollout that did not finish.
 */
export const buildInfo = new Gauge({
  name: 'svc_build_info',
  help: 'The manager build this process runs (always 1): version, source commit, Node.js version',
  labelNames: ['version', 'commit', 'node'] as const,
  registers: [registry],
});

/** One series: this process's build (a test process's later managers replace the earlier). */
export function setBuildInfo(build: { version: string; commit: string }): void {
  buildInfo.reset();
  buildInfo.set({ version: build.version, commit: build.commit, node: process.version }, 1);
}

// Series that exist from the start, so a dashboard shows 0 rather than "no data".
for (const kind of ['client', 'runner']) openWaits.set({ kind }, 0);
for (const outcome of ['granted', 'conflict']) leaseClaims.inc({ outcome }, 0);
for (const stage of ['launch', 'run']) runnerJobsFailed.inc({ stage }, 0);
for (const kind of ['long-poll', 'stream'])
  for (const outcome of ['accepted', 'refused']) clientWatches.inc({ kind, outcome }, 0);

export const admissionRefused = new Counter({
  name: 'svc_admission_refused_total',
  help: 'Requests refused with 503 because they would have waited past the queue-time budget, by lane (runner, client) and reason (queue, event-loop)',
  labelNames: ['lane', 'reason'] as const,
  registers: [registry],
});

export const admissionInFlight = new Gauge({
  name: 'svc_admission_in_flight',
  help: 'Requests holding a place of their lane now (lease, runner, client)',
  labelNames: ['lane'] as const,
  registers: [registry],
});

export const writeGroupSize = new Histogram({
  name: 'svc_write_group_size',
  help: 'Requests per coalesced write (one statement and one commit), by kind (append, renewal)',
  labelNames: ['kind'] as const,
  buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
  registers: [registry],
});

for (const lane of ['runner', 'client'])
  for (const reason of ['queue', 'event-loop']) admissionRefused.inc({ lane, reason }, 0);
for (const lane of ['lease', 'runner', 'client']) admissionInFlight.set({ lane }, 0);

export const scheduleFires = new Counter({
  name: 'svc_queue_schedule_fires_total',
  help: 'Schedule ticks fired by this process, by outcome (task: a task was submitted; refused: its template was refused at fire time)',
  labelNames: ['outcome'] as const,
  registers: [registry],
});
for (const outcome of ['task', 'refused']) scheduleFires.inc({ outcome }, 0);
