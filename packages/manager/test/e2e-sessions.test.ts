import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sql } from 'kysely';

import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  createSession,
  dispatch,
  isolateTests,
  runEvents,
  useE2E,
  waitFor,
  waitForCommand,
  sendToSession,
} from './e2e-helpers.js';

const rig = useE2E();
isolateTests(rig);

describe('sessions with the real agent', () => {
  it('resumes the same thread from the session volume in a new runner process', async () => {
    rig.e.provider.enqueue(
      { kind: 'text', text: 'Noted: your name is Ada.' },
      { kind: 'text', text: 'Your name is Ada.' },
    );
    const session = await createSession(rig.e.t);
    const first = await sendToSession(rig.e.t, session.sessionId, {
      prompt: 'My name is Ada. Remember it.',
    });
    assert.equal(first.decision, 'new-run');
    assert.equal(
      (await waitForCommand(rig.e.t, first.run.runId, first.command.commandId)).state,
      'completed',
    );
    // The first runner goes idle and exits before the next send.
    await waitFor(
      'the first runner to exit',
      async () =>
        (
          await rig.e.t.api(
            'GET',
            `/api/v1/runs/${first.run.runId}/runner-jobs/${first.runnerJob.runnerJobId}`,
          )
        ).body.phase === 'succeeded',
    );
    const afterFirst = (await rig.e.t.api('GET', `/api/v1/sessions/${session.sessionId}`)).body;
    assert.equal(afterFirst.executionState, 'terminal');
    assert.ok(afterFirst.threadId, 'the new thread was written back to the session');
    const storage = (await rig.e.t.api('GET', `/api/v1/sessions/${session.sessionId}/storage`))
      .body;
    assert.ok(storage.storage_files_count >= 1, 'the runner reported the rollout files');
    assert.match(storage.storage_sha256, /^[0-9a-f]{64}$/);

    const second = await sendToSession(rig.e.t, session.sessionId, {
      prompt: 'What is my name?',
    });
    assert.equal(second.decision, 'new-run');
    assert.notEqual(second.run.runId, first.run.runId);
    assert.notEqual(second.runnerJob.attemptId, first.runnerJob.attemptId, 'a new runner process');
    assert.equal(
      (await waitForCommand(rig.e.t, second.run.runId, second.command.commandId)).state,
      'completed',
    );
    const events = await runEvents(rig.e.t, second.run.runId);
    const resumed = events.find((ev) => ev.name === 'thread.resumed');
    assert.equal(resumed.data.threadId, afterFirst.threadId);
    const mounted = events.find((ev) => ev.name === 'agent-rollout-storage-mounted');
    assert.equal(mounted.data.pvcName, `svc-v01-session-${session.sessionId}`);
    assert.equal(mounted.data.agentRolloutSubdir, 'sessions');
    const history = JSON.stringify(rig.e.provider.requestsOf().at(-1)!.body);
    assert.ok(
      history.includes('My name is Ada') && history.includes('Noted: your name is Ada.'),
      'the agent saw the earlier conversation',
    );
    const result = (await rig.e.t.api('GET', `/api/v1/runs/${second.run.runId}/result`)).body;
    assert.equal(result.reply, 'Your name is Ada.');
    assert.equal(result.threadId, afterFirst.threadId);
  });

  it('maps a missing rollout to session-store-evicted only with a session volume, else thread-resume-failed', async () => {
    rig.e.provider.enqueue({ kind: 'text', text: 'first' });
    const session = await createSession(rig.e.t);
    const first = await sendToSession(rig.e.t, session.sessionId, { prompt: 'hello' });
    await waitForCommand(rig.e.t, first.run.runId, first.command.commandId);
    // The rollout files vanish from the volume behind the service's back.
    await rm(join(rig.e.t.dataDir, 'sessions', session.sessionId), {
      recursive: true,
      force: true,
    });
    await mkdir(join(rig.e.t.dataDir, 'sessions', session.sessionId));
    const second = await sendToSession(rig.e.t, session.sessionId, {
      prompt: 'zebra-seven-lookup',
    });
    const failed = await waitForCommand(rig.e.t, second.run.runId, second.command.commandId);
    assert.equal(failed.state, 'failed');
    assert.equal(failed.failureKind, 'session-store-evicted');
    assert.equal(
      rig.e.provider
        .requestsOf()
        .filter((r) => JSON.stringify(r.body).includes('zebra-seven-lookup')).length,
      0,
      'no substitute thread was started',
    );

    const { runId, commandId } = await dispatch(
      rig.e,
      'resume please',
      {},
      {},
      { threadId: '01a1ffb0-f690-7522-8a4d-88103e71055b' },
    );
    const noVolume = await waitForCommand(rig.e.t, runId, commandId);
    assert.equal(noVolume.failureKind, 'thread-resume-failed');
  });

  it('refuses a send after the storage is deleted, creating no runner job', async () => {
    rig.e.provider.enqueue({ kind: 'text', text: 'ok' });
    const session = await createSession(rig.e.t);
    const first = await sendToSession(rig.e.t, session.sessionId, { prompt: 'hello' });
    await waitForCommand(rig.e.t, first.run.runId, first.command.commandId);
    const deleted = await rig.e.t.api('DELETE', `/api/v1/sessions/${session.sessionId}/storage`);
    assert.equal(deleted.body.storage_kind, 'evicted');
    const jobs = async () =>
      Number(
        (
          await sql<{ n: number }>`SELECT count(*)::int AS n FROM runner_jobs`.execute(
            rig.e.t.manager.store.db,
          )
        ).rows[0]!.n,
      );
    const before = await jobs();
    const refused = await rig.e.t.api('POST', `/api/v1/sessions/${session.sessionId}/send`, {
      prompt: 'again',
    });
    assert.equal(refused.status, 410);
    assert.equal(refused.body.failureKind, 'session-store-evicted');
    assert.equal(await jobs(), before, 'no runner job was created');
  });
});
