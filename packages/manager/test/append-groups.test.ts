import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pg from 'pg';
import { realPostgresAvailable, type TestStore } from '@svc/testkit';
import { tokenHash } from '../src/domain/caller-tokens.js';
import { runnerEvents } from '../src/domain/runs/events.js';
import { writeGroupSize } from '../src/metrics/registry.js';
import { appendFresh, appendFreshGroup } from '../src/store/append-fresh.js';
import { renewLeases, type RenewedRun } from '../src/store/heartbeats.js';
import { plantTrigger, runBody, startTestManager, type TestManager } from './helpers.js';

/**
 * Appends and lease renewals of many runners arriving together share a statement and a
 * commit (group commit, store/coalescer.ts). Each request keeps its own guarantees: a batch
 * lands whole, in order, once (a retry gets the seqs of the first attempt), seqs stay
 * gap-free per run, and one runner's refused or failing request fails no other.
 */

async function call(t: TestManager, method: string, path: string, body?: unknown, token?: string) {
  const response = await fetch(`${t.manager.url}${path}`, {
    method,
    headers: {
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...(token ? { 'x-lease-token': token } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

/** Coalesced groups of `kind` so far with more than one request in them. */
async function sharedGroups(kind: string): Promise<number> {
  const values = (await writeGroupSize.get()).values.filter((v) => v.labels.kind === kind);
  const count = values.find((v) => v.metricName?.endsWith('_count'))?.value ?? 0;
  const alone =
    values.find((v) => v.metricName?.endsWith('_bucket') && (v.labels as { le?: unknown }).le === 1)
      ?.value ?? 0;
  return count - alone;
}

interface Runner {
  runId: string;
  runnerId: string;
  token: string;
  commandId: string;
}

async function fleet(t: TestManager, count: number): Promise<Runner[]> {
  const runners: Runner[] = [];
  for (let i = 0; i < count; i++) {
    const run = await call(t, 'POST', '/api/v1/runs', runBody());
    assert.equal(run.status, 201, JSON.stringify(run.body));
    const runId: string = run.body.runId;
    const command = await call(t, 'POST', `/api/v1/runs/${runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'go' },
    });
    const runnerId = `rnr-group${i}x`;
    const claim = await call(t, 'POST', `/api/v1/runs/${runId}/claim`, { runnerId });
    assert.equal(claim.status, 200, JSON.stringify(claim.body));
    runners.push({
      runId,
      runnerId,
      token: claim.body.leaseToken,
      commandId: command.body.commandId,
    });
  }
  return runners;
}

const batchOf = (r: Runner, i: number, b: number, extra: Record<string, unknown> = {}) =>
  Array.from({ length: 10 }, (_, k) => ({
    key: `r${i}-b${b}-${k}`,
    commandId: r.commandId,
    category: 'command_output' as const,
    data: { i, b, k, ...extra },
  }));

/**
 * `shared`: whether requests must be seen sharing a commit. The embedded store runs each query
 * on the event loop itself, start to end, so nothing arrives while a group is out: its groups
 * stay at one request (the group statement is checked on it directly below).
 */
async function appendStorm(t: TestManager, runners: Runner[], batches: number, shared = true) {
  const before = await sharedGroups('append');
  const remove = await plantTrigger(t.manager.store.db, {
    name: 'svc_test_poison',
    before: 'INSERT',
    table: 'events',
    body: `IF NEW.data ? 'poison' THEN RAISE EXCEPTION 'poisoned row'; END IF; RETURN NEW;`,
  });
  try {
    const append = (r: Runner, events: unknown[], token = r.token) =>
      call(t, 'POST', `/api/v1/runs/${r.runId}/events`, { runnerId: r.runnerId, events }, token);
    const good: Array<Promise<{ i: number; b: number; answers: any[] }>> = [];
    const bad: Array<Promise<{ i: number; kind: string; answer: any }>> = [];
    runners.forEach((r, i) => {
      for (let b = 0; b < batches; b++) {
        const events = batchOf(r, i, b);
        // The same batch twice at once, as a runner retrying after a lost answer would.
        good.push(
          Promise.all([append(r, events), append(r, events)]).then((answers) => ({
            i,
            b,
            answers,
          })),
        );
      }
      const other = runners[(i + 1) % runners.length]!;
      const refusals: Array<[string, unknown[], string?]> = [
        ['lease', batchOf(r, i, 90), 'not-the-token'],
        ['command', batchOf({ ...r, commandId: other.commandId }, i, 91)],
        ['poison', batchOf(r, i, 92, { poison: true })],
      ];
      const [kind, events, token] = refusals[i % refusals.length]!;
      bad.push(append(r, events, token).then((answer) => ({ i, kind, answer })));
    });
    const [goods, bads] = await Promise.all([Promise.all(good), Promise.all(bad)]);

    for (const { i, kind, answer } of bads) {
      const expected = { lease: 409, command: 400, poison: 500 }[kind];
      assert.equal(answer.status, expected, `run ${i} ${kind}: ${JSON.stringify(answer.body)}`);
    }
    const seqOf = new Map<string, number>();
    for (const { i, b, answers } of goods) {
      for (const answer of answers) {
        assert.equal(answer.status, 200, `run ${i} batch ${b}: ${JSON.stringify(answer.body)}`);
        for (const e of answer.body.events) {
          const known = seqOf.get(`${i}:${e.key}`);
          if (known !== undefined) assert.equal(e.seq, known, `a retry answers the first seqs`);
          seqOf.set(`${i}:${e.key}`, e.seq);
        }
      }
      // Exactly one of the two stored the batch; the other found it stored.
      assert.deepEqual(answers.map((a) => a.body.appended).sort(), [0, 10]);
    }
    for (const [i, r] of runners.entries()) {
      const page = await call(t, 'GET', `/api/v1/runs/${r.runId}/events?limit=1000`);
      const events: any[] = page.body.events;
      assert.deepEqual(
        events.map((e) => e.seq),
        events.map((_, n) => n + 1),
        `run ${i}: seqs from 1 without gaps`,
      );
      const output = events.filter((e) => e.category === 'command_output');
      assert.equal(output.length, batches * 10, `run ${i}: every good event once, no bad one`);
      for (let b = 0; b < batches; b++) {
        const batch = output.filter((e) => e.data.b === b);
        assert.deepEqual(
          batch.map((e) => e.data.k),
          Array.from({ length: 10 }, (_, k) => k),
        );
        assert.deepEqual(
          batch.map((e) => e.seq),
          batch.map((_, k) => batch[0].seq + k),
          `run ${i} batch ${b} whole and contiguous`,
        );
      }
      const result = await call(t, 'GET', `/api/v1/runs/${r.runId}/commands/${r.commandId}/result`);
      assert.equal(result.body.scopedEventCount, batches * 10, `run ${i}: per-command counters`);
    }
  } finally {
    await remove();
  }
  if (shared)
    assert.ok((await sharedGroups('append')) > before, 'appends arriving together shared a commit');
}

async function renewalStorm(t: TestManager, runners: Runner[], shared = true) {
  const before = await sharedGroups('renewal');
  const renew = (r: Runner, token = r.token) =>
    call(t, 'PATCH', `/api/v1/runs/${r.runId}/lease`, { runnerId: r.runnerId }, token);
  const first = await Promise.all(runners.map((r) => renew(r)));
  const answers = await Promise.all(
    runners.flatMap((r, i) => [renew(r), renew(r), renew(r, i === 0 ? 'stale-token' : r.token)]),
  );
  answers.forEach((answer, n) => {
    const wrong = n === 2;
    assert.equal(answer.status, wrong ? 409 : 200, JSON.stringify(answer.body));
    if (wrong) assert.equal(answer.body.failureKind, 'runner-lease-conflict');
  });
  runners.forEach((r, i) => {
    const later = answers[i * 3]!.body.lease.expiresAt;
    assert.ok(Date.parse(later) >= Date.parse(first[i]!.body.lease.expiresAt), 'extended');
    assert.equal(answers[i * 3]!.body.lease.owner, r.runnerId);
  });
  if (shared)
    assert.ok(
      (await sharedGroups('renewal')) > before,
      'renewals arriving together shared a commit',
    );
}

/** The group statements themselves: one outcome per request, as each alone would get. */
async function groupStatements(t: TestManager, runners: Runner[]) {
  const db = t.manager.store.db;
  const [a, b, c, d] = runners;
  const fresh = (r: Runner, i: number, batch: number, token = r.token) => ({
    runId: r.runId,
    runnerId: r.runnerId,
    tokenHash: tokenHash(token),
    events: runnerEvents(batchOf(r, i, batch)),
    wakeKey: `events:${r.runId}`,
  });
  const stored = await appendFresh(db, fresh(d!, 3, 300));
  assert.ok(stored !== null);
  const firsts = await appendFreshGroup(db, [
    fresh(a!, 0, 200),
    fresh(b!, 1, 200, 'wrong-token'),
    fresh(c!, 2, 200),
    fresh(d!, 3, 300), // its keys are stored: the general path answers it
    { ...fresh(a!, 0, 201), runId: 'run-doesnotexist0' },
  ]);
  assert.equal(firsts.length, 5);
  assert.equal(firsts[1], null);
  assert.equal(firsts[3], null);
  assert.equal(firsts[4], null);
  for (const [n, r] of [
    [0, a!],
    [2, c!],
  ] as const) {
    const page = await call(t, 'GET', `/api/v1/runs/${r.runId}/events?limit=1000`);
    const batch = page.body.events.filter((e: any) => e.data.b === 200);
    assert.deepEqual(
      batch.map((e: any) => e.seq),
      batch.map((_: unknown, k: number) => firsts[n]! + k),
    );
    assert.equal(page.body.lastSeq, firsts[n]! + 9);
  }
  const renewed = await renewLeases(db, [
    {
      runId: a!.runId,
      runnerId: a!.runnerId,
      tokenHash: tokenHash(a!.token),
      ttlMs: 30_000,
      activityAt: new Date(),
      activityKind: 'agent-notification',
    },
    {
      runId: b!.runId,
      runnerId: 'rnr-someone-else',
      tokenHash: tokenHash(b!.token),
      ttlMs: 30_000,
      activityAt: null,
      activityKind: null,
    },
    {
      runId: c!.runId,
      runnerId: c!.runnerId,
      tokenHash: tokenHash(c!.token),
      ttlMs: 30_000,
      activityAt: null,
      activityKind: null,
    },
  ]);
  const row = (i: number) => renewed[i] as RenewedRun | null;
  assert.equal(row(0)?.lease_owner, a!.runnerId);
  assert.equal(row(0)?.last_activity_kind, 'agent-notification');
  assert.equal(row(1), null);
  assert.equal(row(2)?.lease_owner, c!.runnerId);
}

/**
 * A renewal whose run row another transaction holds (an append committing, a slow client
 * transaction) waits for nobody but itself: the others of its group go through at once, and
 * it lands once the row is free.
 */
async function lockedRowRenewal(t: TestManager, runners: Runner[]) {
  if (t.store.kind !== 'postgres') return;
  const [held, ...others] = runners;
  const locker = new pg.Client({ connectionString: t.store.url });
  await locker.connect();
  try {
    await locker.query('BEGIN');
    await locker.query('SELECT 1 FROM runs WHERE run_id = $1 FOR UPDATE', [held!.runId]);
    const renew = (r: Runner) =>
      call(t, 'PATCH', `/api/v1/runs/${r.runId}/lease`, { runnerId: r.runnerId }, r.token);
    let heldDone = false;
    const heldRenewal = renew(held!).then((answer) => {
      heldDone = true;
      return answer;
    });
    const started = performance.now();
    const answers = await Promise.all(others.map(renew));
    for (const answer of answers) assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.ok(performance.now() - started < 3000, 'the others did not wait for the held row');
    assert.equal(heldDone, false, 'the held run waits for its row');
    await new Promise((r) => setTimeout(r, 300));
    await locker.query('COMMIT');
    assert.equal((await heldRenewal).status, 200);
  } finally {
    await locker.end();
  }
}

describe('group commit on PostgreSQL', { skip: !(await realPostgresAvailable()) }, () => {
  it('keeps every batch whole, ordered, once and isolated under many concurrent clients', async () => {
    // One group in flight: everything arriving meanwhile goes into the next one.
    // Admission off: this storm is about the writes, not about refusing a burst.
    const t = await startTestManager({
      listen: true,
      env: { SVC_WRITE_GROUPS: '1', SVC_ADMISSION: 'off' },
    });
    try {
      await t.configureProfile('builtin-a');
      const runners = await fleet(t, 24);
      await appendStorm(t, runners, 5);
      await renewalStorm(t, runners);
      await groupStatements(t, runners);
      await lockedRowRenewal(t, runners);
    } finally {
      await t.close();
    }
  });
});

/**
 * Appends have connections of their own (one per group in flight), renewals too: reads that
 * hold every connection of the main pool (here, task listings blocked on a table lock) delay
 * neither. Before, a burst of polls took the whole pool and group commits queued behind it.
 */
describe('write lanes beside a busy main pool', { skip: !(await realPostgresAvailable()) }, () => {
  it('appends and renews while every main-pool connection is held by reads', async () => {
    const t = await startTestManager({
      listen: true,
      env: { SVC_DB_POOL_SIZE: '2', SVC_ADMISSION: 'off' },
    });
    // The suite runs only with PostgreSQL, where the test manager's store is one.
    const url = t.store.kind === 'postgres' ? t.store.url : '';
    const locker = new pg.Client({ connectionString: url });
    await locker.connect();
    try {
      await t.configureProfile('builtin-a');
      const [runner] = await fleet(t, 1);
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE queue_tasks IN ACCESS EXCLUSIVE MODE');
      // More blocked reads than the main pool has connections: the pool is full, with a line.
      const reads = Array.from({ length: 4 }, () => call(t, 'GET', '/api/v1/queue/tasks'));
      await new Promise((r) => setTimeout(r, 300));
      const waiting = await locker.query(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
      );
      assert.equal(waiting.rows[0].n, 2, 'both main-pool connections wait on the lock');
      const started = performance.now();
      const appended = await call(
        t,
        'POST',
        `/api/v1/runs/${runner!.runId}/events`,
        { runnerId: runner!.runnerId, events: batchOf(runner!, 0, 0) },
        runner!.token,
      );
      assert.equal(appended.status, 200, JSON.stringify(appended.body));
      assert.equal(appended.body.appended, 10);
      const renewed = await call(
        t,
        'PATCH',
        `/api/v1/runs/${runner!.runId}/lease`,
        { runnerId: runner!.runnerId },
        runner!.token,
      );
      assert.equal(renewed.status, 200, JSON.stringify(renewed.body));
      assert.ok(
        performance.now() - started < 2000,
        'the append and the renewal did not wait for the main pool',
      );
      await locker.query('COMMIT');
      for (const read of await Promise.all(reads)) assert.equal(read.status, 200);
    } finally {
      await locker.end();
      await t.close();
    }
  });
});

describe('group commit on the embedded store', () => {
  it('works the same on its one connection', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'svc-pglite-groups-'));
    const store: TestStore = { kind: 'pglite', dataDir, drop: () => Promise.resolve() };
    const t = await startTestManager({
      store,
      dataDir,
      listen: true,
      env: { SVC_ADMISSION: 'off' },
    });
    try {
      await t.configureProfile('builtin-a');
      const runners = await fleet(t, 6);
      await appendStorm(t, runners, 3, false);
      await renewalStorm(t, runners, false);
      await groupStatements(t, runners);
    } finally {
      await t.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
