import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { sql } from 'kysely';
import { runBody, startTestManager, TestRunner, type TestManager } from './helpers.js';

/**
 * A run says what it is doing (`activity`) and how its latest turn stands (`lastCommand`), in
 * its record, the listing (with filters on both) and the metrics; a run its runner closes ends
 * in its last turn's outcome.
 */
/**
 * Statements the manager sends, counted at the driver: installed before the manager opens its
 * pool (each connection binds the driver's query when it connects).
 */
let statements = 0;
const prototype = pg.Client.prototype as unknown as {
  query: (this: pg.Client, ...args: unknown[]) => unknown;
};
const driverQuery = prototype.query;
prototype.query = function (this: pg.Client, ...args: unknown[]) {
  statements += 1;
  return driverQuery.apply(this, args);
};

let t: TestManager;
before(async () => {
  t = await startTestManager({ env: { SVC_METRICS_COUNTS_MAX_AGE_MS: '0' } });
  await t.configureProfile('builtin-a');
});
after(async () => {
  await t.close();
  prototype.query = driverQuery;
});

let serial = 0;
async function newRun(projectId = 'activity') {
  const run = await t.api('POST', '/api/v1/runs', runBody({ projectId }));
  assert.equal(run.status, 201, run.raw);
  const runner = new TestRunner(t, `rnr-act${String(++serial).padStart(5, '0')}`, run.body.runId);
  return { runId: run.body.runId as string, runner, created: run.body };
}

async function turn(runId: string, prompt = 'hi'): Promise<string> {
  const command = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
    type: 'turn',
    payload: { prompt },
  });
  assert.equal(command.status, 201, command.raw);
  return command.body.commandId;
}

const getRun = async (runId: string) => {
  const response = await t.api('GET', `/api/v1/runs/${runId}`);
  assert.equal(response.status, 200, response.raw);
  return response.body;
};

async function listed(query: string): Promise<string[]> {
  const response = await t.api('GET', `/api/v1/runs?${query}&limit=200`);
  assert.equal(response.status, 200, response.raw);
  return response.body.runs.map((r: any) => r.runId);
}

/** The listing's view of one run must be the record's. */
async function sameInListing(runId: string): Promise<void> {
  const record = await getRun(runId);
  const page = await t.api('GET', `/api/v1/runs?projectId=${record.projectId}&limit=200`);
  const row = page.body.runs.find((r: any) => r.runId === runId);
  assert.deepEqual(
    { activity: row.activity, lastCommand: row.lastCommand },
    { activity: record.activity, lastCommand: record.lastCommand },
  );
}

