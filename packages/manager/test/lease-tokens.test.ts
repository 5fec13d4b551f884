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

const turn = async (runId: string, prompt = 'hello'): Promise<string> => {
  const created = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
    type: 'turn',
    payload: { prompt },
  });
  assert.equal(created.status, 201, created.raw);
  return created.body.commandId;
};

async function expireLease(runId: string): Promise<void> {
  await t.manager.store.db
    .updateTable('runs')
    .set({ lease_expires_at: new Date(Date.now() - 1000) })
    .where('run_id', '=', runId)
    .execute();
}

/** Every lease-fenced call, made as `runner` (whatever lease token it carries). */
function fencedCalls(runner: TestRunner, commandId: string) {
  return {
    heartbeat: () => runner.heartbeat(),
    poll: () => runner.poll(),
    append: () => runner.append([{ key: `k-${Math.random()}`, category: 'system', data: {} }]),
    ack: () => runner.ack(commandId),
    commandStatus: () => runner.finish(commandId, 'running', { threadId: 'thr-1' }),
    commandFinish: () => runner.finish(commandId, 'failed', { failureKind: 'backend-failed' }),
    runStatus: () => runner.runStatus('running'),
  };
}

/**
 * A refusal: 409 runner-lease-conflict naming the current holder and its lease expiry
 * (spec/2), and never a token.
 */
function assertRefused(
  response: { status: number; body: any; raw: string },
  what: string,
  owner: string,
  tokens: string[],
): void {
  assert.equal(response.status, 409, `${what}: ${response.raw}`);
  assert.equal(response.body.failureKind, 'runner-lease-conflict', what);
  assert.equal(response.body.details.ownerRunnerId, owner, `${what} names the holder`);
  assert.ok(
    !Number.isNaN(Date.parse(response.body.details.leaseExpiresAt)),
    `${what} gives the lease expiry: ${response.raw}`,
  );
  for (const token of tokens)
    assert.ok(!response.raw.includes(token), `${what} leaks ${token}: ${response.raw}`);
}

