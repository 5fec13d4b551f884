import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { nextTick } from '../src/domain/schedules/cron.js';
import { createTestStore, type TestStore } from '@svc/testkit';
import { managerTemplate, startTestManager, type TestManager } from './helpers.js';
import { waitFor } from './e2e-helpers.js';
import { taskBody } from './queue-helpers.js';

/**
 * Recurring schedules over real HTTP, two managers with their scheduler loops on one
 * PostgreSQL database. Capacity is 0 so fired tasks stay queued: the test counts tasks, not
 * runs. Ticks are made due by moving a schedule's stored next run into the past.
 */
const ENV = {
  SVC_SCHEDULER: 'on',
  SVC_SCHEDULER_SCAN_MS: '200',
  SVC_SCHEDULER_MAX_RUNNING: '0',
};

/** A tick that never comes due by itself during a test: every due tick is one the test made. */
const YEARLY = '0 0 1 1 *';

let store: TestStore;
let a: TestManager;
let b: TestManager;

async function startBoth(env: Record<string, string> = {}): Promise<void> {
  a = await startTestManager({ listen: true, store, env: { ...ENV, ...env } });
  b = await startTestManager({ listen: true, store, env: { ...ENV, ...env } });
  for (const t of [a, b]) await t.configureProfile('builtin-a');
}

