import assert from 'node:assert/strict';
import { pbkdf2 } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { dispatch, show, startQueueRig, submit, type QueueRig } from './queue-helpers.js';
import { createSession, plantTrigger, TestRunner } from './helpers.js';

/** Stand-in runner programs: one that dies at once, one that lives a little, then fails. */
let dir: string;
let dying: QueueRig;
let late: QueueRig;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'svc-unclaimed-'));
  await writeFile(join(dir, 'dies.mjs'), 'process.exit(3);\n');
  await writeFile(join(dir, 'late.mjs'), 'setTimeout(() => process.exit(1), 3000);\n');
  dying = await startQueueRig({ env: { SVC_RUNNER_ENTRY: join(dir, 'dies.mjs') } });
  late = await startQueueRig({ env: { SVC_RUNNER_ENTRY: join(dir, 'late.mjs') } });
});
after(async () => {
  await dying?.close();
  await late?.close();
  await rm(dir, { recursive: true, force: true });
});

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 15_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('a runner Job that ends before claiming', () => {
  it('fails its command at once as infra-failed with the launcher reason; run, session and task follow', async () => {
    const task = await submit(dying.t);
    const started = Date.now();
    const d = await dispatch(dying.t, task.taskId);
    const command = await until('the command to fail', async () => {
      const res = await dying.t.api(
        'GET',
        `/api/v1/runs/${d.run.runId}/commands/${d.command.commandId}`,
      );
      return res.body.state === 'failed' ? res.body : undefined;
    });
    assert.ok(Date.now() - started < 15_000, 'long before the command expiry');
    assert.equal(command.failureKind, 'infra-failed');
    assert.match(command.message, /ended \(failed\) before claiming its run: exit code 3/);
    const run = (await dying.t.api('GET', `/api/v1/runs/${d.run.runId}`)).body;
    assert.equal(run.state, 'failed', 'a run nobody claimed fails with it');
    assert.equal(run.failureKind, 'infra-failed');
    const session = (await dying.t.api('GET', d.sessionPath)).body;
    assert.equal(session.executionState, 'terminal');
    const shown = await until('the task to follow', async () => {
      const s = await show(dying.t, task.taskId);
      return s.state === 'failed' ? s : undefined;
    });
    assert.equal(shown.latestAttempt.failureKind, 'infra-failed');
    assert.equal(shown.latestAttempt.runner.phase, 'failed');
  });

  it('follows a turn that failed before the dispatch recorded its references', async () => {
    // The attempt's references reach the database only after the runner Job died and its turn
    // failed: the dispatch must find the failure itself, the failing side found no attempt.
    const remove = await plantTrigger(dying.t.manager.store.db, {
      name: 'slow_attempt_refs',
      before: 'UPDATE',
      table: 'queue_attempts',
      body: `
        IF NEW.command_id IS NOT NULL AND OLD.command_id IS NULL THEN
          PERFORM pg_sleep(2);
        END IF;
        RETURN NEW;`,
    });
    try {
      const task = await submit(dying.t);
      const d = await dispatch(dying.t, task.taskId);
      const shown = await until('the task to follow', async () => {
        const s = await show(dying.t, task.taskId);
        return s.state === 'failed' ? s : undefined;
      });
      assert.equal(shown.latestAttempt.failureKind, 'infra-failed');
      assert.equal(shown.latestAttempt.commandId, d.command.commandId);
      const command = (
        await dying.t.api('GET', `/api/v1/runs/${d.run.runId}/commands/${d.command.commandId}`)
      ).body;
      assert.equal(command.state, 'failed');
    } finally {
      await remove();
    }
  });

  it('a session send with its own runner Job: the turn fails the same way', async () => {
    const session = await createSession(dying.t);
    const sent = await dying.t.api('POST', `/api/v1/sessions/${session.sessionId}/send`, {
      prompt: 'hello',
    });
    assert.equal(sent.status, 201, sent.raw);
    const failed = await until('the turn to fail', async () => {
      const res = await dying.t.api(
        'GET',
        `/api/v1/runs/${sent.body.run.runId}/commands/${sent.body.command.commandId}`,
      );
      return res.body.state === 'failed' ? res.body : undefined;
    });
    assert.equal(failed.failureKind, 'infra-failed');
  });

  it('a runner that dies while its launch still waits on the file system: its turn fails all the same', async () => {
    // The launcher's file work waits behind a busy thread pool (as on a loaded host), so the
    // runner, which exits at once, ends before its launch is done. Its exit must not be missed:
    // a missed one left the job `running` for good, and the manager's shutdown waiting on it.
    let busy = true;
    const hog = () => {
      if (busy) pbkdf2('x', 'salt', 60_000, 32, 'sha256', hog);
    };
    for (let i = 0; i < 12; i++) hog();
    try {
      const sends = [];
      for (let i = 0; i < 3; i++) {
        const session = await createSession(dying.t);
        const sent = await dying.t.api('POST', `/api/v1/sessions/${session.sessionId}/send`, {
          prompt: 'hello',
        });
        assert.equal(sent.status, 201, sent.raw);
        sends.push(sent.body);
      }
      for (const sent of sends) {
        const failed = await until(
          'the turn to fail',
          async () => {
            const res = await dying.t.api(
              'GET',
              `/api/v1/runs/${sent.run.runId}/commands/${sent.command.commandId}`,
            );
            return res.body.state === 'failed' ? res.body : undefined;
          },
          30_000,
        );
        assert.equal(failed.failureKind, 'infra-failed');
        const jobs = (await dying.t.api('GET', `/api/v1/runs/${sent.run.runId}/runner-jobs`)).body;
        assert.deepEqual(
          jobs.runnerJobs.map((j: any) => [j.phase, j.exitCode]),
          [['failed', 3]],
        );
      }
    } finally {
      busy = false;
    }
  });

  it('a job whose runner claimed is left to the lease rules: its command is not failed', async () => {
    const task = await submit(late.t);
    const d = await dispatch(late.t, task.taskId);
    const runner = new TestRunner(late.t, d.attempt.runner.runnerId, d.run.runId);
    assert.equal((await runner.claim()).status, 200);
    await until('the job to end', async () => {
      const res = await late.t.api(
        'GET',
        `/api/v1/runs/${d.run.runId}/runner-jobs/${d.runnerJob.runnerJobId}`,
      );
      return res.body.phase === 'failed' ? res.body : undefined;
    });
    await new Promise((r) => setTimeout(r, 500));
    const command = (
      await late.t.api('GET', `/api/v1/runs/${d.run.runId}/commands/${d.command.commandId}`)
    ).body;
    assert.equal(command.state, 'accepted', 'a claimed run waits for its lease, not this rule');
  });
});
