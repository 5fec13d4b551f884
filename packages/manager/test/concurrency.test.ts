import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { realPostgresAvailable } from '@svc/testkit';
import { runBody, startTestManager, type TestManager } from './helpers.js';

const skip = (await realPostgresAvailable())
  ? false
  : 'needs a PostgreSQL server: the embedded store has a single connection';

let t: TestManager;
before(async () => {
  if (skip) return;
  t = await startTestManager({ listen: true, env: { SVC_DB_POOL_SIZE: '20' } });
  await t.configureProfile('builtin-a');
});
after(() => t?.close());

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${t.manager.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
const json = (response: Response): Promise<any> => response.json();

describe('concurrency over real HTTP', { skip }, () => {
  it('50 runners racing to claim one run: exactly one owner, 100 rounds', async () => {
    for (let round = 0; round < 100; round++) {
      const run = await json(await post('/api/v1/runs', runBody()));
      const responses = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          post(`/api/v1/runs/${run.runId}/claim`, {
            runnerId: `rnr-r${round}c${i}x`,
            mode: 'ordinary',
          }),
        ),
      );
      const statuses = responses.map((r) => r.status);
      const bodies = await Promise.all(responses.map(json));
      const winners = bodies.filter((_, i) => statuses[i] === 200);
      assert.equal(winners.length, 1, `round ${round}: ${winners.length} owners`);
      assert.equal(
        statuses.filter((s) => s === 409).length,
        49,
        `round ${round}: statuses ${statuses.join(',')}`,
      );
      const owner = winners[0].lease.owner;
      for (const loser of bodies.filter((_, i) => statuses[i] === 409)) {
        assert.equal(loser.failureKind, 'runner-lease-conflict');
        // spec/2: the refusal names the owner and its lease expiry (never a token).
        assert.equal(loser.details.ownerRunnerId, owner, 'a refusal names the holder');
        assert.equal(loser.details.leaseExpiresAt, winners[0].lease.expiresAt);
        assert.ok(!JSON.stringify(loser).includes(winners[0].leaseToken), 'never its token');
      }
      const stored = await json(await fetch(`${t.manager.url}/api/v1/runs/${run.runId}`));
      assert.equal(stored.lease.owner, owner);
    }
  });

  it('many clients appending to many runs keep every run gap-free and ordered', async () => {
    const runs = await Promise.all(
      Array.from({ length: 8 }, () => post('/api/v1/runs', runBody()).then(json)),
    );
    const tokens: string[] = await Promise.all(
      runs.map((run, i) =>
        post(`/api/v1/runs/${run.runId}/claim`, { runnerId: `rnr-append${i}x` })
          .then(json)
          .then((claim) => claim.leaseToken),
      ),
    );
    await Promise.all(
      runs.flatMap((run, i) =>
        Array.from({ length: 10 }, (_, b) =>
          post(
            `/api/v1/runs/${run.runId}/events`,
            {
              runnerId: `rnr-append${i}x`,
              events: Array.from({ length: 50 }, (_, k) => ({
                key: `b${b}-${k}`,
                category: 'backend_status',
                data: { b, k },
              })),
            },
            { 'x-lease-token': tokens[i]! },
          ).then((r) => assert.equal(r.status, 200)),
        ),
      ),
    );
    for (const run of runs) {
      const page = await json(
        await fetch(`${t.manager.url}/api/v1/runs/${run.runId}/events?limit=1000`),
      );
      const seqs = page.events.map((e: any) => e.seq);
      assert.deepEqual(
        seqs,
        Array.from({ length: seqs.length }, (_, i) => i + 1),
      );
      assert.equal(page.events.filter((e: any) => e.category === 'backend_status').length, 500);
    }
  });
});