describe('run activity and last command', () => {
  it('moves waiting-runner -> turn-active -> idle -> closed, and a failed only turn ends the run failed', async () => {
    const { runId, runner, created } = await newRun('activity-walk');
    assert.equal(created.activity, 'idle');
    assert.equal(created.lastCommand, null);
    assert.equal((await getRun(runId)).activity, 'idle');

    const commandId = await turn(runId);
    let run = await getRun(runId);
    assert.equal(run.activity, 'waiting-runner');
    assert.deepEqual(run.lastCommand, {
      commandId,
      type: 'turn',
      state: 'accepted',
      failureKind: null,
      message: null,
      endedAt: null,
    });
    assert.deepEqual(await listed('projectId=activity-walk&activity=waiting-runner'), [runId]);

    const claim = await runner.claim();
    assert.equal(claim.status, 200, claim.raw);
    assert.equal(claim.body.run.activity, 'waiting-runner');
    assert.equal((await runner.poll()).status, 200);
    run = await getRun(runId);
    assert.equal(run.lastCommand.state, 'delivered');
    assert.equal(run.activity, 'waiting-runner', 'delivered is not yet taken');

    assert.equal((await runner.ack(commandId)).status, 200);
    run = await getRun(runId);
    assert.equal(run.activity, 'turn-active');
    assert.equal(run.state, 'running');
    assert.equal(run.lastCommand.state, 'confirmed');
    assert.deepEqual(await listed('projectId=activity-walk&activity=turn-active'), [runId]);
    await sameInListing(runId);

    const failed = await runner.finish(commandId, 'failed', {
      failureKind: 'provider-auth-failed',
      message: 'provider answered 401',
    });
    assert.equal(failed.status, 200, failed.raw);
    run = await getRun(runId);
    assert.equal(run.activity, 'idle');
    assert.equal(run.state, 'running', 'a failed turn leaves the run open');
    assert.equal(run.lastCommand.state, 'failed');
    assert.equal(run.lastCommand.failureKind, 'provider-auth-failed');
    assert.equal(run.lastCommand.message, 'provider answered 401');
    assert.ok(!Number.isNaN(Date.parse(run.lastCommand.endedAt)));
    assert.deepEqual(await listed('projectId=activity-walk&lastOutcome=failed'), [runId]);
    assert.deepEqual(await listed('projectId=activity-walk&activity=idle'), [runId]);
    assert.deepEqual(await listed('projectId=activity-walk&lastOutcome=completed'), []);
    await sameInListing(runId);

    // The runner closes the run after idling: the run ends as its only turn did.
    const closed = await runner.runStatus('completed', { message: 'runner idle for 120000 ms' });
    assert.equal(closed.status, 200, closed.raw);
    assert.equal(closed.body.state, 'failed');
    assert.equal(closed.body.failureKind, 'provider-auth-failed');
    assert.equal(closed.body.activity, 'closed');
    run = await getRun(runId);
    assert.equal(run.state, 'failed');
    assert.equal(run.failureKind, 'provider-auth-failed');
    assert.equal(run.message, 'provider answered 401');
    assert.equal(run.activity, 'closed');
    assert.equal(run.lastCommand.state, 'failed');
    assert.deepEqual(await listed('projectId=activity-walk&state=failed'), [runId]);
    assert.deepEqual(await listed('projectId=activity-walk&activity=closed'), [runId]);
    await sameInListing(runId);
    const terminal = (await t.api('GET', `/api/v1/runs/${runId}/events`)).body.events.find(
      (e: any) => e.name === 'run.terminal',
    );
    assert.equal(terminal.data.status, 'failed');
    assert.equal(terminal.data.failureKind, 'provider-auth-failed');
    assert.equal(terminal.data.details.lastCommandId, commandId);
    assert.equal(terminal.data.details.closedBecause, 'runner idle for 120000 ms');

    // Metrics count it as failed, by its failure kind.
    const metrics = (await t.api('GET', '/metrics')).raw;
    const value = (line: string) =>
      Number(
        metrics
          .split('\n')
          .find((l) => l.startsWith(line))
          ?.split(' ')
          .at(-1) ?? 'NaN',
      );
    assert.ok(value('svc_runs{state="failed"}') >= 1, 'svc_runs counts the failed run');
    assert.ok(
      value('svc_runs_failed{state="failed",failure_kind="provider-auth-failed"}') >= 1,
      'by failure kind',
    );
    assert.ok(value('svc_runs_activity{activity="closed"}') >= 1);
  });

  it('a run closed after its last turn ended ends in that turn outcome', async () => {
    const cases: Array<{
      name: string;
      play: (runner: TestRunner, runId: string) => Promise<void>;
      state: string;
      failureKind: string | null;
    }> = [
      {
        name: 'completed',
        play: async (runner, runId) => {
          const c = await turn(runId);
          await runner.ack(c);
          await runner.finish(c, 'completed');
        },
        state: 'completed',
        failureKind: null,
      },
      {
        name: 'no turn at all',
        play: () => Promise.resolve(),
        state: 'completed',
        failureKind: null,
      },
      {
        name: 'a failed turn, then a completed one',
        play: async (runner, runId) => {
          const first = await turn(runId, 'one');
          await runner.ack(first);
          await runner.finish(first, 'failed', { failureKind: 'provider-unavailable' });
          const second = await turn(runId, 'two');
          await runner.ack(second);
          await runner.finish(second, 'completed');
        },
        state: 'completed',
        failureKind: null,
      },
      {
        name: 'a completed turn, then a failed one',
        play: async (runner, runId) => {
          const first = await turn(runId, 'one');
          await runner.ack(first);
          await runner.finish(first, 'completed');
          const second = await turn(runId, 'two');
          await runner.ack(second);
          await runner.finish(second, 'failed', { failureKind: 'backend-failed' });
        },
        state: 'failed',
        failureKind: 'backend-failed',
      },
      {
        name: 'blocked (a kind that blocks the turn, not the run)',
        play: async (runner, runId) => {
          const c = await turn(runId);
          await runner.ack(c);
          const blocked = await runner.finish(c, 'blocked', {
            failureKind: 'tenant-policy-denied',
          });
          assert.equal(blocked.status, 200, blocked.raw);
          assert.notEqual((await getRun(runId)).state, 'blocked', 'the run is still open');
        },
        state: 'blocked',
        failureKind: 'tenant-policy-denied',
      },
      {
        name: 'cancelled by a command cancel',
        play: async (runner, runId) => {
          const c = await turn(runId);
          await runner.ack(c);
          const cancelled = await t.api('POST', `/api/v1/commands/${c}/cancel`, {});
          assert.equal(cancelled.status, 200, cancelled.raw);
        },
        state: 'cancelled',
        failureKind: 'cancelled',
      },
      {
        name: 'expired before any runner took it',
        play: async (_runner, runId) => {
          const c = await turn(runId);
          await sql`UPDATE commands SET expires_at = now() - interval '1 second'
            WHERE command_id = ${c}`.execute(t.manager.store.db);
          // Any read of the command expires it.
          const read = await t.api('GET', `/api/v1/runs/${runId}/commands/${c}`);
          assert.equal(read.body.state, 'expired');
        },
        state: 'failed',
        failureKind: 'command-expired',
      },
    ];
    for (const c of cases) {
      const { runId, runner } = await newRun('activity-rule');
      assert.equal((await runner.claim()).status, 200);
      await c.play(runner, runId);
      assert.equal((await getRun(runId)).activity, 'idle', c.name);
      const closed = await runner.runStatus('completed', { message: 'runner idle' });
      assert.equal(closed.status, 200, `${c.name}: ${closed.raw}`);
      const run = await getRun(runId);
      assert.equal(run.state, c.state, c.name);
      assert.equal(run.failureKind, c.failureKind, c.name);
      assert.equal(run.activity, 'closed', c.name);
    }
  });

  it('a turn queued behind an acknowledged one leaves the run turn-active', async () => {
    const { runId, runner } = await newRun('activity-queue');
    assert.equal((await runner.claim()).status, 200);
    const first = await turn(runId, 'one');
    assert.equal((await runner.ack(first)).status, 200);
    const second = await turn(runId, 'two');
    const run = await getRun(runId);
    assert.equal(run.lastCommand.commandId, second, 'the latest turn');
    assert.equal(run.lastCommand.state, 'accepted');
    assert.equal(run.activity, 'turn-active');
    await runner.finish(first, 'completed');
    assert.equal((await getRun(runId)).activity, 'waiting-runner');
    // A steer is not a turn: it does not become the last command.
    await runner.ack(second);
    const steer = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'steer',
      payload: { prompt: 'faster' },
    });
    assert.equal(steer.status, 201, steer.raw);
    assert.equal((await getRun(runId)).lastCommand.commandId, second);
  });

  it('a cancelled run is closed and its unfinished turn reads cancelled', async () => {
    const { runId } = await newRun('activity-cancel');
    await turn(runId);
    const cancelled = await t.api('POST', `/api/v1/runs/${runId}/cancel`, {});
    assert.equal(cancelled.status, 200, cancelled.raw);
    assert.equal(cancelled.body.activity, 'closed');
    assert.equal(cancelled.body.lastCommand.state, 'cancelled');
    assert.deepEqual(await listed('projectId=activity-cancel&lastOutcome=cancelled'), [runId]);
  });
});

