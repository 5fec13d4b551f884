import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { realPostgresAvailable } from '@svc/testkit';
import { waitFor } from './e2e-helpers.js';
import {
  attemptCount,
  openByKey,
  startPair,
  submitTo,
  tasksLeft,
  type Pair,
} from './queue-controls-helpers.js';

/**
 * The scheduler's run-time controls with two managers on one database, both schedulers on,
 * runners that take their turns over real HTTP and end: concurrency keys, pause and resume,
 * limits set through one manager and honoured by the other.
 */
const skip = (await realPostgresAvailable()) ? false : 'needs a PostgreSQL server';

/** Sample `probe` every ~40 ms while `work` runs; returns the samples. */
async function sampling<T>(probe: () => Promise<T>, work: () => Promise<void>): Promise<T[]> {
  const samples: T[] = [];
  let on = true;
  const sampler = (async () => {
    while (on) {
      samples.push(await probe());
      await new Promise((r) => setTimeout(r, 40));
    }
  })();
  try {
    await work();
  } finally {
    on = false;
    await sampler;
  }
  return samples;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('queue controls across two managers', { skip }, () => {
  let pair: Pair;
  before(async () => {
    pair = await startPair({
      SVC_SCHEDULER_MAX_RUNNING: '10',
      SVC_TENANT_ALLOWLIST: 'tenant-a,tenant-z',
    });
  });
  after(() => pair?.close());

  const drained = async () => {
    await waitFor('every task to end', async () => (await tasksLeft(pair.a)) === 0, 120_000);
  };

  it('two managers draining one concurrency key never hold more than its limit', async () => {
    const { a, b } = pair;
    const TASKS = 24;
    for (let i = 0; i < TASKS; i++)
      await submitTo(pair, i % 2 === 0 ? a : b, {
        concurrencyKey: 'repo/main',
        concurrencyLimit: 2,
      });
    // A task of another key is not held back by this one.
    const other = await submitTo(pair, a, { concurrencyKey: 'repo/other' });
    const samples = await sampling(async () => {
      const [view, open] = await Promise.all([
        pair.http(b, 'GET', '/api/v1/queue/scheduler'),
        openByKey(a),
      ]);
      return { held: view.body.inUse.byKey['repo/main'] ?? 0, open: open['repo/main'] ?? 0 };
    }, drained);
    assert.ok(samples.length >= 20, `${samples.length} samples`);
    for (const s of samples) {
      assert.ok(s.held <= 2, `held slots of the key: ${JSON.stringify(s)}`);
      assert.ok(s.open <= 2, `open attempts of the key: ${JSON.stringify(s)}`);
    }
    assert.equal(Math.max(...samples.map((s) => s.held)), 2, 'the limit was reached');
    const { rows } = await sql<{ state: string; attempts: number; n: number }>`
      SELECT state, attempt_count AS attempts, count(*)::int AS n FROM queue_tasks
      GROUP BY 1, 2`.execute(a.manager.store.db);
    assert.deepEqual(rows, [{ state: 'completed', attempts: 1, n: TASKS + 1 }]);
    const shown = await pair.http(a, 'GET', `/api/v1/queue/tasks/${other.taskId}`);
    assert.equal(shown.body.concurrencyKey, 'repo/other');
    assert.equal(shown.body.concurrencyLimit, 1);
  });

  it('a task behind its key says so: the key, its limit and the slots in use', async () => {
    const { a, b } = pair;
    const first = await submitTo(pair, a, { concurrencyKey: 'k1' }, 'slow');
    await waitFor(
      'the first to start',
      async () =>
        (await pair.http(a, 'GET', `/api/v1/queue/tasks/${first.taskId}`)).body.state !== 'queued',
    );
    const second = await submitTo(pair, b, { concurrencyKey: 'k1' });
    for (const t of [a, b]) {
      const shown = (await pair.http(t, 'GET', `/api/v1/queue/tasks/${second.taskId}`)).body;
      assert.equal(shown.state, 'queued');
      assert.equal(shown.waiting.reason, 'concurrency-key', JSON.stringify(shown.waiting));
      assert.deepEqual(shown.waiting.limit, {
        scope: 'concurrency-key',
        key: 'k1',
        limit: 1,
        used: 1,
      });
      const listed = (await pair.http(t, 'GET', '/api/v1/queue/tasks?state=queued')).body;
      const row = listed.tasks.find((x: any) => x.taskId === second.taskId);
      assert.equal(row.waiting.reason, 'concurrency-key');
      assert.equal(row.concurrencyKey, 'k1');
    }
    // A task of the same key with a limit of its own, 2, starts beside the one slot held; the
    // task with limit 1 still waits.
    const roomier = await submitTo(pair, a, { concurrencyKey: 'k1', concurrencyLimit: 2 });
    await waitFor(
      'the task with limit 2 to start',
      async () =>
        (await pair.http(b, 'GET', `/api/v1/queue/tasks/${roomier.taskId}`)).body.state !==
        'queued',
    );
    assert.equal(
      (await pair.http(a, 'GET', `/api/v1/queue/tasks/${second.taskId}`)).body.state,
      'queued',
    );
    // A manual dispatch is held to the same key.
    const refused = await pair.http(b, 'POST', `/api/v1/queue/tasks/${second.taskId}/dispatch`, {});
    assert.equal(refused.status, 429, refused.raw);
    assert.equal(refused.body.details.scope, 'concurrency-key');
    await drained();
  });

  it('pause on one manager stops dispatch on both; resume on the other restarts it', async () => {
    const { a, b } = pair;
    // One at a time in this queue, so a backlog waits when the pause comes.
    const set = await pair.http(a, 'PUT', '/api/v1/queue/queues/pq/settings', { maxRunning: 1 });
    assert.equal(set.status, 200, set.raw);
    assert.deepEqual([set.body.maxRunning, set.body.paused], [1, false]);
    for (let i = 0; i < 6; i++) await submitTo(pair, i % 2 ? a : b, { queue: 'pq' });
    await waitFor('two attempts of pq', async () => (await attemptCount(a, 'pq')) >= 2);
    const paused = await pair.http(a, 'PUT', '/api/v1/queue/queues/pq/settings', { paused: true });
    assert.equal(paused.status, 200, paused.raw);
    // A field left out keeps its stored value.
    assert.deepEqual([paused.body.maxRunning, paused.body.paused], [1, true]);
    const atPause = await attemptCount(a, 'pq');
    // Tasks submitted after the pause, to both managers.
    const later = [
      await submitTo(pair, b, { queue: 'pq' }),
      await submitTo(pair, a, { queue: 'pq' }),
    ];
    // The submit's own answer says so, and names the way out.
    for (const t of later) {
      assert.equal(t.waiting.reason, 'queue-paused', JSON.stringify(t.waiting));
      assert.equal(t.next, 'queue resume pq');
    }
    // Many passes of both schedulers, and the attempts in flight end meanwhile.
    await sleep(2500);
    assert.equal(await attemptCount(a, 'pq'), atPause, 'no attempt created after the pause');
    const refused = await pair.http(
      b,
      'POST',
      `/api/v1/queue/tasks/${later[0].taskId}/dispatch`,
      {},
    );
    assert.equal(refused.status, 409, refused.raw);
    assert.equal(refused.body.failureKind, 'queue-paused');
    assert.equal(await attemptCount(a, 'pq'), atPause);
    for (const t of [a, b]) {
      const listed = (await pair.http(t, 'GET', '/api/v1/queue/tasks?queue=pq&state=queued')).body;
      assert.ok(listed.tasks.length >= 2);
      for (const task of listed.tasks)
        assert.equal(task.waiting.reason, 'queue-paused', JSON.stringify(task.waiting));
      const view = (await pair.http(t, 'GET', '/api/v1/queue/scheduler')).body;
      assert.deepEqual(
        view.queues.find((q: any) => q.queue === 'pq'),
        { queue: 'pq', maxRunning: 1, paused: true },
      );
      const stats = (await pair.http(t, 'GET', '/api/v1/queue/stats?queue=pq')).body;
      assert.deepEqual(stats.paused, ['pq']);
      const commander = (await pair.http(t, 'GET', '/api/v1/queue/commander')).body;
      assert.deepEqual(commander.paused, ['pq']);
    }
    const metrics = await fetch(`${a.manager.url}/metrics`).then((r) => r.text());
    assert.match(metrics, /svc_queue_paused\{queue="pq"\} 1/);

    const resumed = await pair.http(b, 'PUT', '/api/v1/queue/queues/pq/settings', {
      paused: false,
    });
    assert.deepEqual([resumed.body.maxRunning, resumed.body.paused], [1, false]);
    await drained();
    const { rows } = await sql<{ state: string; n: number }>`
      SELECT state, count(*)::int AS n FROM queue_tasks WHERE queue = 'pq' GROUP BY 1`.execute(
      a.manager.store.db,
    );
    assert.deepEqual(rows, [{ state: 'completed', n: 8 }]);
  });

  it('limits set through one manager are honoured by the other, and come back to configuration', async () => {
    const { a, b } = pair;
    const set = await pair.http(a, 'PUT', '/api/v1/queue/limits', { global: 1 });
    assert.equal(set.status, 200, set.raw);
    assert.equal(set.body.global, 1);
    assert.equal(set.body.sources.global, 'stored');
    const seen = (await pair.http(b, 'GET', '/api/v1/queue/scheduler')).body.limits;
    assert.deepEqual([seen.global, seen.sources.global], [1, 'stored']);
    for (let i = 0; i < 6; i++) await submitTo(pair, b);
    const samples = await sampling(async () => {
      const { rows } = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM queue_attempts WHERE state IN ('dispatched', 'running')`.execute(
        a.manager.store.db,
      );
      return rows[0]!.n;
    }, drained);
    assert.ok(Math.max(...samples) <= 1, `open attempts: ${Math.max(...samples)}`);

    // A tenant held at 0 through one manager waits, says so, and starts once removed.
    const zero = await pair.http(b, 'PUT', '/api/v1/queue/limits', {
      global: null,
      tenants: { 'tenant-z': 0 },
    });
    assert.equal(zero.status, 200, zero.raw);
    assert.deepEqual([zero.body.global, zero.body.sources.global], [10, 'configured']);
    assert.deepEqual(
      [zero.body.tenants['tenant-z'], zero.body.sources.tenants['tenant-z']],
      [0, 'stored'],
    );
    const held = await submitTo(pair, a, { tenantId: 'tenant-z' });
    await sleep(1000);
    const shown = (await pair.http(a, 'GET', `/api/v1/queue/tasks/${held.taskId}`)).body;
    assert.equal(shown.state, 'queued');
    assert.equal(shown.waiting.reason, 'capacity');
    assert.deepEqual(shown.waiting.limit, { scope: 'tenant', key: 'tenant-z', limit: 0, used: 0 });
    const removed = await pair.http(a, 'PUT', '/api/v1/queue/limits', {
      tenants: { 'tenant-z': null },
    });
    assert.equal(removed.body.tenants['tenant-z'], undefined);
    await drained();
  });

  it('refuses bad controls with a 400 and changes nothing', async () => {
    const { a } = pair;
    const before = (await pair.http(a, 'GET', '/api/v1/queue/scheduler')).body;
    const tasksBefore = await sql<{
      n: number;
    }>`SELECT count(*)::int AS n FROM queue_tasks`.execute(a.manager.store.db);
    const bad: Array<[string, string, unknown]> = [
      ['PUT', '/api/v1/queue/queues/pq/settings', {}],
      ['PUT', '/api/v1/queue/queues/pq/settings', { paused: 'yes' }],
      ['PUT', '/api/v1/queue/queues/pq/settings', { paused: true, extra: 1 }],
      ['PUT', '/api/v1/queue/queues/pq/settings', { maxRunning: -1, paused: true }],
      ['PUT', '/api/v1/queue/queues/Bad Queue/settings', { paused: true }],
      ['PUT', '/api/v1/queue/limits', {}],
      ['PUT', '/api/v1/queue/limits', { global: -1 }],
      ['PUT', '/api/v1/queue/limits', { global: 1.5 }],
      ['PUT', '/api/v1/queue/limits', { global: '3' }],
      ['PUT', '/api/v1/queue/limits', { global: 3, perTenant: 2 }],
      ['PUT', '/api/v1/queue/limits', { tenants: { 'tenant-a': -2 } }],
      ['PUT', '/api/v1/queue/limits', { tenants: 'tenant-a=2' }],
      ['PUT', '/api/v1/queue/limits', { tenants: { 'bad name!': 2 } }],
      ['PUT', '/api/v1/queue/limits', { global: 5, profiles: { 'builtin-a': 100_001 } }],
      ['PUT', '/api/v1/queue/limits', { profileRates: { 'builtin-a': 0 } }],
      ['PUT', '/api/v1/queue/limits', { global: 5, profileRates: { 'builtin-a': -1 } }],
    ];
    const task = (extra: Record<string, unknown>) => ({
      tenantId: 'tenant-a',
      projectId: 'proj-1',
      queue: 'main',
      title: 'bad',
      payload: { prompt: 'x' },
      ...extra,
    });
    bad.push(
      ['POST', '/api/v1/queue/tasks', task({ concurrencyLimit: 2 })],
      ['POST', '/api/v1/queue/tasks', task({ concurrencyKey: '' })],
      ['POST', '/api/v1/queue/tasks', task({ concurrencyKey: 'k'.repeat(201) })],
      ['POST', '/api/v1/queue/tasks', task({ concurrencyKey: 'a\nb' })],
      ['POST', '/api/v1/queue/tasks', task({ concurrencyKey: 7 })],
      ['POST', '/api/v1/queue/tasks', task({ concurrencyKey: 'k', concurrencyLimit: 0 })],
      ['POST', '/api/v1/queue/tasks', task({ concurrencyKey: 'k', concurrencyLimit: 1.5 })],
    );
    for (const [method, path, body] of bad) {
      const res = await pair.http(a, method, path.replace(' ', '%20'), body);
      assert.equal(res.status, 400, `${method} ${path} ${JSON.stringify(body)}: ${res.raw}`);
      assert.equal(res.body.failureKind, 'schema-invalid', res.raw);
      assert.ok(res.body.message.length > 0);
    }
    const after = (await pair.http(a, 'GET', '/api/v1/queue/scheduler')).body;
    assert.deepEqual(after.limits, before.limits);
    assert.deepEqual(after.queues, before.queues);
    const tasksAfter = await sql<{ n: number }>`SELECT count(*)::int AS n FROM queue_tasks`.execute(
      a.manager.store.db,
    );
    assert.equal(tasksAfter.rows[0]!.n, tasksBefore.rows[0]!.n);
    // The longest key is taken.
    const long = await pair.http(a, 'POST', '/api/v1/queue/tasks', {
      ...task({ concurrencyKey: 'k'.repeat(200), dryRun: true }),
    });
    assert.equal(long.status, 200, long.raw);
  });
});

describe('a profile start rate', { skip }, () => {
  let pair: Pair;
  before(async () => {
    // A scan far away: only the scheduler's own wake-up at the rate's time starts more.
    pair = await startPair({ SVC_SCHEDULER_MAX_RUNNING: '10', SVC_SCHEDULER_SCAN_MS: '600000' });
  });
  after(() => pair?.close());

  it('starts exactly N a minute, says when the rest can start, and wakes itself then', async () => {
    const { a, b } = pair;
    const set = await pair.http(a, 'PUT', '/api/v1/queue/limits', {
      profileRates: { 'builtin-a': 3 },
    });
    assert.equal(set.status, 200, set.raw);
    assert.deepEqual(set.body.profileRates, { 'builtin-a': 3 });
    const tasks = [];
    for (let i = 0; i < 7; i++) tasks.push(await submitTo(pair, i % 2 ? a : b));
    await waitFor('three to end', async () => (await tasksLeft(a)) === 4, 30_000);
    await sleep(1500);
    assert.equal(await attemptCount(a), 3, 'exactly three started');
    const firstStart = (
      await sql<{ at: Date }>`SELECT min(created_at) AS at FROM queue_attempts`.execute(
        a.manager.store.db,
      )
    ).rows[0]!.at;
    const queued = (await pair.http(b, 'GET', '/api/v1/queue/tasks?state=queued')).body.tasks;
    assert.equal(queued.length, 4);
    for (const t of queued) {
      assert.equal(t.waiting.reason, 'profile-rate', JSON.stringify(t.waiting));
      assert.deepEqual(t.waiting.limit, {
        scope: 'profile-rate',
        key: 'builtin-a',
        limit: 3,
        used: 3,
      });
      const until = new Date(t.waiting.until).getTime();
      assert.ok(
        until > Date.now() && until <= new Date(firstStart).getTime() + 61_000,
        t.waiting.until,
      );
    }
    const view = (await pair.http(a, 'GET', '/api/v1/queue/scheduler')).body;
    assert.equal(view.rates.length, 1);
    assert.deepEqual(
      [view.rates[0].profile, view.rates[0].perMinute, view.rates[0].startsLastMinute],
      ['builtin-a', 3, 3],
    );
    const nextStart = new Date(view.rates[0].nextStartAt).getTime();
    assert.ok(nextStart > Date.now());
    // A manual dispatch is held to the rate too.
    const refused = await pair.http(
      a,
      'POST',
      `/api/v1/queue/tasks/${queued[0].taskId}/dispatch`,
      {},
    );
    assert.equal(refused.status, 429, refused.raw);
    assert.equal(refused.body.details.scope, 'profile-rate');
    // The scheduler wakes itself when the window has room (its scan is ten minutes away).
    await waitFor(
      'three more to start after the minute',
      async () => (await attemptCount(a)) === 6,
      nextStart - Date.now() + 20_000,
    );
    const starts = await sql<{ at: Date }>`
      SELECT created_at AS at FROM queue_attempts ORDER BY created_at`.execute(a.manager.store.db);
    const fourth = new Date(starts.rows[3]!.at).getTime();
    assert.ok(fourth >= nextStart - 50, `the fourth started at ${fourth}, not before ${nextStart}`);
    await sleep(1000);
    assert.equal(await attemptCount(a), 6, 'no more than three in the new minute');
  });
});

describe('a held-back task never holds back the work behind it', { skip }, () => {
  // The scan comes once a minute: whatever starts here starts from the claims alone.
  let pair: Pair;
  before(async () => {
    pair = await startPair({ SVC_SCHEDULER_MAX_RUNNING: '3', SVC_SCHEDULER_SCAN_MS: '60000' });
  });
  after(() => pair?.close());

  const stateOf = async (taskId: string) =>
    (await pair.http(pair.b, 'GET', `/api/v1/queue/tasks/${taskId}`)).body.state as string;
  const started = async (tasks: Array<{ taskId: string }>) =>
    (await Promise.all(tasks.map((t) => stateOf(t.taskId)))).filter((s) => s !== 'queued').length;
  const settings = (queue: string, body: Record<string, unknown>) =>
    pair.http(pair.a, 'PUT', `/api/v1/queue/queues/${queue}/settings`, body);

  it('tasks of one key ahead in the queue: one starts, the others behind them start at once', async () => {
    const { a } = pair;
    assert.equal((await settings('hk', { paused: true })).status, 200);
    // More tasks of the key than the room there is, all ahead of the others.
    const keyed: Array<{ taskId: string }> = [];
    for (let i = 0; i < 4; i++)
      keyed.push(await submitTo(pair, a, { queue: 'hk', concurrencyKey: 'repo/hk' }, 'slow'));
    const others = [
      await submitTo(pair, a, { queue: 'hk' }, 'slow'),
      await submitTo(pair, a, { queue: 'hk' }, 'slow'),
    ];
    assert.equal(await started([...keyed, ...others]), 0);
    assert.equal((await settings('hk', { paused: false })).status, 200);
    await waitFor(
      'the tasks behind the key to start',
      async () => (await started(others)) === 2,
      4_000,
    );
    assert.equal(await started(keyed), 1, 'one of the key, as its limit says');
    await waitFor('every task to end', async () => (await tasksLeft(a)) === 0, 120_000);
  });

  it('a full queue ahead of another: the other queue starts at once', async () => {
    const { a } = pair;
    assert.equal((await settings('narrow', { maxRunning: 1, paused: true })).status, 200);
    assert.equal((await settings('wide', { paused: true })).status, 200);
    const narrow: Array<{ taskId: string }> = [];
    for (let i = 0; i < 4; i++) narrow.push(await submitTo(pair, a, { queue: 'narrow' }, 'slow'));
    const wide = [
      await submitTo(pair, a, { queue: 'wide' }, 'slow'),
      await submitTo(pair, a, { queue: 'wide' }, 'slow'),
    ];
    assert.equal((await settings('narrow', { paused: false })).status, 200);
    await waitFor(
      'one of the narrow queue to start',
      async () => (await started(narrow)) === 1,
      4_000,
    );
    // The narrow queue's waiting tasks come first in line, and there is room for three.
    assert.equal((await settings('wide', { paused: false })).status, 200);
    await waitFor('the wide queue to start', async () => (await started(wide)) === 2, 4_000);
    assert.equal(await started(narrow), 1, 'the narrow queue holds to its limit');
    await waitFor('every task to end', async () => (await tasksLeft(a)) === 0, 120_000);
  });
});
