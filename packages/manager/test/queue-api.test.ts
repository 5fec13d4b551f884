import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { dispatch, startQueueRig, submit, taskBody, type QueueRig } from './queue-helpers.js';

let rig: QueueRig;
before(async () => {
  rig = await startQueueRig();
});
after(() => rig.close());

const api = (method: string, url: string, body?: unknown) => rig.t.api(method, url, body);

describe('queue tasks: submit and show', () => {
  it('stores a queued task with defaults and references, creating no run', async () => {
    const runsBefore = (
      await sql<{ n: number }>`SELECT count(*)::int AS n FROM runs`.execute(rig.t.manager.store.db)
    ).rows[0]!.n;
    const res = await api(
      'POST',
      '/api/v1/queue/tasks',
      taskBody({
        title: 'fix the login bug',
        priority: 5,
        summary: 'login fails on Safari',
        references: [
          { kind: 'issue', ref: 'acme/web#42', url: 'https://example.com/acme/web/issues/42' },
          { kind: 'commit', ref: '0123456789abcdef0123456789abcdef01234567' },
        ],
      }),
    );
    assert.equal(res.status, 201, res.raw);
    const task = res.body;
    assert.match(task.taskId, /^tsk-/);
    assert.equal(task.state, 'queued');
    assert.equal(task.priority, 5);
    assert.equal(task.lane, 'default');
    assert.equal(task.backendProfile, 'builtin-a');
    assert.equal(task.providerId, 'builtin-a');
    assert.deepEqual(task.workspaceRef, { kind: 'opaque' });
    assert.equal(task.maxAttempts, 3);
    assert.equal(task.latestAttempt, null);
    assert.equal(task.sessionPath, null);
    assert.equal(task.next, `queue dispatch ${task.taskId}`);
    assert.equal(task.version, 1);
    assert.ok(task.changeSeq > 0);
    assert.equal(task.references.length, 2);
    assert.equal(task.references[0].kind, 'issue');
    assert.deepEqual(task.judgeRuns, []);
    assert.equal(task.valuesPrinted, false);
    const runsAfter = (
      await sql<{ n: number }>`SELECT count(*)::int AS n FROM runs`.execute(rig.t.manager.store.db)
    ).rows[0]!.n;
    assert.equal(runsAfter, runsBefore, 'submitting never creates a run');

    const shown = await api('GET', `/api/v1/queue/tasks/${task.taskId}`);
    assert.equal(shown.status, 200);
    assert.deepEqual(shown.body, task);
    const missing = await api('GET', '/api/v1/queue/tasks/tsk-000000000000000000000000');
    assert.equal(missing.status, 404);
    assert.equal(missing.body.failureKind, 'not-found');
  });

  it('refuses tasks that could never run, with the run rules and failure kinds', async () => {
    const cases: Array<[Record<string, unknown>, number, string]> = [
      [{ tenantId: 'tenant-x' }, 403, 'tenant-policy-denied'],
      [{ payload: { prompt: 'hi', apiKey: 'sk-abc' } }, 400, 'schema-invalid'],
      [{ payload: {} }, 400, 'schema-invalid'],
      [{ backendProfile: 'Not A Slug' }, 400, 'schema-invalid'],
      [{ queue: 'Main Queue' }, 400, 'schema-invalid'],
      [{ maxAttempts: 0 }, 400, 'schema-invalid'],
      [{ sessionRef: { sessionId: 'ses-0000000000000000000000' } }, 404, 'not-found'],
      [
        { resourceBundleRef: { kind: 'gitbundle', repoUrl: 'x', gitMirror: 'y' } },
        400,
        'schema-invalid',
      ],
      [{ executionPolicy: { timeoutMs: 7_200_000 } }, 403, 'tenant-policy-denied'],
      [{ executionPolicy: { timeoutMs: 999_999_999 } }, 400, 'schema-invalid'],
    ];
    for (const [overrides, status, kind] of cases) {
      const res = await api('POST', '/api/v1/queue/tasks', taskBody(overrides));
      assert.equal(res.status, status, `${JSON.stringify(overrides)}: ${res.raw}`);
      assert.equal(res.body.failureKind, kind, JSON.stringify(overrides));
    }
  });

  it('treats a resubmitted taskId as the same task, and other content as a conflict', async () => {
    const body = taskBody({ taskId: 'tsk-idem-0001' });
    const first = await api('POST', '/api/v1/queue/tasks', body);
    assert.equal(first.status, 201, first.raw);
    const again = await api('POST', '/api/v1/queue/tasks', body);
    assert.equal(again.status, 200);
    assert.equal(again.body.changeSeq, first.body.changeSeq, 'nothing changed');
    const other = await api('POST', '/api/v1/queue/tasks', { ...body, title: 'something else' });
    assert.equal(other.status, 409);
    assert.equal(other.body.failureKind, 'idempotency-conflict');
  });

  it('redacts a registered secret pasted into the payload before it is stored', async () => {
    const t = rig.t;
    t.manager.redactor.add('canary-secret-value-7f3a9');
    const task = await submit(t, { payload: { prompt: 'use canary-secret-value-7f3a9 please' } });
    assert.equal(task.payload.prompt, 'use [redacted] please');
    const stored = await sql<{ p: string }>`SELECT payload::text AS p FROM queue_tasks
      WHERE task_id = ${task.taskId}`.execute(t.manager.store.db);
    assert.ok(!stored.rows[0]!.p.includes('canary-secret-value-7f3a9'));
  });
});

