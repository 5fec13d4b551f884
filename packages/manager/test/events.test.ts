import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runBody, startTestManager, TestRunner, type TestManager } from './helpers.js';

let t: TestManager;
before(async () => {
  t = await startTestManager();
  await t.configureProfile('builtin-a');
});
after(() => t.close());

async function claimedRun(runnerId: string): Promise<{ runId: string; runner: TestRunner }> {
  const run = await t.api('POST', '/api/v1/runs', runBody());
  const runner = new TestRunner(t, runnerId, run.body.runId);
  assert.equal((await runner.claim()).status, 200);
  return { runId: run.body.runId, runner };
}

const ev = (key: string, category = 'backend_status', data: Record<string, unknown> = {}) => ({
  key,
  category,
  name: 'test',
  data,
});

describe('event append and paging', () => {
  it('appends a batch in order with contiguous seqs after the claim events', async () => {
    const { runId, runner } = await claimedRun('rnr-append01');
    const before = (await t.api('GET', `/api/v1/runs/${runId}`)).body.lastSeq;
    const appended = await runner.append(
      Array.from({ length: 5 }, (_, i) => ev(`k${i}`, 'backend_status', { i })),
    );
    assert.equal(appended.status, 200, appended.raw);
    assert.equal(appended.body.appended, 5);
    assert.deepEqual(
      appended.body.events.map((e: any) => e.seq),
      [1, 2, 3, 4, 5].map((n) => before + n),
    );
    const page = await t.api('GET', `/api/v1/runs/${runId}/events?afterSeq=${before}`);
    assert.deepEqual(
      page.body.events.map((e: any) => e.data.i),
      [0, 1, 2, 3, 4],
    );
    const first = page.body.events[0];
    assert.equal(first.eventId, `${runId}:${first.seq}`);
    assert.deepEqual(Object.keys(first).sort(), [
      'category',
      'commandId',
      'data',
      'eventId',
      'name',
      'observedAt',
      'runId',
      'seq',
    ]);
  });

  it('never duplicates or reorders a retried batch, even mixed with new events', async () => {
    const { runId, runner } = await claimedRun('rnr-retry001');
    const batch = [ev('a'), ev('b'), ev('c')];
    const first = await runner.append(batch);
    const retry = await runner.append(batch);
    assert.equal(retry.body.appended, 0);
    assert.equal(retry.body.duplicates, 3);
    assert.deepEqual(
      retry.body.events.map((e: any) => e.seq),
      first.body.events.map((e: any) => e.seq),
    );
    const mixed = await runner.append([ev('c'), ev('d'), ev('d')]);
    assert.deepEqual(
      mixed.body.events.map((e: any) => e.duplicate),
      [true, false, true],
    );
    const all = await t.api('GET', `/api/v1/runs/${runId}/events?limit=1000`);
    const keys = all.body.events
      .filter((e: any) => e.category === 'backend_status')
      .map((e: any) => e.name);
    assert.equal(keys.length, 4);
    const seqs = all.body.events.map((e: any) => e.seq);
    assert.deepEqual(
      seqs,
      [...seqs].sort((a: number, b: number) => a - b),
    );
    assert.equal(new Set(seqs).size, seqs.length);
  });

  it('keeps seqs unique and gap-free under concurrent appends to one run', async () => {
    const { runId, runner } = await claimedRun('rnr-concur01');
    await Promise.all(
      Array.from({ length: 10 }, (_, b) =>
        runner.append(
          Array.from({ length: 20 }, (_, i) => ev(`b${b}-${i}`, 'backend_status', { b, i })),
        ),
      ),
    );
    const all = await t.api('GET', `/api/v1/runs/${runId}/events?limit=1000`);
    const seqs: number[] = all.body.events.map((e: any) => e.seq);
    assert.deepEqual(
      seqs,
      Array.from({ length: seqs.length }, (_, i) => i + 1),
    );
    assert.equal(all.body.lastSeq, seqs.length);
    // Within each batch, array order is seq order.
    for (let b = 0; b < 10; b++) {
      const batch = all.body.events.filter((e: any) => e.data.b === b);
      assert.equal(batch.length, 20);
      assert.deepEqual(
        batch.map((e: any) => e.data.i),
        Array.from({ length: 20 }, (_, i) => i),
      );
      // A batch lands whole: its seqs are consecutive.
      assert.equal(batch[19].seq - batch[0].seq, 19);
    }
  });

  it('pages with afterSeq and limit (default 100, max 1000) and reports whether more follow', async () => {
    const { runId, runner } = await claimedRun('rnr-paging01');
    await runner.append(Array.from({ length: 250 }, (_, i) => ev(`p${i}`)));
    const firstPage = await t.api('GET', `/api/v1/runs/${runId}/events`);
    assert.equal(firstPage.body.events.length, 100);
    assert.equal(firstPage.body.hasMore, true);
    const second = await t.api(
      'GET',
      `/api/v1/runs/${runId}/events?afterSeq=${firstPage.body.nextAfterSeq}&limit=1000`,
    );
    assert.equal(second.body.hasMore, false);
    assert.equal(firstPage.body.events.length + second.body.events.length, firstPage.body.lastSeq);
    assert.equal((await t.api('GET', `/api/v1/runs/${runId}/events?limit=1001`)).status, 400);
    assert.equal((await t.api('GET', `/api/v1/runs/${runId}/events?afterSeq=-1`)).status, 400);
    assert.equal((await t.api('GET', `/api/v1/runs/${runId}/events?afterSeq=abc`)).status, 400);
  });

  it('stores output holding U+0000 and oversized text bounded, with byte counts and flags', async () => {
    const { runId, runner } = await claimedRun('rnr-bounds01');
    const huge = 'x'.repeat(200 * 1024);
    const response = await runner.append([
      {
        key: 'nul',
        category: 'command_output',
        data: { stream: 'stdout', text: 'before\u0000after', 'k\u0000ey': 1 },
      },
      { key: 'big', category: 'command_output', data: { stream: 'stdout', text: huge } },
      { key: 'msg', category: 'assistant_message', data: { text: `é${huge}` } },
    ]);
    assert.equal(response.status, 200, response.raw);
    const page = await t.api(
      'GET',
      `/api/v1/runs/${runId}/events?afterSeq=${response.body.events[0].seq - 1}`,
    );
    const [nul, big, msg] = page.body.events;
    assert.equal(nul.data.text, 'before\uFFFDafter');
    assert.equal(nul.data.nulReplaced, true);
    assert.equal(big.data.outputTruncated, true);
    assert.equal(big.data.truncation.text.originalBytes, 200 * 1024);
    assert.ok(Buffer.byteLength(big.data.text) <= 64 * 1024);
    assert.equal(msg.data.textTruncated, true);
    assert.ok(!msg.data.text.includes('\uFFFD'), 'cut on a code point boundary');
  });

  it('refuses terminal_status appends, unknown command ids and malformed events with 4xx', async () => {
    const { runId, runner } = await claimedRun('rnr-refuse01');
    const other = await t.api('POST', '/api/v1/runs', runBody());
    const foreign = await t.api('POST', `/api/v1/runs/${other.body.runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'x' },
    });
    const cases = [
      [{ key: 't', category: 'terminal_status', data: { status: 'completed' } }],
      [{ key: 'f', category: 'system', commandId: foreign.body.commandId, data: {} }],
      [{ key: 'x', category: 'bogus', data: {} }],
      [{ category: 'system', data: {} }],
      [],
    ];
    for (const events of cases) {
      const response = await runner.append(events);
      assert.equal(response.status, 400, `${JSON.stringify(events)} -> ${response.raw}`);
      assert.equal(response.body.failureKind, 'schema-invalid');
    }
    const tooMany = await runner.append(Array.from({ length: 1001 }, (_, i) => ev(`m${i}`)));
    assert.equal(tooMany.status, 400);
    const page = await t.api('GET', `/api/v1/runs/${runId}/events?limit=1000`);
    assert.ok(
      page.body.events.every((e: any) => e.category === 'system'),
      'nothing from the refused batches was written',
    );
  });
});
