import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runBody, startTestManager, TestRunner, type TestManager } from './helpers.js';

let t: TestManager;
before(async () => {
  t = await startTestManager({
    env: { SVC_LEASE_TTL_MS: '30000', SVC_HEARTBEAT_INTERVAL_MS: '10000' },
  });
  await t.configureProfile('builtin-a');
});
after(() => t.close());

async function newRun(): Promise<string> {
  return (await t.api('POST', '/api/v1/runs', runBody())).body.runId;
}

/** Age a lease by writing its expiry into the past (no sleeping). */
async function expireLease(runId: string): Promise<void> {
  await t.manager.store.db
    .updateTable('runs')
    .set({ lease_expires_at: new Date(Date.now() - 1000) })
    .where('run_id', '=', runId)
    .execute();
}

describe('runner registration, claim and lease', () => {
  it('registers a runner and returns the lease settings', async () => {
    const runId = await newRun();
    const registered = await t.api('POST', '/api/v1/runners/register', {
      runId,
      hostname: 'host-1',
      pid: 42,
      version: '0.1.0',
    });
    assert.equal(registered.status, 200, registered.raw);
    assert.match(registered.body.runnerId, /^rnr-/);
    assert.equal(registered.body.leaseTtlMs, 30000);
    assert.equal(registered.body.heartbeatIntervalMs, 10000);
    const missing = await t.api('POST', '/api/v1/runners/register', {
      runId: 'run-0000000000000000',
    });
    assert.equal(missing.status, 404);
  });

  it('grants the lease to the first claimer and refuses a second naming the owner and the expiry', async () => {
    const runId = await newRun();
    const first = new TestRunner(t, 'rnr-first001', runId);
    const second = new TestRunner(t, 'rnr-second01', runId);
    const granted = await first.claim();
    assert.equal(granted.status, 200, granted.raw);
    assert.equal(granted.body.lease.owner, 'rnr-first001');
    assert.equal(granted.body.run.state, 'claimed');
    assert.equal(granted.body.recovered, false);
    const refused = await second.claim();
    assert.equal(refused.status, 409);
    assert.equal(refused.body.failureKind, 'runner-lease-conflict');
    assert.equal(refused.body.details.ownerRunnerId, 'rnr-first001', 'spec/2: owner');
    assert.ok(!refused.raw.includes(granted.body.leaseToken), 'never the token');
    assert.equal(refused.body.details.leaseExpiresAt, granted.body.lease.expiresAt);
    assert.ok(refused.body.details.retryAfterMs > 0);
    const again = await first.claim();
    assert.equal(again.status, 200, 'the owner may claim again (idempotent renewal)');
    assert.equal(again.body.lease.epoch, granted.body.lease.epoch);
  });

  it('lets a replacement take over an expired lease and records waiting and recovered events', async () => {
    const runId = await newRun();
    const old = new TestRunner(t, 'rnr-oldowner', runId);
    const replacement = new TestRunner(t, 'rnr-replace1', runId);
    await old.claim();
    const waiting = await replacement.claim('replacement');
    assert.equal(waiting.status, 409);
    await replacement.claim('replacement'); // a retry while waiting records no second event
    await expireLease(runId);
    const taken = await replacement.claim('replacement');
    assert.equal(taken.status, 200, taken.raw);
    assert.equal(taken.body.recovered, true);
    assert.equal(taken.body.previousOwner, 'rnr-oldowner');
    const events = (await t.api('GET', `/api/v1/runs/${runId}/events`)).body.events;
    const names = events.map((e: any) => e.name);
    assert.equal(names.filter((n: string) => n === 'runner.claim.waiting').length, 1);
    const recovered = events.find((e: any) => e.name === 'runner.claim.recovered');
    assert.equal(recovered.data.previousOwner, 'rnr-oldowner');
    // The old owner is fenced off from now on.
    const stale = await old.append([{ key: 'late', category: 'system', data: {} }]);
    assert.equal(stale.body.failureKind, 'runner-lease-conflict');
    assert.equal((await old.heartbeat()).body.failureKind, 'runner-lease-conflict');
  });

  it('extends the lease on heartbeat and returns control signals', async () => {
    const runId = await newRun();
    const runner = new TestRunner(t, 'rnr-heartbt1', runId);
    const claimed = await runner.claim();
    await new Promise((r) => setTimeout(r, 20));
    const beat = await runner.heartbeat({
      lastActivityAt: new Date().toISOString(),
      lastActivityKind: 'item/agentMessage/delta',
    });
    assert.equal(beat.status, 200, beat.raw);
    assert.ok(Date.parse(beat.body.lease.expiresAt) > Date.parse(claimed.body.lease.expiresAt));
    assert.deepEqual(beat.body.control, {
      runState: 'claimed',
      cancelRequested: false,
      cancelledCommandIds: [],
    });
    await t.api('POST', `/api/v1/runs/${runId}/cancel`, { reason: 'user stop' });
    const after = await runner.heartbeat();
    assert.equal(after.body.control.runState, 'cancelled');
    assert.equal(after.body.control.cancelRequested, true);
  });

  it('refuses claims on terminal runs', async () => {
    const runId = await newRun();
    await t.api('POST', `/api/v1/runs/${runId}/cancel`, {});
    const refused = await new TestRunner(t, 'rnr-toolate1', runId).claim();
    assert.equal(refused.status, 409);
    assert.equal(refused.body.failureKind, 'run-terminal');
  });

  it('lets the owner end the run, but not while commands are unfinished', async () => {
    const runId = await newRun();
    const runner = new TestRunner(t, 'rnr-closer01', runId);
    await runner.claim();
    const command = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'x' },
    });
    const early = await runner.runStatus('completed');
    assert.equal(early.status, 409);
    assert.deepEqual(early.body.details.commandIds, [command.body.commandId]);
    await runner.poll();
    await runner.ack(command.body.commandId);
    await runner.finish(command.body.commandId, 'completed');
    const closed = await runner.runStatus('completed');
    assert.equal(closed.body.state, 'completed');
    const result = await t.api('GET', `/api/v1/runs/${runId}/result`);
    assert.equal(result.body.commandId, command.body.commandId);
  });

  it('ends the run failed on a runner-level failure, converging unfinished commands', async () => {
    const runId = await newRun();
    const runner = new TestRunner(t, 'rnr-crasher1', runId);
    await runner.claim();
    const a = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'x' },
    });
    const failed = await runner.runStatus('failed', {
      failureKind: 'infra-failed',
      message: 'git missing',
    });
    assert.equal(failed.body.state, 'failed');
    assert.equal(failed.body.failureKind, 'infra-failed');
    const command = await t.api('GET', `/api/v1/runs/${runId}/commands/${a.body.commandId}`);
    assert.equal(command.body.state, 'failed');
    const events = (await t.api('GET', `/api/v1/runs/${runId}/events`)).body.events;
    assert.equal(events.filter((e: any) => e.category === 'terminal_status').length, 2);
  });
});