describe('lease tokens', () => {
  it('claim returns a lease token; the stored row holds only its hash', async () => {
    const runId = await newRun();
    const runner = new TestRunner(t, 'rnr-tokenown', runId);
    const claim = await runner.claim();
    assert.equal(claim.status, 200, claim.raw);
    assert.match(claim.body.leaseToken, /^svcl_[A-Za-z0-9_-]{43}$/);
    const row = await t.manager.store.db
      .selectFrom('runs')
      .selectAll()
      .where('run_id', '=', runId)
      .executeTakeFirstOrThrow();
    const dump = JSON.stringify(row);
    assert.ok(!dump.includes(claim.body.leaseToken), 'the token itself is not stored');
    assert.ok(!dump.includes(claim.body.leaseToken.slice(5)), 'nor its random part');
    assert.match(row.lease_token_hash!, /^[0-9a-f]{64}$/);
    const run = await t.api('GET', `/api/v1/runs/${runId}`);
    assert.ok(!run.raw.includes(claim.body.leaseToken), 'the run record does not show it');
  });

  it("the owner's calls work with its token", async () => {
    const runId = await newRun();
    const commandId = await turn(runId);
    const owner = new TestRunner(t, 'rnr-tokenok1', runId);
    assert.equal((await owner.claim()).status, 200);
    assert.equal((await owner.heartbeat()).status, 200);
    const poll = await owner.poll();
    assert.equal(poll.status, 200, poll.raw);
    assert.equal(poll.body.commands[0].state, 'delivered');
    assert.equal((await owner.ack(commandId)).status, 200);
    const progress = await owner.finish(commandId, 'running', { threadId: 'thr-1' });
    assert.equal(progress.status, 200, progress.raw);
    const append = await owner.append([{ key: 'k1', category: 'system', data: {} }]);
    assert.equal(append.status, 200, append.raw);
    assert.equal((await owner.runStatus('running')).status, 200);
    const done = await owner.finish(commandId, 'completed');
    assert.equal(done.status, 200, done.raw);
    assert.equal(done.body.state, 'completed');
  });

  for (const [label, token] of [
    ['no', null],
    ['an empty', ''],
    ['a made-up', 'svcl_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'],
    ['a non-token', 'not a token at all'],
  ] as const) {
    it(`refuses the right runnerId with ${label} lease token on every fenced route`, async () => {
      const runId = await newRun();
      const commandId = await turn(runId);
      const owner = new TestRunner(t, 'rnr-tokenvic', runId);
      const claim = await owner.claim();
      assert.equal(claim.status, 200);
      // Same public runnerId, API key caller, but not the claim's token.
      const impostor = new TestRunner(t, 'rnr-tokenvic', runId);
      impostor.leaseToken = token;
      for (const [what, call] of Object.entries(fencedCalls(impostor, commandId)))
        assertRefused(await call(), what, 'rnr-tokenvic', [claim.body.leaseToken]);
      // Nothing was changed on the owner's behalf.
      const command = await t.api('GET', `/api/v1/runs/${runId}/commands/${commandId}`);
      assert.equal(command.body.state, 'accepted');
      const run = await t.api('GET', `/api/v1/runs/${runId}`);
      assert.equal(run.body.state, 'claimed');
      // And the owner still works.
      assert.equal((await owner.heartbeat()).status, 200);
      assert.equal((await owner.ack(commandId)).status, 200);
    });
  }

  it("refuses another run's valid token", async () => {
    const runA = await newRun();
    const runB = await newRun();
    const commandB = await turn(runB);
    const a = new TestRunner(t, 'rnr-tokenrna', runA);
    const b = new TestRunner(t, 'rnr-tokenrnb', runB);
    assert.equal((await a.claim()).status, 200);
    assert.equal((await b.claim()).status, 200);
    const crossed = new TestRunner(t, 'rnr-tokenrnb', runB);
    crossed.leaseToken = a.leaseToken;
    for (const [what, call] of Object.entries(fencedCalls(crossed, commandB)))
      assertRefused(await call(), what, 'rnr-tokenrnb', [b.leaseToken!, a.leaseToken!]);
  });

  it("a previous claim's token is dead once the same runner claims again", async () => {
    const runId = await newRun();
    const commandId = await turn(runId);
    const runner = new TestRunner(t, 'rnr-tokenrep', runId);
    assert.equal((await runner.claim()).status, 200);
    const first = runner.leaseToken!;
    assert.equal((await runner.claim()).status, 200);
    assert.notEqual(runner.leaseToken, first, 'every claim mints a new token');
    const stale = new TestRunner(t, 'rnr-tokenrep', runId);
    stale.leaseToken = first;
    for (const [what, call] of Object.entries(fencedCalls(stale, commandId)))
      assertRefused(await call(), what, 'rnr-tokenrep', [runner.leaseToken!, first]);
    assert.equal((await runner.heartbeat()).status, 200);
  });

  it('after a takeover the old owner is refused, even naming the new owner', async () => {
    const runId = await newRun();
    const commandId = await turn(runId);
    const old = new TestRunner(t, 'rnr-tokenold', runId);
    assert.equal((await old.claim()).status, 200);
    assert.equal((await old.poll()).status, 200);
    assert.equal((await old.ack(commandId)).status, 200);
    await expireLease(runId);
    const replacement = new TestRunner(t, 'rnr-tokennew', runId);
    const taken = await replacement.claim('replacement');
    assert.equal(taken.status, 200, taken.raw);
    for (const [what, call] of Object.entries(fencedCalls(old, commandId)))
      assertRefused(await call(), `old owner ${what}`, 'rnr-tokennew', [replacement.leaseToken!]);
    // The old token with the new owner's public runnerId is refused too.
    const spoof = new TestRunner(t, 'rnr-tokennew', runId);
    spoof.leaseToken = old.leaseToken;
    for (const [what, call] of Object.entries(fencedCalls(spoof, commandId)))
      assertRefused(await call(), `spoof ${what}`, 'rnr-tokennew', [replacement.leaseToken!]);
    // The replacement takes over the orphaned command and finishes it.
    assert.equal((await replacement.ack(commandId)).status, 200);
    const done = await replacement.finish(commandId, 'completed');
    assert.equal(done.status, 200, done.raw);
  });

  it('a refused claim names the holder and its lease expiry, never its token', async () => {
    const runId = await newRun();
    const holder = new TestRunner(t, 'rnr-tokenhld', runId);
    assert.equal((await holder.claim()).status, 200);
    const other = new TestRunner(t, 'rnr-tokenoth', runId);
    for (const mode of ['ordinary', 'replacement'] as const) {
      const refused = await other.claim(mode);
      assertRefused(refused, `claim ${mode}`, 'rnr-tokenhld', [holder.leaseToken!]);
      assert.ok(refused.body.details.retryAfterMs > 0);
    }
  });
});
