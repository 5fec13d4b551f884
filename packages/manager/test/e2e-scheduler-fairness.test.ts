import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { useE2E, waitFor } from './e2e-helpers.js';
import { FAST_SCHEDULER, openAttempts } from './scheduler-helpers.js';

/**
 * The scheduler at work with real runner processes driving the real agent against a loopback
 * provider: 200 tasks from three tenants (a long backlog and two small ones), a global limit of
 * 10 running attempts and 4 per tenant. Nobody dispatches or refreshes; a sampler reads the
 * database all along to show the limits held, and attempt start times show the small tenants
 * were served while the big backlog was still long.
 */
const GLOBAL = 10;
const PER_TENANT = 4;
const BIG = { tenant: 'tenant-a', tasks: 150 };
const SMALL = [
  { tenant: 'tenant-b', tasks: 25 },
  { tenant: 'tenant-c', tasks: 25 },
];
const TOTAL = BIG.tasks + SMALL.reduce((sum, s) => sum + s.tasks, 0);

const rig = useE2E({
  env: {
    ...FAST_SCHEDULER,
    SVC_TENANT_ALLOWLIST: [BIG.tenant, ...SMALL.map((s) => s.tenant)].join(','),
    SVC_SCHEDULER_MAX_RUNNING: String(GLOBAL),
    SVC_SCHEDULER_TENANT_MAX_RUNNING: String(PER_TENANT),
  },
});

async function submitAll(tenant: string, count: number): Promise<void> {
  for (let i = 0; i < count; i += 25)
    await Promise.all(
      Array.from({ length: Math.min(25, count - i) }, async (_, k) => {
        const res = await rig.e.t.api('POST', '/api/v1/queue/tasks', {
          tenantId: tenant,
          projectId: 'proj-1',
          queue: 'main',
          title: `${tenant} task ${i + k}`,
          executionPolicy: { timeoutMs: 60_000 },
          payload: { prompt: `Say ok (${tenant} ${i + k}).` },
        });
        assert.equal(res.status, 201, res.raw);
      }),
    );
}

describe('scheduler capacity and fair share with real runners', () => {
  it('runs 200 tasks of three tenants to completion within 10 running and 4 per tenant, small tenants served early', async () => {
    const { t } = rig.e;
    const db = t.manager.store.db;

    // The sampler: every ~100 ms, what runs now, by the scheduler's own measure.
    let sampling = true;
    const samples: Array<{ total: number; byTenant: Record<string, number> }> = [];
    const sampler = (async () => {
      while (sampling) {
        samples.push(await openAttempts(t));
        await new Promise((r) => setTimeout(r, 100));
      }
    })();

    const started = Date.now();
    try {
      // The big backlog first, then the two small tenants.
      await submitAll(BIG.tenant, BIG.tasks);
      for (const small of SMALL) await submitAll(small.tenant, small.tasks);
      await waitFor(
        'every task to end',
        async () => {
          const row = await sql<{ open: number }>`
            SELECT count(*)::int AS open FROM queue_tasks
            WHERE state NOT IN ('completed', 'failed', 'blocked', 'cancelled')`.execute(db);
          return row.rows[0]!.open === 0;
        },
        560_000,
      );
    } finally {
      sampling = false;
      await sampler;
    }
    // Most of the time is the big tenant alone at its own limit of 4 once the small ones are
    // done (about 2.5 minutes on 2 shared cores): the mean of the samples shows it.
    const elapsed = Date.now() - started;
    console.log(`# ${TOTAL} tasks with real runners and agent in ${elapsed} ms`);

    // All completed, each on its first attempt, with no dispatch or refresh by anyone.
    const states = await sql<{ state: string; attempts: number; n: number }>`
      SELECT state, attempt_count AS attempts, count(*)::int AS n FROM queue_tasks
      GROUP BY 1, 2`.execute(db);
    assert.deepEqual(states.rows, [{ state: 'completed', attempts: 1, n: TOTAL }]);

    // The limits held in every sample, and the sampler saw them in use.
    assert.ok(samples.length >= 50, `${samples.length} samples`);
    const peak = Math.max(...samples.map((s) => s.total));
    for (const sample of samples) {
      assert.ok(sample.total <= GLOBAL, JSON.stringify(sample));
      for (const [tenant, n] of Object.entries(sample.byTenant))
        assert.ok(n <= PER_TENANT, `${tenant}: ${JSON.stringify(sample)}`);
    }
    assert.equal(peak, GLOBAL, 'the global limit was reached, not just kept under');
    const mean = samples.reduce((sum, s) => sum + s.total, 0) / samples.length;
    console.log(`# ${samples.length} samples, peak ${peak} running, mean ${mean.toFixed(1)}`);

    // Fair share: the small tenants' tasks all started while the big tenant still had most of
    // its backlog waiting (before half of its tasks had started).
    const starts = await sql<{ tenant_id: string; at: Date }>`
      SELECT t.tenant_id, a.created_at AS at FROM queue_attempts a
      JOIN queue_tasks t USING (task_id) ORDER BY a.created_at`.execute(db);
    const bigStarts = starts.rows.filter((r) => r.tenant_id === BIG.tenant).map((r) => r.at);
    const halfOfBig = new Date(bigStarts[Math.floor(BIG.tasks / 2) - 1]!).getTime();
    for (const small of SMALL) {
      const own = starts.rows.filter((r) => r.tenant_id === small.tenant);
      assert.equal(own.length, small.tasks);
      const first = new Date(own[0]!.at).getTime();
      const last = new Date(own.at(-1)!.at).getTime();
      assert.ok(first < halfOfBig, `${small.tenant} first started before half of the big backlog`);
      assert.ok(last < halfOfBig, `${small.tenant} last started before half of the big backlog`);
      const bigBefore = bigStarts.filter((at) => new Date(at).getTime() < first).length;
      console.log(
        `# ${small.tenant}: first start after ${bigBefore} of ${BIG.tasks} ${BIG.tenant} starts, last after ${bigStarts.filter((at) => new Date(at).getTime() < last).length}`,
      );
    }
    // Where an attempt's time goes (printed for the record): from its start to the turn's start
    // (runner and agent processes starting), and to its end.
    const timing = await sql<{ turn_p50: number; end_p50: number; end_p90: number }>`
      SELECT
        percentile_cont(0.5) WITHIN GROUP (ORDER BY 1000 * extract(epoch FROM started_at - created_at))::int AS turn_p50,
        percentile_cont(0.5) WITHIN GROUP (ORDER BY 1000 * extract(epoch FROM terminal_at - created_at))::int AS end_p50,
        percentile_cont(0.9) WITHIN GROUP (ORDER BY 1000 * extract(epoch FROM terminal_at - created_at))::int AS end_p90,
        avg(1000 * extract(epoch FROM terminal_at - created_at))::int AS end_mean
      FROM queue_attempts`.execute(db);
    console.log(`# attempt timing (ms): ${JSON.stringify(timing.rows[0])}`);
    // Every attempt ran the real agent: one model request per task at least.
    assert.ok(rig.e.provider.requestsOf().length >= TOTAL);
  });
});