async function call(t: TestManager, method: string, path: string, body?: unknown) {
  const response = await fetch(`${t.manager.url}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined, raw: text };
}

const db = () => a.manager.store.db;
const scheduleRows = async () =>
  (await sql<{ n: number }>`SELECT count(*)::int AS n FROM queue_schedules`.execute(db())).rows[0]!
    .n;
const tasksOf = async (scheduleId: string) =>
  (
    await sql<{ task_id: string; schedule_tick: Date }>`
      SELECT task_id, schedule_tick FROM queue_tasks WHERE schedule_id = ${scheduleId}
      ORDER BY schedule_tick`.execute(db())
  ).rows;

async function create(t: TestManager, body: Record<string, unknown>) {
  const res = await call(t, 'POST', '/api/v1/queue/schedules', {
    task: taskBody({ queue: 'nightly' }),
    ...body,
  });
  assert.equal(res.status, 201, res.raw);
  return res.body;
}

before(async () => {
  store = await createTestStore(managerTemplate);
  await startBoth();
});
after(async () => {
  await b.close();
  await a.close();
  await store.drop();
});

describe('schedules: cron, zone and template checks', () => {
  it('refuses malformed cron, seconds, unknown zones and bad templates with a 400 naming the field, storing nothing', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ cron: '0 0 9 * * *' }, /6 fields: seconds are not supported/],
      [{ cron: '0 9 * *' }, /4 field\(s\); give 5/],
      [{ cron: '61 * * * *' }, /field 1 \(minute\) "61"/],
      [{ cron: '0 25 * * *' }, /field 2 \(hour\) "25"/],
      [{ cron: '0 0 32 * *' }, /field 3 \(day-of-month\) "32"/],
      [{ cron: '0 0 1 13 *' }, /field 4 \(month\) "13"/],
      [{ cron: '0 9 * * FOO' }, /field 5 \(day-of-week\) "FOO"/],
      [{ cron: '0 9 * * 5L' }, /field 5 \(day-of-week\)/],
      [{ cron: 'H 9 * * *' }, /field 1 \(minute\) "H"/],
      [{ cron: '@daily' }, /1 field\(s\)/],
      [{ cron: '0 0 31 2 *' }, /never fires/],
      [{ cron: '0 9 * * *', timezone: 'Mars/Olympus_Mons' }, /timezone "Mars\/Olympus_Mons"/],
      [{ cron: '0 9 * * *', timezone: '+01:00' }, /timezone "\+01:00"/],
    ];
    for (const [body, message] of cases) {
      const res = await call(a, 'POST', '/api/v1/queue/schedules', {
        task: taskBody(),
        ...body,
      });
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.raw}`);
      assert.equal(res.body.failureKind, 'schema-invalid');
      assert.match(res.body.message, message, JSON.stringify(body));
    }
    // The template is a submission: what POST /queue/tasks refuses, a schedule refuses too.
    for (const task of [
      { ...taskBody(), title: undefined },
      { ...taskBody(), taskId: 'tsk-fixed-0001' },
      { ...taskBody(), dryRun: true },
      { ...taskBody(), priority: 5000 },
      { ...taskBody(), sessionRef: { sessionId: 'ses-missing-0001' } },
    ]) {
      const submitted = await call(a, 'POST', '/api/v1/queue/tasks', { ...task, dryRun: true });
      const res = await call(a, 'POST', '/api/v1/queue/schedules', { cron: '0 9 * * *', task });
      assert.ok(res.status >= 400 && res.status < 500, res.raw);
      if (!('taskId' in task) && !('dryRun' in task))
        assert.equal(res.status, submitted.status, `${res.raw} vs ${submitted.raw}`);
    }
    assert.equal(await scheduleRows(), 0);
  });

  it('computes the next run in the zone: weekday names, 29 February, DST transitions', async () => {
    const weekdays = await create(a, { cron: '0 9 * * mon-fri', timezone: 'Europe/Berlin' });
    const next = new Date(weekdays.nextRunAt);
    const local = new Intl.DateTimeFormat('en-GB', {
      timeZone: 'Europe/Berlin',
      weekday: 'short',
      hour: '2-digit',
      minute: '2-digit',
    }).format(next);
    assert.match(local, /^(Mon|Tue|Wed|Thu|Fri) 09:00$/, local);
    assert.ok(next > new Date());
    assert.equal(weekdays.timezone, 'Europe/Berlin');
    assert.equal(weekdays.lastRunAt, null);
    // A zone named in another case is the same zone, stored as the zone database spells it.
    const lower = await create(a, { cron: '0 9 * * mon-fri', timezone: 'europe/berlin' });
    assert.equal(lower.timezone, 'Europe/Berlin');
    assert.equal(lower.nextRunAt, weekdays.nextRunAt);
    const removed = await call(a, 'DELETE', `/api/v1/queue/schedules/${lower.scheduleId}`);
    assert.ok(removed.status < 300, removed.raw);

    const leap = await create(a, { cron: '0 12 29 feb *', name: 'leap day' });
    const leapAt = new Date(leap.nextRunAt);
    assert.equal(leapAt.getUTCMonth(), 1);
    assert.equal(leapAt.getUTCDate(), 29);
    assert.equal(leapAt.getUTCHours(), 12);
    assert.equal(leap.timezone, 'UTC');
    assert.equal(leap.name, 'leap day');
    assert.equal(
      nextTick('0 12 29 2 *', 'UTC', new Date('2028-03-01T00:00:00Z')).toISOString(),
      '2032-02-29T12:00:00.000Z',
    );

    // Spring forward in Berlin (29 March 2026, 02:00 -> 03:00): 02:30 does not exist that
    // night and fires once, at 03:30 CEST; fall back (25 October, 03:00 -> 02:00): 02:30
    // happens twice and fires once.
    const ticks = (after: string, n: number) => {
      const out: string[] = [];
      let at = new Date(after);
      for (let i = 0; i < n; i++)
        out.push((at = nextTick('30 2 * * *', 'Europe/Berlin', at)).toISOString());
      return out;
    };
    assert.deepEqual(ticks('2026-03-28T12:00:00Z', 3), [
      '2026-03-29T01:30:00.000Z',
      '2026-03-30T00:30:00.000Z',
      '2026-03-31T00:30:00.000Z',
    ]);
    assert.deepEqual(ticks('2026-10-24T12:00:00Z', 3), [
      '2026-10-25T00:30:00.000Z',
      '2026-10-26T01:30:00.000Z',
      '2026-10-27T01:30:00.000Z',
    ]);
    // New York's 09:00 on the day its clocks go forward (02:00 -> 03:00): 13:00 UTC, not 14:00.
    assert.equal(
      nextTick('0 9 * * *', 'America/New_York', new Date('2026-03-08T12:00:00Z')).toISOString(),
      '2026-03-08T13:00:00.000Z',
    );

    const listed = await call(a, 'GET', '/api/v1/queue/schedules?limit=1');
    assert.equal(listed.status, 200, listed.raw);
    assert.equal(listed.body.schedules.length, 1);
    assert.equal(listed.body.schedules[0].scheduleId, weekdays.scheduleId);
    const rest = await call(a, 'GET', `/api/v1/queue/schedules?cursor=${listed.body.nextCursor}`);
    assert.deepEqual(
      rest.body.schedules.map((s: { scheduleId: string }) => s.scheduleId),
      [leap.scheduleId],
    );
    for (const s of [weekdays, leap])
      assert.equal(
        (await call(a, 'DELETE', `/api/v1/queue/schedules/${s.scheduleId}`)).status,
        200,
      );
  });
});

