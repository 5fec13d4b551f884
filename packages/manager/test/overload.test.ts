import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { EVENT_NAMES } from '@svc/contracts';
import { ConfigError } from '@svc/contracts';
import { EventSink, ManagerClient, SINK_MAX_EVENTS } from '@svc/runner';
import { loadConfig } from '../src/config.js';
import { realPostgresAvailable } from '@svc/testkit';
import { admissionInFlight, admissionRefused } from '../src/metrics/registry.js';
import { runBody, startTestManager, type TestManager } from './helpers.js';

const skip = (await realPostgresAvailable())
  ? false
  : 'needs a PostgreSQL server: a second connection holds run rows locked';

/** Over real HTTP: status, body, headers and how long the answer took. */
async function call(
  t: TestManager,
  method: string,
  path: string,
  body?: unknown,
  token?: string,
): Promise<{ status: number; body: any; headers: Headers; ms: number }> {
  const started = performance.now();
  const response = await fetch(`${t.manager.url}${path}`, {
    method,
    headers: {
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(token ? { 'x-lease-token': token } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  return {
    status: response.status,
    body: text ? JSON.parse(text) : undefined,
    headers: response.headers,
    ms: performance.now() - started,
  };
}

interface Claimed {
  runId: string;
  runnerId: string;
  token: string;
}

async function claimedRun(t: TestManager, runnerId: string): Promise<Claimed> {
  const run = await call(t, 'POST', '/api/v1/runs', runBody());
  assert.equal(run.status, 201, JSON.stringify(run.body));
  const claim = await call(t, 'POST', `/api/v1/runs/${run.body.runId}/claim`, { runnerId });
  assert.equal(claim.status, 200, JSON.stringify(claim.body));
  return { runId: run.body.runId, runnerId, token: claim.body.leaseToken };
}

const append = (t: TestManager, run: Claimed, events: unknown[]) =>
  call(
    t,
    'POST',
    `/api/v1/runs/${run.runId}/events`,
    { runnerId: run.runnerId, events },
    run.token,
  );

const event = (key: string, extra: Record<string, unknown> = {}) => ({
  key,
  category: 'backend_status',
  data: { key, ...extra },
});

/**
 * Appends that cannot finish: their runs' rows are locked by another connection (as a slow
 * disk or a long transaction would hold them), so they keep their places and connections until
 * `release`.
 */
async function stuckAppends(t: TestManager, runs: Claimed[]) {
  if (t.store.kind !== 'postgres') throw new Error('needs PostgreSQL');
  const locker = new pg.Client({ connectionString: t.store.url });
  await locker.connect();
  await locker.query('BEGIN');
  await locker.query('SELECT 1 FROM runs WHERE run_id = ANY ($1) FOR UPDATE', [
    runs.map((r) => r.runId),
  ]);
  const answers = runs.map((run) => append(t, run, [event(`stuck-${run.runId}`)]));
  return {
    answers,
    async release() {
      await locker.query('COMMIT');
      await locker.end();
      return Promise.all(answers);
    },
  };
}

async function until(condition: () => boolean | Promise<boolean>, what: string, ms = 15_000) {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const inFlight = async (lane: string) =>
  (await admissionInFlight.get()).values.find((v) => v.labels.lane === lane)?.value ?? 0;

const refusedSoFar = async (lane: string) =>
  (await admissionRefused.get()).values
    .filter((v) => v.labels.lane === lane)
    .reduce((sum, v) => sum + v.value, 0);

describe('admission control under a saturated manager', { skip }, () => {
  let t: TestManager;
  before(async () => {
    t = await startTestManager({
      listen: true,
      env: {
        // Two connections for everything but the lease lane, four places for runner calls.
        SVC_DB_POOL_SIZE: '2',
        SVC_ADMISSION_RUNNER_PLACES: '4',
        SVC_ADMISSION_QUEUE_MS: '50',
      },
    });
    await t.configureProfile('builtin-a');
  });
  after(() => t?.close());

  it('renews leases and grants claims at once while appends hold every place and connection', async () => {
    const stuck = await Promise.all([0, 1, 2, 3].map((i) => claimedRun(t, `rnr-stuck${i}x`)));
    const busy = await claimedRun(t, 'rnr-busy1x');
    const spare = await call(t, 'POST', '/api/v1/runs', runBody());
    const before = await refusedSoFar('runner');
    const blocked = await stuckAppends(t, stuck);
    // Every runner place is taken by an append that waits on its run's row.
    await until(async () => (await inFlight('runner')) === 4, 'the runner lane to be full');

    // Another runner's append: refused at once, told when to come back, counted.
    const refused = await append(t, busy, [event('b-1')]);
    assert.equal(refused.status, 503);
    assert.equal(refused.body.failureKind, 'overloaded');
    assert.equal(refused.body.details.lane, 'runner');
    const retryAfter = Number(refused.headers.get('retry-after'));
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 10, `${retryAfter}`);
    assert.equal(refused.body.details.retryAfterMs, retryAfter * 1000);
    assert.ok(refused.ms < 1000, `refused after ${refused.ms.toFixed(0)} ms`);
    assert.ok((await refusedSoFar('runner')) >= before + 1);

    // The lease lane is served meanwhile: renewals of busy runners and a new claim.
    for (let i = 0; i < 5; i++) {
      const renewed = await call(
        t,
        'PATCH',
        `/api/v1/runs/${busy.runId}/lease`,
        { runnerId: busy.runnerId },
        busy.token,
      );
      assert.equal(renewed.status, 200, JSON.stringify(renewed.body));
      assert.ok(renewed.ms < 1000, `renewal took ${renewed.ms.toFixed(0)} ms`);
    }
    const claim = await call(t, 'POST', `/api/v1/runs/${spare.body.runId}/claim`, {
      runnerId: 'rnr-late1x',
    });
    assert.equal(claim.status, 200, JSON.stringify(claim.body));
    assert.ok(claim.ms < 1000, `claim took ${claim.ms.toFixed(0)} ms`);

    // The overload ends: the held appends land, and the refused runner gets through.
    const answers = await blocked.release();
    for (const answer of answers) assert.equal(answer.status, 200, JSON.stringify(answer.body));
    await until(async () => (await append(t, busy, [event('b-1')])).status === 200, 'a place');
    const page = await call(t, 'GET', `/api/v1/runs/${busy.runId}/events?limit=100`);
    const keys = page.body.events.map((e: any) => e.data.key).filter(Boolean);
    assert.deepEqual(keys, ['b-1'], 'refused appends stored nothing');
  });

  it('refuses client calls of a full lane with 503 too, and never a health probe', async () => {
    const closing = await startTestManager({
      listen: true,
      store: t.store,
      env: { SVC_ADMISSION_CLIENT_PLACES: '1', SVC_ADMISSION_QUEUE_MS: '0' },
    });
    try {
      await closing.configureProfile('builtin-a');
      // A long-poll for a run's events gives its place back while it waits.
      const run = await call(closing, 'POST', '/api/v1/runs', runBody());
      assert.equal(run.status, 201, JSON.stringify(run.body));
      const waiting = call(closing, 'GET', `/api/v1/runs/${run.body.runId}/events?waitMs=1500`);
      await new Promise((r) => setTimeout(r, 200));
      const read = await call(closing, 'GET', `/api/v1/runs/${run.body.runId}/result`);
      assert.equal(read.status, 200, JSON.stringify(read.body));
      assert.equal((await waiting).status, 200);
      // Many at once on one place: some wait out their turn, the rest are refused at once.
      const burst = await Promise.all(
        Array.from({ length: 20 }, () =>
          call(closing, 'GET', `/api/v1/runs/${run.body.runId}/result`),
        ),
      );
      const refused = burst.filter((r) => r.status === 503);
      assert.ok(refused.length > 0, 'a full client lane refuses');
      for (const r of refused) assert.equal(r.body.failureKind, 'overloaded');
      // Refusing many calls per call served, the lane asks them to come back later than 1 s.
      const waits = refused.map((r) => Number(r.headers.get('retry-after')));
      assert.ok(Math.max(...waits) >= 2 && Math.max(...waits) <= 10, waits.join(','));
      assert.equal(
        burst.filter((r) => r.status !== 503 && r.status !== 200).length,
        0,
        'nothing but served or refused',
      );
      const health = await fetch(`${closing.manager.url}/health/readiness`);
      assert.equal(health.status, 200);
    } finally {
      await closing.close();
    }
  });
});

describe('a runner refused for load', { skip }, () => {
  let t: TestManager;
  before(async () => {
    t = await startTestManager({
      listen: true,
      env: { SVC_ADMISSION_RUNNER_PLACES: '1', SVC_ADMISSION_QUEUE_MS: '0' },
    });
    await t.configureProfile('builtin-a');
  });
  after(() => t?.close());

  it('keeps its events, sends them later in order, each exactly once, and reports the throttling', async () => {
    const other = await claimedRun(t, 'rnr-other1x');
    const run = await call(t, 'POST', '/api/v1/runs', runBody());
    const runId: string = run.body.runId;
    // The runner's own client and event sink, as the runner process uses them.
    const client = new ManagerClient(t.manager.url, null, runId);
    await client.claim('rnr-sink1x', null);
    const sink = new EventSink(client, 'rnr-sink1x', 'att-1');
    const push = (i: number) =>
      sink.push({ category: 'command_output', name: 'exec', data: { i, text: `line ${i}` } });

    for (let i = 0; i < 5; i++) push(i);
    await sink.flush();
    // The one runner place is held by another run's append: the sink is refused.
    const blocked = await stuckAppends(t, [other]);
    for (let i = 5; i < 40; i++) push(i);
    await until(() => client.throttling.throttled, 'the sink to be refused');
    // It keeps producing while it waits; nothing is lost.
    for (let i = 40; i < 60; i++) push(i);
    assert.ok(sink.buffered >= 55, `buffered ${sink.buffered}`);
    const [held] = await blocked.release();
    assert.equal(held!.status, 200);
    await sink.flush();
    assert.equal(sink.buffered, 0);

    const page = await call(t, 'GET', `/api/v1/runs/${runId}/events?limit=1000`);
    const events: any[] = page.body.events;
    const seqs = events.map((e) => e.seq);
    assert.deepEqual(
      seqs,
      seqs.map((_, i) => seqs[0] + i),
      'seqs without gaps',
    );
    const output = events.filter((e) => e.category === 'command_output');
    assert.deepEqual(
      output.map((e) => e.data.i),
      Array.from({ length: 60 }, (_, i) => i),
      'every event once, in push order',
    );
    const throttled = events.filter((e) => e.name === EVENT_NAMES.throttled);
    assert.equal(throttled.length, 1, 'one report of the throttled period');
    const report = throttled[0].data;
    assert.equal(throttled[0].category, 'system');
    assert.ok(report.reasons.overloaded >= 1, JSON.stringify(report));
    assert.ok(report.calls.events >= 1, JSON.stringify(report));
    assert.ok(report.bufferedEventsMax >= 55, JSON.stringify(report));
    assert.ok(Date.parse(report.until) >= Date.parse(report.since));
    assert.ok(throttled[0].seq > output.at(-1).seq - 60, 'reported with the run, after the wait');
  });
});

describe('a runner refused for load, past its buffer', { skip }, () => {
  let t: TestManager;
  before(async () => {
    t = await startTestManager({
      listen: true,
      env: { SVC_ADMISSION_RUNNER_PLACES: '1', SVC_ADMISSION_QUEUE_MS: '0' },
    });
    await t.configureProfile('builtin-a');
  });
  after(() => t?.close());

  it('asks its producer to pause past the bound, resumes it as the manager catches up, loses nothing', async () => {
    const other = await claimedRun(t, 'rnr-other2x');
    const run = await call(t, 'POST', '/api/v1/runs', runBody());
    const runId: string = run.body.runId;
    const client = new ManagerClient(t.manager.url, null, runId);
    await client.claim('rnr-full1x', null);
    const sink = new EventSink(client, 'rnr-full1x', 'att-2');
    const pressure: boolean[] = [];
    sink.onPressure((full) => pressure.push(full));
    const blocked = await stuckAppends(t, [other]);
    sink.push({ category: 'command_output', data: { i: 0 } });
    await until(() => client.throttling.throttled, 'the sink to be refused');
    const total = SINK_MAX_EVENTS + 50;
    for (let i = 1; i < total; i++) sink.push({ category: 'command_output', data: { i } });
    assert.deepEqual(pressure, [true], 'past the bound: pause');
    await blocked.release();
    await sink.flush();
    assert.deepEqual(pressure, [true, false], 'room again: resume');
    const stored: number[] = [];
    for (let after = 0; ;) {
      const page = await call(
        t,
        'GET',
        `/api/v1/runs/${runId}/events?afterSeq=${after}&limit=1000`,
      );
      for (const e of page.body.events) if (e.category === 'command_output') stored.push(e.data.i);
      if (!page.body.hasMore) break;
      after = page.body.nextAfterSeq;
    }
    assert.equal(stored.length, total);
    assert.ok(
      stored.every((value, i) => value === i),
      'each once, in push order',
    );
  });
});

describe('overload settings', () => {
  it('default to admission on, a 100 ms budget, 128 and 64 places, four groups on four connections, a lease pool of 2', () => {
    const config = loadConfig({ DATABASE_URL: 'postgres://u@127.0.0.1:5432/db' });
    assert.deepEqual(config.admission, {
      enabled: true,
      queueBudgetMs: 100,
      runnerPlaces: 128,
      clientPlaces: 64,
    });
    assert.equal(config.writeGroups, 4);
    assert.equal(config.store.kind === 'postgres' && config.store.leasePoolSize, 2);
    assert.equal(config.store.kind === 'postgres' && config.store.writePoolSize, 4);
  });

  it('refuses values out of range, naming each', () => {
    assert.throws(
      () =>
        loadConfig({
          SVC_ADMISSION: 'maybe',
          SVC_ADMISSION_QUEUE_MS: '-1',
          SVC_ADMISSION_RUNNER_PLACES: '0',
          SVC_WRITE_GROUPS: '1000',
        }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        for (const name of [
          'SVC_ADMISSION',
          'SVC_ADMISSION_QUEUE_MS',
          'SVC_ADMISSION_RUNNER_PLACES',
          'SVC_WRITE_GROUPS',
        ])
          assert.match(error.message, new RegExp(name));
        return true;
      },
    );
  });
});
