import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { foldQueueCounters } from '../src/domain/queue/counters.js';
import { dispatch, finish, startQueueRig, submit, type QueueRig } from './queue-helpers.js';

let rig: QueueRig;
before(async () => {
  rig = await startQueueRig();
});
after(() => rig.close());

const api = (method: string, url: string, body?: unknown) => rig.t.api(method, url, body);
const QUEUES = ['alpha', 'beta', 'gamma'];
const READERS = ['ann', 'ben', 'cid'];

/** `n` jobs, `width` at a time: many clients at once against one manager. */
async function concurrently(width: number, jobs: (() => Promise<unknown>)[]): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < jobs.length) await jobs[next++]!();
    }),
  );
}

/** The truth, by count(*) over the rows themselves. */
async function counted() {
  const db = rig.t.manager.store.db;
  const groups = await sql<{ key: string; n: number }>`
    SELECT queue || '/' || lane || '/' || state || '/' || backend_profile AS key, count(*)::int AS n
    FROM queue_tasks GROUP BY 1 ORDER BY 1`.execute(db);
  const attempts = await sql<{ queue: string; state: string; n: number }>`
    SELECT t.queue, a.state, count(*)::int AS n FROM queue_attempts a JOIN queue_tasks t USING (task_id)
    GROUP BY 1, 2`.execute(db);
  const unread = await sql<{ reader: string; queue: string; n: number }>`
    SELECT r.reader, t.queue, count(*) FILTER (
      WHERE rc.read_version IS NULL OR rc.read_version < t.version)::int AS n
    FROM queue_tasks t CROSS JOIN unnest(${READERS}::text[]) AS r(reader)
    LEFT JOIN queue_read_cursors rc ON rc.task_id = t.task_id AND rc.reader_id = r.reader
    GROUP BY 1, 2`.execute(db);
  return { groups: groups.rows, attempts: attempts.rows, unread: unread.rows };
}

/** What the API answers, from the counters. */
async function answered() {
  const stats = (await api('GET', '/api/v1/queue/stats')).body;
  const groups = stats.groups
    .map((g: any) => ({ key: `${g.queue}/${g.lane}/${g.state}/${g.backendProfile}`, n: g.count }))
    .sort((a: any, b: any) => (a.key < b.key ? -1 : 1));
  const attempts = [];
  const unread = [];
  for (const queue of QUEUES) {
    const one = (await api('GET', `/api/v1/queue/stats?queue=${queue}`)).body;
    for (const [state, n] of Object.entries(one.attempts.byState))
      if (n) attempts.push({ queue, state, n });
    for (const reader of READERS) {
      const view = (await api('GET', `/api/v1/queue/commander?queue=${queue}&readerId=${reader}`))
        .body;
      unread.push({ reader, queue, n: view.unread });
    }
  }
  return { groups, attempts, unread };
}

const sorted = <T>(rows: T[]) =>
  [...rows].sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1));

async function assertExact(when: string) {
  const [truth, api] = [await counted(), await answered()];
  assert.deepEqual(api.groups, truth.groups, `task groups ${when}`);
  assert.deepEqual(sorted(api.attempts), sorted(truth.attempts), `attempts ${when}`);
  assert.deepEqual(sorted(api.unread), sorted(truth.unread), `unread ${when}`);
}

describe('queue counters', () => {
  it('stay exact while many clients move tasks, attempts and read cursors at once', async () => {
    const tasks: any[] = [];
    await concurrently(
      12,
      Array.from({ length: 90 }, (_, i) => async () => {
        tasks.push(
          await submit(rig.t, {
            queue: QUEUES[i % 3],
            lane: i % 2 ? 'fast' : 'default',
            priority: i % 5,
          }),
        );
      }),
    );
    const db = rig.t.manager.store.db;
    const reads = (task: any) =>
      READERS.map(
        (readerId) => () =>
          api('POST', `/api/v1/queue/tasks/${task.taskId}/read`, {
            readerId,
            readerKind: 'user',
          }),
      );
    // Readers read everything while the same tasks are cancelled and dispatched under them, and
    // the counter log is folded in the middle of it all.
    const jobs: (() => Promise<unknown>)[] = [];
    for (const [i, task] of tasks.entries()) {
      jobs.push(...reads(task));
      if (i % 3 === 0)
        jobs.push(() => api('POST', `/api/v1/queue/tasks/${task.taskId}/cancel`, {}));
      if (i % 15 === 1)
        jobs.push(async () => {
          const dispatched = await dispatch(rig.t, task.taskId);
          if (i % 30 === 1) await finish(rig.t, dispatched, 'failed');
        });
      if (i % 10 === 0) jobs.push(() => foldQueueCounters(db));
    }
    jobs.sort((a, b) => ((jobs.indexOf(a) * 7919) % 97) - ((jobs.indexOf(b) * 7919) % 97));
    await concurrently(16, jobs);
    await assertExact('after the concurrent moves');

    // A second round of reads on tasks that changed since, then a change after those reads.
    await concurrently(16, tasks.slice(0, 30).flatMap(reads));
    await concurrently(
      8,
      tasks
        .slice(30, 45)
        .map(
          (task) => () =>
            api('POST', `/api/v1/queue/tasks/${task.taskId}/cancel`, { reason: 'late' }),
        ),
    );
    await assertExact('after re-reads and late changes');
    await foldQueueCounters(db);
    await assertExact('after a fold');
    const rows = await sql<{ n: number }>`SELECT count(*)::int AS n FROM queue_task_counts`.execute(
      db,
    );
    const keys = (await counted()).groups.length;
    assert.equal(rows.rows[0]!.n, keys, 'a fold leaves one row per key');
  });
});
