import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { realPostgresAvailable } from '@svc/testkit';
import { useReplicas } from './manager-process.js';
import { runBody } from './helpers.js';
import { call as httpCall } from './http-call.js';

const skip = (await realPostgresAvailable())
  ? false
  : 'needs a PostgreSQL server for two processes';

/** Every status a runner saw: a drain must never show it a 5xx. */
const statuses: number[] = [];

async function call(...args: Parameters<typeof httpCall>) {
  const answer = await httpCall(...args);
  statuses.push(answer.status);
  return answer;
}

/** A runner holding one run's lease that moves to the next replica when one goes away. */
class FailoverRunner {
  #current = 0;
  leaseToken: string | undefined;
  constructor(
    readonly bases: string[],
    readonly runId: string,
    readonly runnerId: string,
  ) {}
  get base() {
    return this.bases[this.#current]!;
  }
  async request(method: string, path: string, body?: unknown) {
    for (let attempt = 0; ; attempt += 1) {
      try {
        const headers = this.leaseToken ? { 'x-lease-token': this.leaseToken } : {};
        return await call(this.base, method, path, body, headers);
      } catch (error) {
        // Connection refused or reset: this replica is gone; the Service sends us elsewhere.
        if (attempt > 5) throw error;
        this.#current = (this.#current + 1) % this.bases.length;
      }
    }
  }
  async claim() {
    const claimed = await this.request('POST', `/api/v1/runs/${this.runId}/claim`, {
      runnerId: this.runnerId,
      mode: 'ordinary',
    });
    assert.equal(claimed.status, 200, JSON.stringify(claimed.body));
    this.leaseToken = claimed.body.leaseToken;
  }
  poll(afterSeq: number, waitMs: number) {
    return this.request(
      'GET',
      `/api/v1/runs/${this.runId}/commands?afterSeq=${afterSeq}&runnerId=${this.runnerId}&waitMs=${waitMs}`,
    );
  }
}

describe('several managers on one database', { skip }, () => {
  const { start: startReplica } = useReplicas('ha', {
    SVC_SCHEDULER: 'off',
    SVC_DRAIN_DELAY_MS: '2000',
    SVC_DRAIN_TIMEOUT_MS: '10000',
  });

  it('wakes a long-poll on one replica with a command created on the other, then drains on SIGTERM without losing a command or answering 5xx', async () => {
    const a = await startReplica();
    const b = await startReplica();
    const runners: FailoverRunner[] = [];
    for (let i = 0; i < 3; i += 1) {
      const run = await call(b.url, 'POST', '/api/v1/runs', runBody());
      assert.equal(run.status, 201, JSON.stringify(run.body));
      const runner = new FailoverRunner([a.url, b.url], run.body.runId, `rnr-ha-${i}-0001`);
      await runner.claim();
      runners.push(runner);
    }

    // Long-polls wait on A; the commands are created on B (NOTIFY crosses replicas).
    const started = Date.now();
    const polls = runners.map((r) => r.poll(0, 20_000));
    await new Promise((r) => setTimeout(r, 300));
    const first = await Promise.all(
      runners.map((r) =>
        call(b.url, 'POST', `/api/v1/runs/${r.runId}/commands`, {
          type: 'turn',
          payload: { prompt: 'one' },
          idempotencyKey: `${r.runId}-1`,
        }),
      ),
    );
    const woken = await Promise.all(polls);
    assert.ok(Date.now() - started < 10_000, 'woken well before the 20 s wait ended');
    woken.forEach((page, i) => {
      assert.equal(page.status, 200);
      assert.deepEqual(
        page.body.commands.map((c: any) => c.commandId),
        [first[i]!.body.commandId],
      );
    });

    // Runners wait on A again; A gets SIGTERM.
    const waiting = runners.map((r) => r.poll(1, 20_000));
    await new Promise((r) => setTimeout(r, 300));
    const signalled = Date.now();
    a.child.kill('SIGTERM');
    // Unready at once, still answering while the Service drops it.
    const readiness = await fetch(`${a.url}/health/readiness`);
    const health = (await readiness.json()) as any;
    assert.equal(readiness.status, 503);
    assert.equal(health.draining, true);
    assert.equal(health.status, 'draining');
    // A command created on the draining replica during the drain is not lost.
    const during = await call(a.url, 'POST', `/api/v1/runs/${runners[0]!.runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'during the drain' },
      idempotencyKey: 'during-drain',
    });
    assert.equal(during.status, 201);
    // The long-polls are released (not left to time out), asking the runner to reconnect.
    const released = await Promise.all(waiting);
    assert.ok(Date.now() - signalled < 8000, `released after ${Date.now() - signalled} ms`);
    for (const page of released) {
      assert.equal(page.status, 200);
      assert.equal(page.connection, 'close');
    }
    assert.equal(await a.exited, 0, 'A exits cleanly once drained');

    // The runners re-poll; A is gone, so they land on B and get everything after seq 1.
    const second = await Promise.all(
      runners.slice(1).map((r) =>
        call(b.url, 'POST', `/api/v1/runs/${r.runId}/commands`, {
          type: 'turn',
          payload: { prompt: 'two' },
          idempotencyKey: `${r.runId}-2`,
        }),
      ),
    );
    const after = await Promise.all(runners.map((r) => r.poll(1, 5_000)));
    assert.equal(runners[0]!.base, b.url);
    assert.deepEqual(
      after[0]!.body.commands.map((c: any) => c.commandId),
      [during.body.commandId],
    );
    after.slice(1).forEach((page, i) => {
      assert.deepEqual(
        page.body.commands.map((c: any) => c.commandId),
        [second[i]!.body.commandId],
      );
      assert.equal(page.body.commands[0].state, 'delivered');
    });
    assert.deepEqual(
      statuses.filter((s) => s >= 500),
      [],
      'no 5xx seen by any runner or client',
    );
  });
});
