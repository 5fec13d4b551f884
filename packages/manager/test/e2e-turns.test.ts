import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { userTexts } from '@svc/testkit';
import { dispatch, useE2E, waitForCommand } from './e2e-helpers.js';

const rig = useE2E();

describe('a run from POST /runs to a completed turn with the real agent', () => {
  it('completes a turn with an authoritative final reply', async () => {
    rig.e.provider.enqueue({ kind: 'text', text: 'Four.', deltas: 5 });
    const { runId, commandId, job } = await dispatch(rig.e, 'What is 2+2?');
    assert.equal(job.phase, 'running');
    assert.equal(job.transientEnv.valuesPrinted, false);
    const command = await waitForCommand(rig.e.t, runId, commandId);
    const log = job.logPath ? await readFile(job.logPath, 'utf8').catch(() => '') : '';
    assert.equal(command.state, 'completed', `${JSON.stringify(command)}\n${log.slice(-3000)}`);
    const result = (await rig.e.t.api('GET', `/api/v1/runs/${runId}/commands/${commandId}/result`))
      .body;
    assert.equal(result.completed, true);
    assert.equal(result.reply, 'Four.');
    assert.equal(result.finalResponseAuthority, 'authoritative');
    assert.ok(result.threadId);
    assert.equal(result.attemptId, job.attemptId);
    const first = rig.e.provider.requestsOf()[0]!;
    assert.ok(userTexts(first).some((t) => t.includes('What is 2+2?')));
    assert.equal(first.bearer, rig.e.providerKey);
    const events = (await rig.e.t.api('GET', `/api/v1/runs/${runId}/events?limit=1000`)).body
      .events;
    const categories = new Set(events.map((ev: any) => ev.category));
    for (const c of ['backend_status', 'assistant_message', 'terminal_status'])
      assert.ok(categories.has(c), `missing ${c}`);
    const status = events.find((ev: any) => ev.name === 'backend.initialized');
    assert.deepEqual(
      [status.data.profile, status.data.backendKind, status.data.protocol, status.data.attempt],
      ['builtin-a', 'codex-app-server', 'json-rpc-stdio', job.attemptId],
    );
    const assistant = events.filter((ev: any) => ev.category === 'assistant_message');
    assert.ok(assistant.length <= 3, `deltas are coalesced (${assistant.length} assistant events)`);
  });
});
