import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import {
  acknowledge,
  dispatch,
  finish,
  refresh,
  rowCount,
  show,
  startQueueRig,
  submit,
  type QueueRig,
} from './queue-helpers.js';
import { createSession } from './helpers.js';

let rig: QueueRig;
before(async () => {
  rig = await startQueueRig();
});
after(() => rig.close());

const api = (method: string, url: string, body?: unknown) => rig.t.api(method, url, body);
const ofTask = (taskId: string) => sql`metadata->>'queueTaskId' = ${taskId}`;

describe('queue dispatch', () => {
  it('creates the attempt, a new session, the run, the turn and the runner Job, and writes them back', async () => {
    const task = await submit(rig.t, {
      workspaceRef: { kind: 'git', repoUrl: 'https://example.com/acme/web.git', branch: 'main' },
      metadata: { labWorkspaceId: 'ws-7' },
    });
    const started = Date.now();
    const res = await api('POST', `/api/v1/queue/tasks/${task.taskId}/dispatch`);
    assert.equal(res.status, 201, res.raw);
    assert.ok(Date.now() - started < 10_000, 'dispatch returns without waiting for a turn');
    const d = res.body;
    assert.equal(d.created, true);
    assert.equal(d.mutation, true);
    assert.equal(d.attempt.retryIndex, 0);
    assert.equal(d.attempt.state, 'dispatched');
    assert.equal(d.session.origin, 'bootstrapped');
    assert.equal(d.session.thread, 'start', 'a bootstrapped session is never presented as resumed');
    assert.equal(d.sessionPath, `/api/v1/sessions/${d.session.sessionId}`);
    assert.equal(d.runnerJob.attemptId, d.attempt.attemptId, 'one identity across the records');
    assert.equal(d.command.type, 'turn');
    assert.equal(d.valuesPrinted, false);

    const run = (await api('GET', `/api/v1/runs/${d.run.runId}`)).body;
    assert.deepEqual(run.workspaceRef, task.workspaceRef, 'workspaceRef passed unchanged');
    assert.equal(run.sessionRef.sessionId, d.session.sessionId);
    assert.equal(run.metadata.queueTaskId, task.taskId);
    assert.equal(run.metadata.labWorkspaceId, 'ws-7');
    const command = (
      await api('GET', `/api/v1/runs/${d.run.runId}/commands/${d.command.commandId}`)
    ).body;
    assert.equal(command.payload.prompt, task.payload.prompt);
    const session = (await api('GET', d.sessionPath)).body;
    assert.equal(session.executionState, 'running');
    assert.equal(session.activeCommandId, d.command.commandId);
    assert.ok(existsSync(`${rig.t.dataDir}/sessions/${d.session.sessionId}`), 'volume exists');

    const shown = await show(rig.t, task.taskId);
    assert.equal(shown.state, 'dispatched');
    assert.equal(shown.sessionPath, d.sessionPath);
    assert.ok(shown.changeSeq > task.changeSeq);
    const latest = shown.latestAttempt;
    assert.deepEqual(
      [latest.attemptId, latest.runId, latest.commandId, latest.sessionId, latest.sessionPath],
      [d.attempt.attemptId, d.run.runId, d.command.commandId, d.session.sessionId, d.sessionPath],
    );
    assert.equal(latest.runnerJobId, d.runnerJob.runnerJobId);
    assert.equal(latest.supervisor.phase, 'waiting-runner');
    assert.equal(latest.supervisor.timeoutBudget.state, 'within-budget');
    assert.ok(latest.supervisor.recoveryAction);
    assert.equal(shown.next, `sessions output ${d.session.sessionId} --follow`);
    assert.equal(JSON.stringify(shown).includes('"events"'), false, 'no output or trace proxied');
  });

  it('creates exactly one attempt when 20 dispatches of one task race', async () => {
    const task = await submit(rig.t);
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        api('POST', `/api/v1/queue/tasks/${task.taskId}/dispatch`, {}),
      ),
    );
    const statuses = answers.map((a) => a.status).sort();
    assert.deepEqual(statuses, [201, ...Array<number>(19).fill(409)], JSON.stringify(statuses));
    for (const lost of answers.filter((a) => a.status === 409))
      assert.equal(lost.body.failureKind, 'attempt-in-progress');
    const where = sql`task_id = ${task.taskId}`;
    assert.equal(await rowCount(rig.t, 'queue_attempts', where), 1);
    assert.equal(await rowCount(rig.t, 'runs', ofTask(task.taskId)), 1);
    const runId = answers.find((a) => a.status === 201)!.body.run.runId;
    assert.equal(await rowCount(rig.t, 'commands', sql`run_id = ${runId}`), 1);
    assert.equal(await rowCount(rig.t, 'runner_jobs', sql`run_id = ${runId}`), 1);
    assert.equal((await show(rig.t, task.taskId)).counters.attempts, 1);
    // The database itself refuses a second attempt in flight, whoever writes it.
    await assert.rejects(
      rig.t.manager.store.db
        .insertInto('queue_attempts')
        .values({
          attempt_id: 'att-second-open-01',
          task_id: task.taskId,
          retry_index: 7,
          state: 'dispatched',
        })
        .execute(),
      /queue_attempts_one_open_idx/,
    );
  });

  it('answers a repeated dispatch naming the same attemptId with that attempt', async () => {
    const task = await submit(rig.t);
    const attemptId = 'att-client-chosen-0001';
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        api('POST', `/api/v1/queue/tasks/${task.taskId}/dispatch`, { attemptId }),
      ),
    );
    assert.equal(answers.filter((a) => a.status === 201).length, 1);
    assert.ok(answers.every((a) => a.status === 201 || a.status === 200));
    assert.ok(answers.every((a) => a.body.attempt.attemptId === attemptId));
    assert.equal(await rowCount(rig.t, 'runs', ofTask(task.taskId)), 1);
    const other = await submit(rig.t);
    const stolen = await api('POST', `/api/v1/queue/tasks/${other.taskId}/dispatch`, { attemptId });
    assert.equal(stolen.status, 409);
    assert.equal(stolen.body.failureKind, 'state-conflict');
  });

  it('refreshes the outcome from the run and command records, reading no event', async () => {
    const task = await submit(rig.t);
    const d = await dispatch(rig.t, task.taskId);
    const runner = await acknowledge(rig.t, d);
    const running = (await refresh(rig.t, task.taskId)).body;
    assert.equal(running.state, 'running');
    assert.equal(running.latestAttempt.state, 'running');
    assert.equal(running.latestAttempt.supervisor.phase, 'waiting-model');
    assert.ok(running.latestAttempt.startedAt);
    const again = (await refresh(rig.t, task.taskId)).body;
    assert.equal(again.version, running.version, 'a refresh with no news is not a change');

    await runner.append([
      {
        key: 'a1',
        commandId: d.command.commandId,
        category: 'assistant_message',
        data: { text: 'done', final: true, replyAuthority: true },
      },
    ]);
    await runner.finish(d.command.commandId, 'completed', { threadId: 'thread-q1' });
    // Refresh, show, list, stats and commander work with the events table out of reach.
    const db = rig.t.manager.store.db;
    await sql`ALTER TABLE events RENAME TO events_hidden`.execute(db);
    try {
      const res = await refresh(rig.t, task.taskId);
      assert.equal(res.status, 200, res.raw);
      const done = res.body;
      assert.equal(done.state, 'completed');
      assert.equal(done.latestAttempt.state, 'completed');
      assert.equal(done.latestAttempt.terminalStatus, 'completed');
      assert.equal(done.latestAttempt.failureKind, null);
      assert.equal(done.latestAttempt.eventCount, 2, 'from the command record: message + terminal');
      assert.ok(done.latestAttempt.durationMs >= 0);
      assert.equal(done.latestAttempt.runner.runnerId, d.attempt.runner.runnerId);
      assert.equal(done.latestAttempt.supervisor.phase, 'terminal');
      assert.equal(done.latestAttempt.supervisor.timeoutBudget.state, 'terminal');
      assert.equal(done.latestAttempt.supervisor.recoveryAction, 'continue-same-session');
      assert.equal(done.latestAttempt.supervisor.lastActivitySeq, done.latestAttempt.lastEventSeq);
      assert.ok(done.terminalAt);
      assert.match(done.latestAttempt.outputRef.output, /\/output\?runId=/);
      for (const url of [
        `/api/v1/queue/tasks/${task.taskId}`,
        '/api/v1/queue/tasks?limit=5',
        '/api/v1/queue/tasks?updatedAfter=0&limit=5',
        '/api/v1/queue/stats',
        '/api/v1/queue/commander?readerId=r1',
      ])
        assert.equal((await api('GET', url)).status, 200, url);
    } finally {
      await sql`ALTER TABLE events_hidden RENAME TO events`.execute(db);
    }
    const refused = await api('POST', `/api/v1/queue/tasks/${task.taskId}/dispatch`, {});
    assert.equal(refused.status, 409);
    assert.equal(refused.body.failureKind, 'task-terminal');
  });

  it('retries a failed attempt as a new attempt with a rising retry index, up to maxAttempts', async () => {
    const task = await submit(rig.t, { maxAttempts: 2 });
    const first = await dispatch(rig.t, task.taskId);
    await finish(rig.t, first, 'failed', {
      failureKind: 'provider-unavailable',
      message: 'HTTP 503',
    });
    const failed = (await refresh(rig.t, task.taskId)).body;
    assert.equal(failed.state, 'failed');
    assert.equal(failed.latestAttempt.failureKind, 'provider-unavailable');
    assert.equal(failed.latestAttempt.message, 'HTTP 503');
    assert.equal(failed.counters.failed, 1);

    const second = await dispatch(rig.t, task.taskId);
    assert.equal(second.attempt.retryIndex, 1);
    assert.notEqual(second.attempt.attemptId, first.attempt.attemptId);
    assert.notEqual(second.run.runId, first.run.runId);
    assert.notEqual(
      second.session.sessionId,
      first.session.sessionId,
      'a task without a session gets a fresh session per attempt, never a resume',
    );
    assert.equal(second.session.thread, 'start');
    await finish(rig.t, second, 'blocked', { failureKind: 'required-skill-unavailable' });
    const blocked = (await refresh(rig.t, task.taskId)).body;
    assert.equal(blocked.state, 'blocked');
    assert.equal(blocked.counters.blocked, 1);
    const exhausted = await api('POST', `/api/v1/queue/tasks/${task.taskId}/dispatch`, {});
    assert.equal(exhausted.status, 409);
    assert.equal(exhausted.body.failureKind, 'attempts-exhausted');
    const stats = (await api('GET', '/api/v1/queue/stats?queue=main')).body;
    assert.ok(stats.attempts.retries >= 1);
    assert.ok(stats.attempts.byFailureKind['provider-unavailable'] >= 1);
  });

  it('cancels a running task with its command, and a cancelled task cannot be dispatched', async () => {
    const task = await submit(rig.t);
    const d = await dispatch(rig.t, task.taskId);
    await acknowledge(rig.t, d);
    const res = await api('POST', `/api/v1/queue/tasks/${task.taskId}/cancel`, {
      reason: 'wrong repository',
    });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.state, 'cancelled');
    assert.equal(res.body.latestAttempt.state, 'cancelled');
    const command = (
      await api('GET', `/api/v1/runs/${d.run.runId}/commands/${d.command.commandId}`)
    ).body;
    assert.equal(command.state, 'cancelled', 'the attempt command was cancelled too');
    const refused = await api('POST', `/api/v1/queue/tasks/${task.taskId}/dispatch`, {});
    assert.equal(refused.status, 409);
    assert.equal(refused.body.failureKind, 'task-terminal');
    const refreshed = (await refresh(rig.t, task.taskId)).body;
    assert.equal(refreshed.state, 'cancelled', 'refresh never revives a cancelled task');
  });

  it('runs a task with a sessionRef in that session: its profile, its thread, never while busy', async () => {
    await rig.t.configureProfile('builtin-c');
    const session = await createSession(rig.t, { backendProfile: 'builtin-c' });
    const first = await submit(rig.t, { sessionRef: { sessionId: session.sessionId } });
    assert.equal(first.backendProfile, 'builtin-c', 'the task inherits the session profile');
    const d1 = await dispatch(rig.t, first.taskId);
    assert.equal(d1.session.origin, 'task-session-ref');
    assert.equal(d1.session.sessionId, session.sessionId);
    assert.equal(d1.session.thread, 'start', 'the session has no thread yet');

    const second = await submit(rig.t, { sessionRef: { sessionId: session.sessionId } });
    const busy = await api('POST', `/api/v1/queue/tasks/${second.taskId}/dispatch`, {});
    assert.equal(busy.status, 409);
    assert.equal(busy.body.failureKind, 'state-conflict');
    assert.equal(busy.body.details.reason, 'session-busy');
    assert.equal((await show(rig.t, second.taskId)).counters.attempts, 0, 'no attempt spent');

    await finish(rig.t, d1, 'completed', { threadId: 'thread-in-session' });
    const d2 = await dispatch(rig.t, second.taskId);
    assert.equal(d2.session.thread, 'resume');
    const run = (await api('GET', `/api/v1/runs/${d2.run.runId}`)).body;
    assert.equal(run.sessionRef.threadId, 'thread-in-session');
    assert.equal(run.backendProfile, 'builtin-c');

    const foreign = await api('POST', '/api/v1/queue/tasks', {
      tenantId: 'tenant-b',
      projectId: 'proj-1',
      queue: 'main',
      title: 'other tenant',
      payload: { prompt: 'x' },
      sessionRef: { sessionId: session.sessionId },
    });
    assert.equal(foreign.body.failureKind, 'tenant-policy-denied');
  });

  it('refuses a dispatch whose profile is unusable before spending an attempt', async () => {
    const task = await submit(rig.t, { backendProfile: 'builtin-d' });
    const res = await api('POST', `/api/v1/queue/tasks/${task.taskId}/dispatch`, {});
    assert.equal(res.status, 424);
    assert.equal(res.body.failureKind, 'secret-unavailable');
    const after = await show(rig.t, task.taskId);
    assert.equal(after.state, 'queued');
    assert.equal(after.counters.attempts, 0);
    const noAttempt = await api('POST', `/api/v1/queue/tasks/${task.taskId}/refresh`);
    assert.equal(noAttempt.status, 409);
    assert.equal(noAttempt.body.details.reason, 'no-attempt');
  });

  it('records a dispatch that fails after its attempt began, and cancels the run it left', async () => {
    const task = await submit(rig.t);
    // The launcher cannot write job directories: its root is a file now.
    const jobs = join(rig.t.dataDir, 'jobs');
    await rename(jobs, `${jobs}.aside`).catch(() => undefined);
    await writeFile(jobs, 'not a directory');
    let res;
    try {
      res = await api('POST', `/api/v1/queue/tasks/${task.taskId}/dispatch`, {});
    } finally {
      await rm(jobs, { force: true });
      await rename(`${jobs}.aside`, jobs).catch(() => undefined);
    }
    assert.equal(res.status, 502, res.raw);
    assert.equal(res.body.failureKind, 'infra-failed');
    const failed = await show(rig.t, task.taskId);
    assert.equal(failed.state, 'failed');
    assert.equal(failed.counters.failed, 1);
    assert.equal(failed.latestAttempt.failureKind, 'infra-failed');
    assert.equal(failed.latestAttempt.runner.phase, 'failed');
    const run = (await api('GET', `/api/v1/runs/${failed.latestAttempt.runId}`)).body;
    assert.equal(run.state, 'cancelled', 'no run is left waiting for a runner that never came');
    const session = (await api('GET', failed.sessionPath)).body;
    assert.equal(session.executionState, 'terminal');
    const refreshed = (await refresh(rig.t, task.taskId)).body;
    assert.equal(refreshed.state, 'failed', 'the cleanup cancel does not rewrite the outcome');
    assert.equal(refreshed.latestAttempt.failureKind, 'infra-failed');
    const retry = await dispatch(rig.t, task.taskId);
    assert.equal(retry.attempt.retryIndex, 1);
  });

  it('recovers a task whose dispatch was cut off before its run existed', async () => {
    const task = await submit(rig.t);
    const db = rig.t.manager.store.db;
    // What a crash between the two dispatch steps leaves: an attempt without a run, aged.
    await db
      .insertInto('queue_attempts')
      .values({
        attempt_id: 'att-interrupted-0001',
        task_id: task.taskId,
        retry_index: 0,
        state: 'dispatched',
        session_origin: 'bootstrapped',
        created_at: new Date(Date.now() - 10 * 60_000),
      })
      .execute();
    await db
      .updateTable('queue_tasks')
      .set({ state: 'dispatched', attempt_count: 1, latest_attempt_id: 'att-interrupted-0001' })
      .where('task_id', '=', task.taskId)
      .execute();
    const d = await dispatch(rig.t, task.taskId);
    assert.equal(d.attempt.retryIndex, 1);
    const stalled = await db
      .selectFrom('queue_attempts')
      .selectAll()
      .where('attempt_id', '=', 'att-interrupted-0001')
      .executeTakeFirstOrThrow();
    assert.equal(stalled.state, 'failed');
    assert.equal(stalled.failure_kind, 'infra-failed');
    assert.equal((await show(rig.t, task.taskId)).counters.failed, 1);
  });
});
