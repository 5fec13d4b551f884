import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { realPostgresAvailable } from '@svc/testkit';
import { eventsWakeKey, WAKE_CHANNEL } from '../src/store/wakeups.js';
import { runBody, startTestManager, TestRunner, type TestManager } from './helpers.js';

const skip = (await realPostgresAvailable()) ? false : 'needs PostgreSQL (NOTIFY between replicas)';

const batch = (tag: string) =>
  Array.from({ length: 3 }, (_, i) => ({
    key: `${tag}-${i}`,
    category: 'command_output',
    name: 'exec',
    data: { itemId: `item-${i}`, stream: 'stdout', text: `${tag} ${i}`, originalBytes: 4 },
  }));

describe('event wake-ups between replicas', { skip }, () => {
  let a: TestManager;
  let b: TestManager;
  let listener: pg.Client;
  const heard: string[] = [];
  before(async () => {
    a = await startTestManager({ env: { LOG_LEVEL: 'warn' } });
    b = await startTestManager({ store: a.store, env: { LOG_LEVEL: 'warn' } });
    await a.configureProfile('builtin-a');
    listener = new pg.Client({ connectionString: (a.store as { url: string }).url });
    await listener.connect();
    listener.on('notification', (n) => heard.push(n.payload ?? ''));
    await listener.query(`LISTEN ${WAKE_CHANNEL}`);
  });
  after(async () => {
    await listener.end();
    await b.manager.close();
    await a.close();
  });

  it('an append wakes a long-poll on the other replica, and notifies only while one waits', async () => {
    const run = (await a.api('POST', '/api/v1/runs', runBody())).body as { runId: string };
    const runner = new TestRunner(a, 'rnr-watch', run.runId);
    assert.equal((await runner.claim()).status, 200);
    const key = eventsWakeKey(run.runId);
    const heardOf = () => heard.filter((p) => p === key).length;

    // The count once nothing more has arrived for 300 ms.
    const settled = async () => {
      for (let n = heardOf(); ;) {
        await new Promise((r) => setTimeout(r, 300));
        if (heardOf() === n) return n;
        n = heardOf();
      }
    };
    // Nobody waits: the append commits without a wake-up for anyone (the claim's own event,
    // written by the general path, has had its wake-up first).
    const before = await settled();
    const quiet = await runner.append(batch('quiet'));
    assert.equal(quiet.status, 200, quiet.raw);
    const lastSeq = quiet.body.lastSeq as number;
    assert.equal(await settled(), before, 'no NOTIFY without a waiter');

    // A long-poll on replica B, marked watched before it sleeps.
    const started = performance.now();
    const waiting = b.api(
      'GET',
      `/api/v1/runs/${run.runId}/events?afterSeq=${lastSeq}&waitMs=20000`,
    );
    const db = a.manager.store.db;
    // Generous deadlines: a loaded machine may take seconds to serve the long-poll's request.
    const markDeadline = Date.now() + 15_000;
    for (;;) {
      const { events_watched_until: until } = await db
        .selectFrom('runs')
        .select('events_watched_until')
        .where('run_id', '=', run.runId)
        .executeTakeFirstOrThrow();
      if (until && until.getTime() > Date.now() + 10_000) break;
      assert.ok(Date.now() < markDeadline, 'the waiting replica marks the run watched');
      await new Promise((r) => setTimeout(r, 10));
    }
    const loud = await runner.append(batch('loud'));
    assert.equal(loud.status, 200, loud.raw);
    const page = await waiting;
    const elapsed = performance.now() - started;
    assert.equal(page.status, 200, page.raw);
    assert.deepEqual(
      page.body.events.map((e: { data: { text: string } }) => e.data.text),
      ['loud 0', 'loud 1', 'loud 2'],
    );
    assert.ok(elapsed < 5_000, `woken by the append, not the 20 s deadline (${elapsed} ms)`);
    // B was woken by that NOTIFY; this test's own listener may hear it a moment later.
    const heardDeadline = Date.now() + 10_000;
    while (heardOf() === before && Date.now() < heardDeadline)
      await new Promise((r) => setTimeout(r, 20));
    assert.ok(heardOf() > before, 'the append notified while B waited');

    // A result long-poll on B is woken the same way by the turn's terminal report on A.
    const command = (
      await a.api('POST', `/api/v1/runs/${run.runId}/commands`, {
        type: 'turn',
        payload: { prompt: 'hi' },
      })
    ).body as { commandId: string };
    assert.equal((await runner.ack(command.commandId)).status, 200);
    const resultStarted = performance.now();
    const result = b.api(
      'GET',
      `/api/v1/runs/${run.runId}/result?commandId=${command.commandId}&waitMs=20000`,
    );
    await new Promise((r) => setTimeout(r, 200));
    const progress = await runner.append(
      batch('turn').map((e) => ({ ...e, commandId: command.commandId })),
    );
    assert.equal(progress.status, 200, progress.raw);
    assert.equal((await runner.finish(command.commandId, 'completed')).status, 200);
    const envelope = await result;
    assert.equal(envelope.body.terminalStatus, 'completed', envelope.raw);
    assert.ok(performance.now() - resultStarted < 5_000, 'woken by the terminal report');
  });
});