describe('queue tasks: listing and polling', () => {
  it('lists in queue order (priority, then first submitted) with bounded pages and a cursor', async () => {
    const queue = 'order';
    const low = await submit(rig.t, { queue, priority: -1, title: 'low' });
    const firstNormal = await submit(rig.t, { queue, title: 'normal 1' });
    const high = await submit(rig.t, { queue, priority: 10, title: 'high' });
    const secondNormal = await submit(rig.t, { queue, title: 'normal 2' });
    const page1 = await api('GET', `/api/v1/queue/tasks?queue=${queue}&limit=2`);
    assert.equal(page1.status, 200);
    assert.equal(page1.body.order, 'priority');
    assert.deepEqual(
      page1.body.tasks.map((x: any) => x.taskId),
      [high.taskId, firstNormal.taskId],
    );
    assert.ok(page1.body.nextCursor);
    const page2 = await api(
      'GET',
      `/api/v1/queue/tasks?queue=${queue}&limit=2&cursor=${page1.body.nextCursor}`,
    );
    assert.deepEqual(
      page2.body.tasks.map((x: any) => x.taskId),
      [secondNormal.taskId, low.taskId],
    );
    assert.equal(page2.body.nextCursor, null);
    const summary = page1.body.tasks[0];
    assert.equal(summary.payload, undefined, 'summaries carry no payload by default');
    const full = await api('GET', `/api/v1/queue/tasks?queue=${queue}&limit=1&view=full`);
    assert.ok(full.body.tasks[0].payload.prompt);

    const big = await api('GET', '/api/v1/queue/tasks?limit=201');
    assert.equal(big.status, 400, 'pages are at most 200');
    const byDefault = await api('GET', '/api/v1/queue/tasks');
    assert.ok(byDefault.body.tasks.length <= 50);
    const bad = await api('GET', '/api/v1/queue/tasks?cursor=bm90LWEtY3Vyc29y');
    assert.equal(bad.body.failureKind, 'schema-invalid');
  });

  it('defaults to 50 per page', async () => {
    for (let i = 0; i < 52; i++) await submit(rig.t, { queue: 'fifty' });
    const page = await api('GET', '/api/v1/queue/tasks?queue=fifty');
    assert.equal(page.body.tasks.length, 50);
    assert.ok(page.body.nextCursor);
  });

  it('polls incrementally by changeSeq: every change once, in order, never skipped', async () => {
    const queue = 'poll';
    const start = (await api('GET', `/api/v1/queue/tasks?queue=${queue}&updatedAfter=0`)).body;
    assert.equal(start.order, 'changeSeq');
    assert.equal(start.tasks.length, 0);
    const watermark = start.changeSeq;
    const a = await submit(rig.t, { queue });
    const b = await submit(rig.t, { queue });
    const c = await submit(rig.t, { queue });
    await api('POST', `/api/v1/queue/tasks/${a.taskId}/cancel`, { reason: 'not needed' });
    const seen: string[] = [];
    let after = watermark;
    for (;;) {
      const page = (
        await api('GET', `/api/v1/queue/tasks?queue=${queue}&updatedAfter=${after}&limit=2`)
      ).body;
      seen.push(...page.tasks.map((x: any) => `${x.taskId}:${x.state}`));
      const seqs = page.tasks.map((x: any) => x.changeSeq);
      assert.deepEqual(
        seqs,
        [...seqs].sort((x: number, y: number) => x - y),
      );
      if (page.tasks.length === 0) {
        assert.equal(page.nextUpdatedAfter, after, 'an empty poll keeps the watermark');
        break;
      }
      after = page.nextUpdatedAfter;
    }
    assert.deepEqual(seen, [`${b.taskId}:queued`, `${c.taskId}:queued`, `${a.taskId}:cancelled`]);
    const mixed = await api('GET', `/api/v1/queue/tasks?updatedAfter=0&cursor=${a.cursor}`);
    assert.equal(mixed.body.failureKind, 'schema-invalid', 'a queue-order cursor is refused');
  });

  it('filters by state', async () => {
    const queue = 'states';
    const keep = await submit(rig.t, { queue });
    const gone = await submit(rig.t, { queue });
    await api('POST', `/api/v1/queue/tasks/${gone.taskId}/cancel`, {});
    const queued = (await api('GET', `/api/v1/queue/tasks?queue=${queue}&state=queued`)).body;
    assert.deepEqual(
      queued.tasks.map((x: any) => x.taskId),
      [keep.taskId],
    );
    const cancelled = (await api('GET', `/api/v1/queue/tasks?queue=${queue}&state=cancelled`)).body;
    assert.deepEqual(
      cancelled.tasks.map((x: any) => x.taskId),
      [gone.taskId],
    );
  });
});