describe('listing by activity and last outcome', () => {
  it('filters on several values, combines with other filters and pages', async () => {
    const project = 'activity-filter';
    const made: Record<string, string[]> = { idle: [], waiting: [], failed: [], completed: [] };
    for (let i = 0; i < 3; i++) {
      made['idle']!.push((await newRun(project)).runId);
      const waiting = await newRun(project);
      await turn(waiting.runId);
      made['waiting']!.push(waiting.runId);
      for (const outcome of ['failed', 'completed'] as const) {
        const r = await newRun(project);
        await r.runner.claim();
        const c = await turn(r.runId);
        await r.runner.ack(c);
        await r.runner.finish(
          c,
          outcome,
          outcome === 'failed' ? { failureKind: 'provider-unavailable' } : {},
        );
        made[outcome]!.push(r.runId);
      }
    }
    const sorted = (ids: string[]) => [...ids].sort();
    assert.deepEqual(
      sorted(await listed(`projectId=${project}&activity=idle`)),
      sorted([...made['idle']!, ...made['failed']!, ...made['completed']!]),
    );
    assert.deepEqual(
      sorted(await listed(`projectId=${project}&activity=waiting-runner,turn-active`)),
      sorted(made['waiting']!),
    );
    assert.deepEqual(
      sorted(await listed(`projectId=${project}&lastOutcome=failed,completed`)),
      sorted([...made['failed']!, ...made['completed']!]),
    );
    assert.deepEqual(
      sorted(await listed(`projectId=${project}&lastOutcome=failed&activity=idle&state=running`)),
      sorted(made['failed']!),
    );
    assert.deepEqual(await listed(`projectId=${project}&activity=closed`), []);
    // Paged two at a time, every failed run once.
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: any = await t.api(
        'GET',
        `/api/v1/runs?projectId=${project}&lastOutcome=failed&limit=2${cursor ? `&cursor=${cursor}` : ''}`,
      );
      seen.push(...page.body.runs.map((r: any) => r.runId));
      cursor = page.body.nextCursor;
    } while (cursor);
    assert.deepEqual(sorted(seen), sorted(made['failed']!));
  });

  it('refuses unknown activities and outcomes as schema-invalid', async () => {
    for (const query of [
      'activity=busy',
      'activity=idle,',
      'activity=IDLE',
      'lastOutcome=running',
      'lastOutcome=confirmed',
      'lastOutcome=failed;completed',
    ]) {
      const response = await t.api('GET', `/api/v1/runs?${query}`);
      assert.equal(response.status, 400, `${query}: ${response.raw}`);
      assert.equal(response.body.failureKind, 'schema-invalid');
    }
  });

  it('reads a page of 200 runs in the same few statements as a page of one (no query per run)', async () => {
    for (let i = 0; i < 200; i++) {
      const { runId } = await newRun('activity-n1');
      if (i % 2 === 0) await turn(runId);
    }
    const count = async (query: string) => {
      statements = 0;
      const page = await t.api('GET', `/api/v1/runs?${query}`);
      assert.equal(page.status, 200, page.raw);
      return { statements, runs: page.body.runs.length as number };
    };
    {
      const one = await count('projectId=activity-n1&limit=1');
      const all = await count('projectId=activity-n1&limit=200');
      const filtered = await count('projectId=activity-n1&activity=waiting-runner&limit=200');
      assert.equal(one.runs, 1);
      assert.equal(all.runs, 200);
      assert.equal(filtered.runs, 100);
      assert.ok(one.statements >= 1, 'the statements are counted');
      assert.ok(one.statements <= 3, `${one.statements} statements for one run`);
      assert.equal(all.statements, one.statements, 'a page costs the same whatever its size');
      assert.equal(filtered.statements, one.statements);
    }
  });
});