describe('schedules: firing across two managers', () => {
  it('fires exactly one task per tick with both managers racing, over many ticks and schedules', async () => {
    const schedules = [];
    for (let i = 0; i < 10; i++) schedules.push(await create(i % 2 ? a : b, { cron: YEARLY }));
    const ids = schedules.map((s) => s.scheduleId as string);
    const ROUNDS = 20;
    for (let round = 1; round <= ROUNDS; round++) {
      // A distinct past tick per round; both loops are kicked at once to race for it.
      await sql`
        UPDATE queue_schedules SET next_run_at = timestamptz '2026-01-01T00:00:00Z'
          + ${round} * interval '1 minute'
        WHERE schedule_id = ANY(${ids})`.execute(db());
      a.manager.scheduler!.kick();
      b.manager.scheduler!.kick();
      await waitFor(
        `round ${round} fired`,
        async () =>
          (
            await sql<{ n: number }>`
              SELECT count(*)::int AS n FROM queue_schedules
              WHERE schedule_id = ANY(${ids}) AND next_run_at > now()`.execute(db())
          ).rows[0]!.n === ids.length,
        15_000,
      );
    }
    // No replica met a duplicate: the loser of a race finds the tick taken and moves on.
    for (const t of [a, b])
      assert.deepEqual(
        t.logs.filter((l) => l.includes('firing a schedule failed')),
        [],
      );
    for (const id of ids) {
      const tasks = await tasksOf(id);
      assert.equal(tasks.length, ROUNDS, `${id}: ${tasks.length} tasks`);
      assert.equal(new Set(tasks.map((t) => new Date(t.schedule_tick).getTime())).size, ROUNDS);
    }
    // The task is an ordinary queued task that shows its schedule; the schedule its last task.
    const shown = (await call(b, 'GET', `/api/v1/queue/schedules/${ids[0]}`)).body;
    assert.equal(shown.firedCount, ROUNDS);
    assert.ok(new Date(shown.nextRunAt) > new Date());
    assert.equal(shown.lastRunAt, '2026-01-01T00:20:00.000Z');
    const task = (await call(a, 'GET', `/api/v1/queue/tasks/${shown.lastTaskId}`)).body;
    assert.equal(task.state, 'queued');
    assert.equal(task.queue, 'nightly');
    assert.deepEqual(task.schedule, { scheduleId: ids[0], tick: '2026-01-01T00:20:00.000Z' });

    const metrics = (await fetch(`${a.manager.url}/metrics`).then((r) => r.text())).split('\n');
    const fires = metrics.find((l) =>
      l.startsWith('svc_queue_schedule_fires_total{outcome="task"}'),
    );
    assert.ok(fires && Number(fires.split(' ')[1]) >= ROUNDS * ids.length, fires);
    assert.ok(metrics.some((l) => /^svc_queue_schedules \d+/.test(l)));
    for (const id of ids) await call(a, 'DELETE', `/api/v1/queue/schedules/${id}`);
  });

  it('a deleted schedule fires no more', async () => {
    const s = await create(a, { cron: YEARLY });
    await sql`UPDATE queue_schedules SET next_run_at = now() - interval '5 seconds'
      WHERE schedule_id = ${s.scheduleId}`.execute(db());
    await waitFor('first tick fired', async () => (await tasksOf(s.scheduleId)).length === 1);
    const deleted = await call(b, 'DELETE', `/api/v1/queue/schedules/${s.scheduleId}`);
    assert.equal(deleted.status, 200, deleted.raw);
    assert.equal((await call(a, 'GET', `/api/v1/queue/schedules/${s.scheduleId}`)).status, 404);
    assert.equal((await call(a, 'DELETE', `/api/v1/queue/schedules/${s.scheduleId}`)).status, 404);
    // Many scans later (every 200 ms on both managers), still the one task.
    await new Promise((r) => setTimeout(r, 1_500));
    assert.equal((await tasksOf(s.scheduleId)).length, 1);
  });

  it('a tick whose template is refused when it fires moves on, the refusal shown on the schedule', async () => {
    const s = await create(a, { cron: '*/5 * * * *' });
    // Since created, the template's session is gone (a session deleted after the schedule).
    await sql`UPDATE queue_schedules
      SET template = template || '{"sessionRef":{"sessionId":"ses-gone-0001"}}'::jsonb,
        next_run_at = now() - interval '1 minute'
      WHERE schedule_id = ${s.scheduleId}`.execute(db());
    const shown = await waitFor('refusal recorded', async () => {
      const x = (await call(a, 'GET', `/api/v1/queue/schedules/${s.scheduleId}`)).body;
      return x.lastError ? x : null;
    });
    assert.match(shown.lastError.message, /made no task: .*ses-gone-0001/);
    assert.ok(new Date(shown.nextRunAt) > new Date());
    assert.equal(shown.lastTaskId, null);
    assert.equal((await tasksOf(s.scheduleId)).length, 0);
    const metrics = await fetch(`${b.manager.url}/metrics`).then((r) => r.text());
    assert.match(metrics, /svc_queue_schedule_fires_total\{outcome="refused"\} [1-9]/);
    await call(a, 'DELETE', `/api/v1/queue/schedules/${s.scheduleId}`);
  });

  it('a manager started after missed ticks fires one task for them, then the next future tick', async () => {
    // Both managers down; a schedule made while no scheduler ran, its last 3 hourly ticks missed.
    await b.close();
    await a.close();
    const off = await startTestManager({ store, env: { SVC_SCHEDULER: 'off' } });
    let s: any;
    try {
      await off.configureProfile('builtin-a');
      const res = await off.api('POST', '/api/v1/queue/schedules', {
        cron: '0 * * * *',
        task: taskBody(),
      });
      assert.equal(res.status, 201, res.raw);
      s = res.body;
      await sql`UPDATE queue_schedules
        SET next_run_at = date_trunc('hour', now()) - interval '3 hours'
        WHERE schedule_id = ${s.scheduleId}`.execute(off.manager.store.db);
    } finally {
      await off.close();
    }
    // The managers start again: both loops see the missed ticks at once.
    await startBoth();
    await waitFor('missed ticks fired', async () => (await tasksOf(s.scheduleId)).length > 0);
    await new Promise((r) => setTimeout(r, 1_000));
    assert.equal((await tasksOf(s.scheduleId)).length, 1);
    const shown = (await call(b, 'GET', `/api/v1/queue/schedules/${s.scheduleId}`)).body;
    const next = new Date(shown.nextRunAt).getTime();
    assert.ok(next > Date.now() && next <= Date.now() + 3_600_000, shown.nextRunAt);
    assert.equal(new Date(next).getUTCMinutes(), 0);
    assert.equal(shown.firedCount, 1);
  });

  it('each loop sleeps until the earliest next run, not until its slow scan', async () => {
    await b.close();
    await a.close();
    // A scan of a minute: only the timed wake-up can fire the tick within seconds.
    await startBoth({ SVC_SCHEDULER_SCAN_MS: '60000' });
    const s = await create(a, { cron: YEARLY });
    await sql`UPDATE queue_schedules SET next_run_at = now() + interval '1500 milliseconds'
      WHERE schedule_id = ${s.scheduleId}`.execute(db());
    // Any queue wake-up (here the one another replica sends) makes both loops plan again.
    await sql`SELECT pg_notify('svc_wake', 'queue')`.execute(db());
    const started = Date.now();
    await waitFor('tick fired', async () => (await tasksOf(s.scheduleId)).length === 1, 10_000);
    const took = Date.now() - started;
    assert.ok(took >= 1_000 && took < 5_000, `fired after ${took} ms`);
    const view = (await call(b, 'GET', '/api/v1/queue/scheduler')).body;
    assert.ok(view.nextWakeAt, JSON.stringify(view));
    await new Promise((r) => setTimeout(r, 500));
    assert.equal((await tasksOf(s.scheduleId)).length, 1);
  });
});