describe('queue tasks: cancel, read, stats, commander', () => {
  it('cancels a queued task with its reason; a repeated cancel answers it unchanged', async () => {
    const task = await submit(rig.t, { queue: 'cancel' });
    const res = await api('POST', `/api/v1/queue/tasks/${task.taskId}/cancel`, {
      reason: 'duplicate of another task',
    });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.state, 'cancelled');
    assert.equal(res.body.cancelReason, 'duplicate of another task');
    assert.ok(res.body.terminalAt);
    assert.ok(res.body.version > task.version);
    // The body is optional: a plain POST with none is a cancel without a reason.
    const again = await api('POST', `/api/v1/queue/tasks/${task.taskId}/cancel`);
    assert.equal(again.status, 200, again.raw);
    assert.equal(again.body.version, res.body.version, 'no second change');
  });

  it('keeps read cursors per reader: read removes a task from that reader unread count', async () => {
    const queue = 'readers';
    const task = await submit(rig.t, { queue });
    const commander = async (reader: string) =>
      (await api('GET', `/api/v1/queue/commander?queue=${queue}&readerId=${reader}`)).body;
    assert.equal((await commander('alice')).unread, 1);
    const read = await api('POST', `/api/v1/queue/tasks/${task.taskId}/read`, {
      readerId: 'alice',
      readerKind: 'user',
    });
    assert.equal(read.status, 200, read.raw);
    assert.deepEqual(
      {
        taskId: read.body.taskId,
        readerId: read.body.readerId,
        readerKind: read.body.readerKind,
        readVersion: read.body.readVersion,
        unread: read.body.unread,
      },
      { taskId: task.taskId, readerId: 'alice', readerKind: 'user', readVersion: 1, unread: false },
    );
    assert.equal((await commander('alice')).unread, 0);
    assert.equal((await commander('bob')).unread, 1, 'other readers keep their own cursor');
    await api('POST', `/api/v1/queue/tasks/${task.taskId}/cancel`, {});
    const afterChange = await commander('alice');
    assert.equal(afterChange.unread, 1, 'a change makes the task unread again');
    const item = afterChange.items.find((i: any) => i.task.taskId === task.taskId);
    assert.equal(item.reason, 'unread');
    assert.equal(item.task.reader.unread, true);
    const noReader = await api('POST', `/api/v1/queue/tasks/${task.taskId}/read`, {});
    assert.equal(noReader.body.failureKind, 'schema-invalid');
  });

  it('counts tasks by queue, lane, state and profile from the queue rows', async () => {
    const queue = 'stats';
    await submit(rig.t, { queue });
    await submit(rig.t, { queue, lane: 'fast' });
    const gone = await submit(rig.t, { queue, lane: 'fast' });
    await api('POST', `/api/v1/queue/tasks/${gone.taskId}/cancel`, {});
    const stats = (await api('GET', `/api/v1/queue/stats?queue=${queue}`)).body;
    assert.equal(stats.queue, queue);
    assert.equal(stats.tasks.total, 3);
    assert.equal(stats.tasks.byState.queued, 2);
    assert.equal(stats.tasks.byState.cancelled, 1);
    assert.equal(stats.tasks.byState.running, 0, 'every state is present');
    assert.deepEqual(
      stats.groups.map((g: any) => [g.lane, g.state, g.backendProfile, g.count]),
      [
        ['default', 'queued', 'builtin-a', 1],
        ['fast', 'cancelled', 'builtin-a', 1],
        ['fast', 'queued', 'builtin-a', 1],
      ],
    );
    assert.equal(stats.attempts.total, 0);
    const all = (await api('GET', '/api/v1/queue/stats')).body;
    assert.equal(all.queue, null);
    assert.ok(all.tasks.total > stats.tasks.total);
  });

  it('orders the commander view by what needs attention, bounded by limit', async () => {
    const queue = 'cmdr';
    const tasks = [];
    for (let i = 0; i < 4; i++) tasks.push(await submit(rig.t, { queue, priority: i }));
    const view = (await api('GET', `/api/v1/queue/commander?queue=${queue}&limit=3`)).body;
    assert.equal(view.items.length, 3);
    assert.equal(view.truncated, true);
    assert.equal(view.stats.total, 4);
    assert.equal(view.unread, null, 'no reader, no unread count');
    assert.deepEqual(
      view.items.map((i: any) => i.task.taskId),
      [tasks[3].taskId, tasks[2].taskId, tasks[1].taskId],
    );
    assert.ok(view.items.every((i: any) => i.reason === 'queued'));
    assert.ok(view.next[0].startsWith('queue dispatch '));
  });

  it('gives each commander item the summary the task list gives, in every state, queue filter and view', async () => {
    const queue = 'cmdr-same';
    const db = rig.t.manager.store.db;
    const ids: string[] = [];
    for (let i = 0; i < 6; i++)
      ids.push((await submit(rig.t, { queue, priority: i % 2, metadata: { n: i } })).taskId);
    const [blocked, running, failed, dispatched] = ids as [string, string, string, string];
    for (const id of [blocked, running, failed, dispatched]) await dispatch(rig.t, id);
    // States a run would reach, as the queue records them; the failed attempt with its figures.
    for (const [id, state] of [
      [blocked, 'blocked'],
      [running, 'running'],
      [failed, 'failed'],
    ] as const)
      await sql`UPDATE queue_tasks SET state = ${state}, version = version + 1
        WHERE task_id = ${id}`.execute(db);
    await sql`UPDATE queue_attempts SET state = 'failed', terminal_status = 'failed',
        failure_kind = 'provider-unavailable', message = 'the provider answered 503',
        duration_ms = 1234, event_count = 7, last_event_seq = 9,
        started_at = now() - interval '2.123456 seconds', terminal_at = now()
      WHERE task_id = ${failed}`.execute(db);
    for (const view of ['', '&view=full']) {
      const listed = (await api('GET', `/api/v1/queue/tasks?queue=${queue}&limit=50${view}`)).body
        .tasks as any[];
      const byId = new Map(listed.map((task) => [task.taskId, task]));
      assert.equal(byId.size, 6);
      for (const filter of [`queue=${queue}&`, '']) {
        const res = await api(
          'GET',
          `/api/v1/queue/commander?${filter}readerId=dana&limit=200${view}`,
        );
        assert.equal(res.status, 200, res.raw);
        const items = (res.body.items as any[]).filter((item) => byId.has(item.task.taskId));
        assert.deepEqual(
          items.map((item) => item.reason),
          ['failed', 'blocked', 'running', 'dispatched', 'queued', 'queued'],
          `commander ${filter || 'of all queues'}${view}`,
        );
        for (const { task } of items) {
          const { reader, ...summary } = task;
          assert.deepEqual(summary, byId.get(task.taskId), `${task.taskId}${view}`);
          assert.deepEqual(reader, { readerId: 'dana', readVersion: null, unread: true });
        }
      }
    }
    const failedItem = (await api('GET', `/api/v1/queue/commander?queue=${queue}`)).body.items[0];
    assert.equal(failedItem.task.latestAttempt.durationMs, 1234);
    assert.equal(failedItem.task.latestAttempt.failureKind, 'provider-unavailable');
    assert.match(failedItem.task.latestAttempt.startedAt, /^\d{4}-\d\d-\d\dT[\d:.]+Z$/);
  });

  it('puts failed, then in-flight, then unread finished, then queued tasks first, each with its latest attempt', async () => {
    const queue = 'cmdr-mixed';
    const db = rig.t.manager.store.db;
    const t = [];
    for (let i = 0; i < 7; i++) t.push((await submit(rig.t, { queue, priority: i % 3 })).taskId);
    const [failed, dispatched, completed, cancelled, readDone, q1, q2] = t as string[];
    const attempt = (await dispatch(rig.t, dispatched!)).attempt;
    const cancel = await api('POST', `/api/v1/queue/tasks/${cancelled}/cancel`, { reason: 'x' });
    assert.equal(cancel.status, 200, cancel.raw);
    // States a run would reach, written as the queue records them.
    await sql`UPDATE queue_tasks SET state = 'failed', version = version + 1
      WHERE task_id = ${failed}`.execute(db);
    await sql`UPDATE queue_tasks SET state = 'completed', version = version + 1
      WHERE task_id IN (${completed}, ${readDone})`.execute(db);
    const read = await api('POST', `/api/v1/queue/tasks/${readDone}/read`, { readerId: 'carol' });
    assert.equal(read.status, 200, read.raw);
    const view = (await api('GET', `/api/v1/queue/commander?queue=${queue}&readerId=carol`)).body;
    const byId = (id: string) => view.items.find((item: any) => item.task.taskId === id);
    assert.deepEqual(
      view.items.map((item: any) => item.reason),
      ['failed', 'dispatched', 'unread', 'unread', 'queued', 'queued'],
    );
    assert.equal(view.items[0].task.taskId, failed);
    assert.equal(view.items[1].task.taskId, dispatched);
    // Finished tasks merge in queue order (priority 2 before 0); the read one is left out.
    assert.deepEqual(
      view.items.slice(2, 4).map((item: any) => item.task.taskId),
      [completed, cancelled],
    );
    assert.equal(byId(readDone!), undefined);
    assert.deepEqual(
      view.items.slice(4).map((item: any) => item.task.taskId),
      [q1, q2],
    );
    assert.equal(byId(dispatched!).task.latestAttempt.attemptId, attempt.attemptId);
    assert.equal(byId(q1!).task.latestAttempt, null);
    assert.equal(view.unread, 6);
    const limited = (
      await api('GET', `/api/v1/queue/commander?queue=${queue}&readerId=carol&limit=2`)
    ).body;
    assert.deepEqual(
      limited.items.map((item: any) => item.task.taskId),
      [failed, dispatched],
    );
    assert.equal(limited.truncated, true);
  });
});
