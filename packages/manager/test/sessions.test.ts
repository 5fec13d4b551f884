import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import {
  createSession,
  SESSION_RUN_BASE,
  startTestManager,
  TestRunner,
  type TestManager,
} from './helpers.js';

let t: TestManager;
before(async () => {
  t = await startTestManager();
  await t.configureProfile('builtin-a');
  await t.configureProfile('builtin-c');
});
after(() => t.close());

const runBase = SESSION_RUN_BASE;
let counter = 0;
const newSession = (extra: Record<string, unknown> = {}): Promise<any> => createSession(t, extra);
const send = (id: string, body: Record<string, unknown>) =>
  t.api('POST', `/api/v1/sessions/${id}/send`, { runnerJob: false, ...body });
const counts = async () => {
  const n = async (table: string) =>
    Number(
      (
        await sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.table(table)}`.execute(
          t.manager.store.db,
        )
      ).rows[0]!.n,
    );
  return {
    runs: await n('runs'),
    commands: await n('commands'),
    runner_jobs: await n('runner_jobs'),
    sessions: await n('sessions'),
    session_readers: await n('session_readers'),
    events: await n('events'),
  };
};

/** A session whose active turn is acknowledged by a live runner. */
async function activeTurn() {
  const session = await newSession();
  const sent = await send(session.sessionId, { prompt: 'first' });
  const runner = new TestRunner(
    t,
    `rnr-sess${String(++counter).padStart(4, '0')}`,
    sent.body.run.runId,
  );
  await runner.claim();
  await runner.poll();
  await runner.ack(sent.body.command.commandId);
  return { session, sent: sent.body, runner };
}

describe('sessions', () => {
  it('creates the record and its volume synchronously, never storing secrets', async () => {
    const session = await newSession({ conversationId: 'conv-1' });
    assert.match(session.sessionId, /^ses-/);
    assert.equal(session.executionState, 'idle');
    assert.equal(session.storage.storageKind, 'pvc');
    assert.equal(session.storage.pvcName, `svc-v01-session-${session.sessionId}`);
    assert.equal(session.storage.valuesPrinted, false);
    assert.ok(
      existsSync(`${t.dataDir}/sessions/${session.sessionId}`),
      'the volume exists when the response arrives',
    );
    const again = await t.api('POST', '/api/v1/sessions', {
      sessionId: session.sessionId,
      backendProfile: 'builtin-a',
      runBase,
    });
    assert.equal(again.status, 200);
    const missingProfile = await t.api('POST', '/api/v1/sessions', {
      backendProfile: 'builtin-b',
      runBase,
    });
    assert.equal(missingProfile.body.failureKind, 'secret-unavailable');
    const badTenant = await t.api('POST', '/api/v1/sessions', {
      backendProfile: 'builtin-a',
      runBase: { ...runBase, tenantId: 'tenant-x' },
    });
    assert.equal(badTenant.body.failureKind, 'tenant-policy-denied');
  });

  it('decides send from durable state: new run when nothing is active, and a dry run writes nothing', async () => {
    const session = await newSession();
    const before = await counts();
    const plan = await send(session.sessionId, { prompt: 'hello', dryRun: true, runnerJob: {} });
    assert.equal(plan.status, 200, plan.raw);
    assert.equal(plan.body.decision, 'new-run');
    assert.equal(plan.body.internalCommandType, 'turn');
    assert.equal(plan.body.mutation, false);
    assert.equal(plan.body.activeBefore.reason, 'no-active-command');
    assert.equal(plan.body.plan.createRunnerJob, true);
    assert.equal(plan.body.valuesPrinted, false);
    assert.deepEqual(await counts(), before, 'dry run wrote nothing at all');
    assert.equal(
      (await t.api('GET', `/api/v1/sessions/${session.sessionId}`)).body.version,
      session.version,
    );

    const sent = await send(session.sessionId, { prompt: 'hello' });
    assert.equal(sent.status, 201, sent.raw);
    assert.equal(sent.body.decision, 'new-run');
    assert.equal(sent.body.run.backendProfile, 'builtin-a');
    const run = await t.api('GET', `/api/v1/runs/${sent.body.run.runId}`);
    assert.equal(run.body.sessionRef.sessionId, session.sessionId);
    const fetched = await t.api('GET', `/api/v1/sessions/${session.sessionId}`);
    assert.equal(fetched.body.executionState, 'running');
    assert.equal(fetched.body.activeCommandId, sent.body.command.commandId);
    assert.equal(fetched.body.liveness.phase, 'waiting-runner');
    assert.match(fetched.body.supervisor.next, new RegExp(`sessions output ${session.sessionId}`));
  });

  it('starts a new run while the active turn is pending or waiting for a runner', async () => {
    const session = await newSession();
    const first = await send(session.sessionId, { prompt: 'one' });
    const pending = await send(session.sessionId, { prompt: 'two', dryRun: true });
    assert.equal(pending.body.decision, 'new-run');
    assert.equal(pending.body.activeBefore.reason, 'active-turn-not-acknowledged');
    const runner = new TestRunner(t, 'rnr-waiting01', first.body.run.runId);
    await runner.claim();
    await runner.poll(); // delivered, not acknowledged
    const waiting = await send(session.sessionId, { prompt: 'three', dryRun: true });
    assert.equal(waiting.body.decision, 'new-run');
    assert.equal(waiting.body.activeBefore.commandState, 'delivered');
  });

  it('steers the active turn only when it is acknowledged and the lease is alive', async () => {
    const { session, sent, runner } = await activeTurn();
    const steer = await send(session.sessionId, { prompt: 'focus on tests' });
    assert.equal(steer.status, 201, steer.raw);
    assert.equal(steer.body.decision, 'steer');
    assert.equal(steer.body.internalCommandType, 'steer');
    assert.equal(steer.body.run.runId, sent.run.runId, 'no new run');
    const command = await t.api(
      'GET',
      `/api/v1/runs/${sent.run.runId}/commands/${steer.body.command.commandId}`,
    );
    assert.equal(command.body.type, 'steer');
    assert.equal(command.body.targetCommandId, sent.command.commandId);
    // Stale lease: a new run instead.
    await t.manager.store.db
      .updateTable('runs')
      .set({ lease_expires_at: new Date(Date.now() - 1000) })
      .where('run_id', '=', sent.run.runId)
      .execute();
    const stale = await send(session.sessionId, { prompt: 'again', dryRun: true });
    assert.equal(stale.body.decision, 'new-run');
    assert.equal(stale.body.activeBefore.reason, 'lease-expired');
    assert.equal(stale.body.activeBefore.leaseExpired, true);
    void runner;
  });

  it('marks the session terminal with a version bump, writes the new thread back, and inherits it', async () => {
    const { session, sent, runner } = await activeTurn();
    const running = (await t.api('GET', `/api/v1/sessions/${session.sessionId}`)).body;
    await runner.finish(sent.command.commandId, 'completed', {
      threadId: 'thread-aaa',
      turnId: 'turn-1',
    });
    const done = (await t.api('GET', `/api/v1/sessions/${session.sessionId}`)).body;
    assert.equal(done.executionState, 'terminal');
    assert.ok(done.version > running.version);
    assert.equal(done.threadId, 'thread-aaa');
    assert.equal(done.lastOutcome, 'completed');
    const next = await send(session.sessionId, { prompt: 'next step' });
    assert.equal(next.body.decision, 'new-run');
    assert.equal(next.body.activeBefore.reason, 'active-command-terminal');
    assert.equal(
      next.body.command.threadId,
      'thread-aaa',
      'the follow-up turn resumes the session thread',
    );
    const run = await t.api('GET', `/api/v1/runs/${next.body.run.runId}`);
    assert.equal(run.body.sessionRef.threadId, 'thread-aaa');
    assert.equal(
      run.body.backendProfile,
      'builtin-a',
      'follow-up turns inherit the session profile',
    );
  });

  it('never reuses another profile thread on a profile switch', async () => {
    const { session, sent, runner } = await activeTurn();
    await runner.finish(sent.command.commandId, 'completed', { threadId: 'thread-of-a' });
    const switched = await send(session.sessionId, {
      prompt: 'use c',
      backendProfile: 'builtin-c',
    });
    assert.equal(switched.body.activeBefore.reason, 'profile-switch');
    assert.equal(switched.body.run.backendProfile, 'builtin-c');
    assert.equal(switched.body.command.threadId, null, 'a new thread for the other profile');
    const run = await t.api('GET', `/api/v1/runs/${switched.body.run.runId}`);
    assert.equal(run.body.sessionRef.threadId, null);
  });

  it('lists default = running + unread per reader, with read cursors, filters and paging', async () => {
    const reader = `reader-${Date.now()}`;
    const { session, sent, runner } = await activeTurn();
    const list = async (query: string) =>
      (await t.api('GET', `/api/v1/sessions?readerId=${reader}&limit=200${query}`)).body;
    const ids = (page: any) => page.sessions.map((s: any) => s.sessionId);
    assert.ok(
      ids(await list('')).includes(session.sessionId),
      'running sessions are in the default list',
    );
    await runner.finish(sent.command.commandId, 'completed');
    assert.ok(ids(await list('&state=unread')).includes(session.sessionId));
    const read = await t.api('POST', `/api/v1/sessions/${session.sessionId}/read`, {
      readerId: reader,
    });
    assert.equal(read.body.reader.unread, false);
    assert.ok(
      !ids(await list('')).includes(session.sessionId),
      'read: gone from this reader default list',
    );
    assert.ok(ids(await list('&state=all')).includes(session.sessionId));
    assert.ok(ids(await list('&state=terminal')).includes(session.sessionId));
    assert.ok(!ids(await list('&state=running')).includes(session.sessionId));
    assert.ok(
      ids(
        await t.api('GET', `/api/v1/sessions?readerId=someone-else&limit=200`).then((r) => r.body),
      ).includes(session.sessionId),
      'other readers still see it',
    );
    await send(session.sessionId, { prompt: 'more' });
    assert.ok(
      ids(await list('')).includes(session.sessionId),
      'new activity: back in the default list',
    );
    const filtered = await list('&state=all&backendProfile=builtin-c');
    assert.ok(filtered.sessions.every((s: any) => s.backendProfile === 'builtin-c'));

    const seen = new Set<string>();
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: any = (
        await t.api('GET', `/api/v1/sessions?state=all&limit=2${cursor ? `&cursor=${cursor}` : ''}`)
      ).body;
      for (const s of page.sessions) {
        assert.ok(!seen.has(s.sessionId), 'no session twice across pages');
        seen.add(s.sessionId);
      }
      cursor = page.nextCursor;
      pages++;
    } while (cursor && pages < 100);
    assert.equal(seen.size, (await counts()).sessions);
    assert.equal((await t.api('GET', '/api/v1/sessions?cursor=garbage')).status, 400);
  });

  it('pages trace and output from the owning run only', async () => {
    const { session, sent, runner } = await activeTurn();
    await runner.append([
      { key: 's1', commandId: sent.command.commandId, category: 'backend_status', data: { x: 1 } },
      {
        key: 's2',
        commandId: sent.command.commandId,
        category: 'assistant_message',
        data: { text: 'hi' },
      },
      {
        key: 's3',
        commandId: sent.command.commandId,
        category: 'command_output',
        data: { text: 'out' },
      },
    ]);
    const trace = (await t.api('GET', `/api/v1/sessions/${session.sessionId}/trace?limit=1000`))
      .body;
    const output = (await t.api('GET', `/api/v1/sessions/${session.sessionId}/output?limit=1000`))
      .body;
    assert.ok(trace.events.length > output.events.length);
    assert.deepEqual(
      output.events.map((e: any) => e.category),
      ['assistant_message', 'command_output'],
    );
    assert.ok(trace.events.every((e: any) => e.runId === sent.run.runId));
    const other = await activeTurn();
    const foreign = await t.api(
      'GET',
      `/api/v1/sessions/${session.sessionId}/trace?runId=${other.sent.run.runId}`,
    );
    assert.equal(foreign.status, 404);
    const paged = (
      await t.api(
        'GET',
        `/api/v1/sessions/${session.sessionId}/trace?afterSeq=${trace.events[0].seq}&limit=1`,
      )
    ).body;
    assert.equal(paged.events[0].seq, trace.events[1].seq);
  });

  it('cancels the active command through control', async () => {
    const { session, sent } = await activeTurn();
    const control = await t.api('POST', `/api/v1/sessions/${session.sessionId}/control`, {
      action: 'cancel',
      reason: 'user',
    });
    assert.equal(control.status, 200, control.raw);
    assert.equal(control.body.cancelled.commandId, sent.command.commandId);
    assert.equal(
      (await t.api('GET', `/api/v1/runs/${sent.run.runId}/commands/${sent.command.commandId}`)).body
        .state,
      'cancelled',
    );
    assert.equal(control.body.session.executionState, 'terminal');
    const nothing = await t.api(
      'POST',
      `/api/v1/sessions/${(await newSession()).sessionId}/control`,
      { action: 'cancel' },
    );
    assert.equal(nothing.status, 409);
    assert.equal(
      (await t.api('POST', `/api/v1/sessions/${session.sessionId}/control`, { action: 'explode' }))
        .status,
      400,
    );
  });

  it('takes a storage report only from the lease holder of the session run', async () => {
    const { session, runner } = await activeTurn();
    const before = (await t.api('GET', `/api/v1/sessions/${session.sessionId}/storage`)).body;
    const forged = { sizeBytes: 1, filesCount: 1, sha256: 'f'.repeat(64) };
    const url = `/api/v1/sessions/${session.sessionId}/storage/refresh`;
    const refusals = [
      // no lease token at all
      await t.api('POST', url, { runnerId: runner.runnerId, ...forged }),
      // the holder's runnerId with a made-up token
      await t.api('POST', url, { runnerId: runner.runnerId, ...forged }, { 'x-lease-token': 'x' }),
      // the holder's token under another runnerId
      await t.api(
        'POST',
        url,
        { runnerId: 'rnr-stranger0001', ...forged },
        { 'x-lease-token': runner.leaseToken ?? '' },
      ),
    ];
    for (const refused of refusals) {
      assert.equal(refused.status, 409, refused.raw);
      assert.equal(refused.body.failureKind, 'runner-lease-conflict');
      assert.doesNotMatch(refused.raw, new RegExp(runner.leaseToken ?? 'unset'));
    }
    const anonymous = await t.api('POST', url, forged);
    assert.equal(anonymous.status, 400, 'a report names its runner');
    const unknown = await runner.refreshStorage('ses-doesnotexist', forged);
    assert.equal(unknown.status, 404);
    const after = (await t.api('GET', `/api/v1/sessions/${session.sessionId}/storage`)).body;
    assert.deepEqual(
      [after.storage_size_bytes, after.storage_sha256],
      [before.storage_size_bytes, before.storage_sha256],
      'no refused report changed the summary',
    );
    const accepted = await runner.refreshStorage(session.sessionId, forged);
    assert.equal(accepted.status, 200, accepted.raw);
    assert.equal(accepted.body.storage_sha256, forged.sha256);
  });

  it('reports, refreshes and evicts storage; an evicted session takes no command and no runner job', async () => {
    const { session, sent, runner } = await activeTurn();
    const storage = (await t.api('GET', `/api/v1/sessions/${session.sessionId}/storage`)).body;
    assert.deepEqual(
      [storage.pvcName, storage.pvcPhase, storage.storage_kind],
      [`svc-v01-session-${session.sessionId}`, 'Bound', 'pvc'],
    );
    const sha = 'a'.repeat(64);
    const summary = { sizeBytes: 1234, filesCount: 3, sha256: sha };
    const refreshed = (await runner.refreshStorage(session.sessionId, summary)).body;
    assert.deepEqual(
      [refreshed.storage_size_bytes, refreshed.storage_files_count, refreshed.storage_sha256],
      [1234, 3, sha],
    );
    const evicted = (await t.api('DELETE', `/api/v1/sessions/${session.sessionId}/storage`)).body;
    assert.equal(evicted.storage_kind, 'evicted');
    assert.ok(evicted.storage_evicted_at);
    assert.ok(!existsSync(`${t.dataDir}/sessions/${session.sessionId}`), 'the volume is gone');
    const jobsBefore = (await counts()).runner_jobs;
    const refused = await t.api('POST', `/api/v1/sessions/${session.sessionId}/send`, {
      prompt: 'more',
    });
    assert.equal(refused.status, 410);
    assert.equal(refused.body.failureKind, 'session-store-evicted');
    const command = await t.api('POST', `/api/v1/runs/${sent.run.runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'x' },
    });
    assert.equal(command.body.failureKind, 'session-store-evicted');
    const job = await t.api('POST', `/api/v1/runs/${sent.run.runId}/runner-jobs`, {
      commandId: sent.command.commandId,
    });
    assert.equal(job.body.failureKind, 'session-store-evicted');
    assert.equal((await counts()).runner_jobs, jobsBefore, 'no runner job was created');
    const run = await t.api('POST', '/api/v1/runs', {
      ...runBase,
      backendProfile: 'builtin-a',
      traceSink: null,
      sessionRef: { sessionId: session.sessionId },
    });
    assert.equal(run.body.failureKind, 'session-store-evicted');
  });

  it('garbage-collects expired storage of sessions without an active run', async () => {
    const idle = await newSession();
    const busy = await activeTurn();
    await t.manager.store.db
      .updateTable('sessions')
      .set({ expires_at: new Date(Date.now() - 60_000) })
      .where('session_id', 'in', [idle.sessionId, busy.session.sessionId])
      .execute();
    await t.manager.sessionGc.runOnce();
    assert.equal(
      (await t.api('GET', `/api/v1/sessions/${idle.sessionId}/storage`)).body.storage_kind,
      'evicted',
    );
    assert.equal(
      (await t.api('GET', `/api/v1/sessions/${busy.session.sessionId}/storage`)).body.storage_kind,
      'pvc',
      'an active run keeps its storage',
    );
  });

  it('refuses runs naming unknown sessions', async () => {
    const run = await t.api('POST', '/api/v1/runs', {
      ...runBase,
      backendProfile: 'builtin-a',
      traceSink: null,
      sessionRef: { sessionId: 'ses-00000000000000' },
    });
    assert.equal(run.status, 404);
  });
});
