import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ensureTestTag, FakeProvider, processesWithTag, userTexts } from '@svc/testkit';
import {
  addTurn,
  agentPidOf,
  configureProviderProfile,
  isolateTests,
  createSession,
  dispatch,
  killGroup,
  runEvents,
  useE2E,
  waitFor,
  waitForCommand,
  sendToSession,
} from './e2e-helpers.js';

// Several tests here send a turn to a run whose last turn just ended: a longer idle exit than
// the rig's keeps its runner there when a loaded machine delays the next turn by seconds.
const rig = useE2E({ env: { SVC_RUNNER_IDLE_EXIT_MS: '6000' } });
const tag = ensureTestTag();
isolateTests(rig);

const result = async (runId: string, commandId: string) =>
  (await rig.e.t.api('GET', `/api/v1/runs/${runId}/commands/${commandId}/result`)).body;

describe('the runner driving the real agent', () => {
  it('serves a second turn of the same run in the same runner, with the earlier history, then exits cleanly', async () => {
    rig.e.provider.enqueue(
      { kind: 'text', text: 'The capital is Paris.' },
      { kind: 'text', text: 'About 2.1 million people.' },
    );
    const { runId, commandId, job } = await dispatch(rig.e, 'What is the capital of France?');
    assert.equal((await waitForCommand(rig.e.t, runId, commandId)).state, 'completed');
    const second = await addTurn(rig.e.t, runId, 'And its population?');
    const done = await waitForCommand(rig.e.t, runId, second);
    assert.equal(done.state, 'completed');
    const one = await result(runId, commandId);
    const two = await result(runId, second);
    assert.equal(two.reply, 'About 2.1 million people.');
    assert.equal(two.threadId, one.threadId, 'the same thread');
    assert.equal(two.attemptId, job.attemptId, 'served by the same runner job');
    const request = rig.e.provider.requestsOf().at(-1)!;
    const history = JSON.stringify(request.body);
    assert.ok(
      history.includes('What is the capital of France?') &&
        history.includes('The capital is Paris.'),
      'the provider received the earlier turn',
    );
    // Idle for its idle timeout, the runner closes the run and exits 0.
    const finished = await waitFor('runner job to finish', async () => {
      const j = (await rig.e.t.api('GET', `/api/v1/runs/${runId}/runner-jobs/${job.runnerJobId}`))
        .body;
      return j.phase === 'succeeded' || j.phase === 'failed' ? j : null;
    });
    assert.equal(finished.phase, 'succeeded');
    assert.equal(finished.exitCode, 0);
    assert.equal((await rig.e.t.api('GET', `/api/v1/runs/${runId}`)).body.state, 'completed');
    const list = (
      await rig.e.t.api('GET', `/api/v1/runs/${runId}/runner-jobs?commandId=${commandId}`)
    ).body.runnerJobs;
    assert.equal(list.length, 1);
  });

  it('turns a tool call into tool_call and bounded command_output events', async () => {
    rig.e.provider.enqueue(
      { kind: 'tool-call', command: 'echo hello-from-tool' },
      { kind: 'text', text: 'The command printed hello.' },
    );
    const { runId, commandId } = await dispatch(rig.e, 'Run echo for me.');
    assert.equal((await waitForCommand(rig.e.t, runId, commandId)).state, 'completed');
    const events = await runEvents(rig.e.t, runId);
    const tools = events.filter((ev) => ev.category === 'tool_call');
    assert.ok(tools.some((ev) => ev.data.status === 'started'));
    const completed = tools.find((ev) => ev.data.status === 'completed');
    assert.equal(completed.data.exitCode, 0);
    assert.match(completed.data.command, /echo hello-from-tool/);
    const output = events.find((ev) => ev.category === 'command_output');
    assert.match(output.data.text, /hello-from-tool/);
    assert.equal(typeof output.data.originalBytes, 'number');
    const summary = await result(runId, commandId);
    assert.equal(summary.toolCallSummary.count, 1);
    assert.deepEqual(summary.toolCallSummary.exitCodeCounts, { '0': 1 });
    assert.equal(summary.reply, 'The command printed hello.');
  });

  it('delivers a steer to the active turn instead of starting a new one', async () => {
    rig.e.provider.enqueue({ kind: 'stall' }, { kind: 'text', text: 'Short version: yes.' });
    const before = rig.e.provider.requestsOf().length;
    const { runId, commandId } = await dispatch(rig.e, 'Explain at length.');
    await rig.e.provider.waitForRequest(before + 1, { timeoutMs: 30_000 });
    await waitFor(
      'turn acknowledged',
      async () =>
        (await rig.e.t.api('GET', `/api/v1/runs/${runId}/commands/${commandId}`)).body.state ===
        'confirmed',
    );
    const steer = await rig.e.t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'steer',
      payload: { prompt: 'Actually, keep it short.' },
    });
    assert.equal(steer.status, 201);
    const steered = await rig.e.provider.waitForRequest(before + 2, { timeoutMs: 30_000 });
    assert.ok(
      userTexts(steered).some((text) => text.includes('Actually, keep it short.')),
      'the steer text reached the agent',
    );
    assert.equal((await waitForCommand(rig.e.t, runId, commandId)).state, 'completed');
    const steerDone = await waitForCommand(rig.e.t, runId, steer.body.commandId);
    assert.equal(steerDone.state, 'completed');
    const delivery = (await result(runId, steer.body.commandId)).steerDelivery;
    assert.deepEqual(
      [delivery.acknowledged, delivery.forwarded, delivery.accepted, delivery.targetCommandId],
      [true, true, true, commandId],
    );
    assert.equal(delivery.laterTargetEventsSeen, true);
    assert.equal((await result(runId, commandId)).reply, 'Short version: yes.');
    const commands = (await rig.e.t.api('GET', `/api/v1/runs/${runId}/commands`)).body.commands;
    assert.equal(
      commands.filter((c: any) => c.type === 'turn').length,
      1,
      'the steer never became a turn',
    );
  });

  it('cancels a turn mid-command and leaves no agent or shell process behind', async () => {
    rig.e.provider.enqueue({ kind: 'tool-call', command: 'sleep 37' });
    const { runId, commandId } = await dispatch(rig.e, 'Wait a while.');
    // The command runs in this run's agent: its tool call is among the run's events.
    await waitFor(
      'the shell command to run in this run',
      async () =>
        processesWithTag(tag).some((p) => p.command.includes('sleep 37')) &&
        (await runEvents(rig.e.t, runId)).some(
          (ev) => ev.category === 'tool_call' && /sleep 37/.test(ev.data.command ?? ''),
        ),
      30_000,
    );
    const { runnerJobs } = (await rig.e.t.api('GET', `/api/v1/runs/${runId}/runner-jobs`)).body;
    const agentPid = agentPidOf(runnerJobs[0].jobName);
    assert.ok(agentPid, 'the agent runs');
    const cancelled = await rig.e.t.api('POST', `/api/v1/commands/${commandId}/cancel`, {
      reason: 'user pressed stop',
    });
    assert.equal(cancelled.body.state, 'cancelled');
    await waitFor(
      'the shell and this run agent to be gone',
      () =>
        !processesWithTag(tag).some((p) => p.command.includes('sleep 37') || p.pid === agentPid),
      // The agent goes with its runner, which exits once idle (6 s here) after the cancel.
      30_000,
    );
    const events = await runEvents(rig.e.t, runId);
    assert.ok(
      events.some(
        (ev) =>
          ev.category === 'terminal_status' &&
          ev.commandId === commandId &&
          ev.data.status === 'cancelled',
      ),
    );
    const summary = await result(runId, commandId);
    assert.equal(summary.terminalStatus, 'cancelled');
    assert.equal(summary.failureKind, 'cancelled');
    // The runner keeps serving the run: a new turn restarts the agent.
    rig.e.provider.enqueue({ kind: 'text', text: 'Back again.' });
    const next = await addTurn(rig.e.t, runId, 'Still there?');
    assert.equal((await waitForCommand(rig.e.t, runId, next)).state, 'completed');
  });

  it('classifies provider failures: 401, 429, 500 and a cut stream', async () => {
    const cases = [
      {
        name: 'fail-401',
        step: { kind: 'http-error', status: 401 } as const,
        kind: 'provider-auth-failed',
      },
      {
        name: 'fail-429',
        step: { kind: 'http-error', status: 429 } as const,
        kind: 'provider-unavailable',
      },
      {
        name: 'fail-500',
        step: { kind: 'http-error', status: 500 } as const,
        kind: 'provider-unavailable',
      },
      {
        name: 'fail-cut',
        step: { kind: 'cut', partialText: 'I will' } as const,
        kind: 'provider-unavailable',
      },
    ];
    const providers: FakeProvider[] = [];
    try {
      await Promise.all(
        cases.map(async (c) => {
          const provider = await FakeProvider.start();
          providers.push(provider);
          // More failures than the agent's retries, so every attempt of the turn fails.
          provider.enqueue(...Array.from({ length: 8 }, () => c.step));
          await configureProviderProfile(
            rig.e.t,
            c.name,
            provider.baseUrl,
            'sk-test-failure-case-key-0000000000',
          );
          const { runId, commandId } = await dispatch(rig.e, 'hello', { backendProfile: c.name });
          const command = await waitForCommand(rig.e.t, runId, commandId, 90_000);
          assert.equal(command.state, 'failed', `${c.name}: ${JSON.stringify(command)}`);
          assert.equal(command.failureKind, c.kind, `${c.name}: ${command.message}`);
          const summary = await result(runId, commandId);
          assert.equal(summary.completed, false);
          assert.equal(summary.reply, null, 'no reply from partial text');
          const errors = (await runEvents(rig.e.t, runId)).filter((ev) => ev.category === 'error');
          assert.ok(
            errors.some((ev) => ev.data.failureKind === c.kind),
            `${c.name}: a classified error event`,
          );
        }),
      );
    } finally {
      await Promise.all(providers.map((p) => p.close()));
    }
  });

  it('trips the idle budget when the agent goes quiet, and the run can continue', async () => {
    rig.e.provider.enqueue({ kind: 'stall' }, { kind: 'text', text: 'Recovered.' });
    const { runId, commandId } = await dispatch(rig.e, 'Think quietly.', {
      executionPolicy: { timeoutMs: 2000 },
    });
    const command = await waitForCommand(rig.e.t, runId, commandId);
    assert.equal(command.state, 'failed');
    assert.equal(command.failureKind, 'idle-timeout');
    const summary = await result(runId, commandId);
    assert.equal(summary.completed, false);
    rig.e.provider.release();
    const next = await addTurn(rig.e.t, runId, 'Continue.');
    assert.equal((await waitForCommand(rig.e.t, runId, next)).state, 'completed');
  });

  it('replaces a runner killed mid-turn: its lease ends with its job, the replacement claims at once and resumes the thread from the session volume', async () => {
    rig.e.provider.enqueue(
      { kind: 'text', text: 'First answer: blue.' },
      { kind: 'stall' },
      { kind: 'text', text: 'Second answer after recovery.' },
    );
    const session = await createSession(rig.e.t);
    const first = await sendToSession(rig.e.t, session.sessionId, {
      prompt: 'What color is the sky?',
    });
    assert.equal(
      (await waitForCommand(rig.e.t, first.run.runId, first.command.commandId)).state,
      'completed',
    );
    const firstReply = (await result(first.run.runId, first.command.commandId)).reply;
    const before = rig.e.provider.requestsOf().length;
    const second = await sendToSession(rig.e.t, session.sessionId, {
      prompt: 'And the sea?',
    });
    const runId = second.run.runId as string;
    const commandId = second.command.commandId as string;
    await rig.e.provider.waitForRequest(before + 1, { timeoutMs: 30_000 });
    await waitFor(
      'the turn to be acknowledged',
      async () =>
        (await rig.e.t.api('GET', `/api/v1/runs/${runId}/commands/${commandId}`)).body.threadId,
    );
    // Kill the runner and its agent, as a node failure would.
    const job = (
      await rig.e.t.api('GET', `/api/v1/runs/${runId}/runner-jobs/${second.runnerJob.runnerJobId}`)
    ).body;
    const agentPid = agentPidOf(job.jobName);
    assert.ok(agentPid, 'the agent runs');
    killGroup(Number(job.podIdentity.split(':').at(-1)));
    killGroup(agentPid);
    await waitFor(
      'the old runner to be gone',
      async () =>
        (await rig.e.t.api('GET', `/api/v1/runs/${runId}/runner-jobs/${job.runnerJobId}`)).body
          .phase === 'failed',
    );
    rig.e.provider.release();
    const replacement = await rig.e.t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, {
      commandId,
    });
    assert.equal(replacement.status, 201, replacement.raw);
    const done = await waitForCommand(rig.e.t, runId, commandId, 90_000);
    assert.equal(done.state, 'completed', JSON.stringify(done));
    const events = await runEvents(rig.e.t, runId);
    const names = events.map((ev) => ev.name);
    // The launcher saw the runner die: its lease ended then, so nobody waits it out.
    const lost = events.find((ev) => ev.name === 'runner.lost');
    assert.equal(lost?.data.runnerJobId, job.runnerJobId, names.join(', '));
    assert.ok(
      !names.includes('runner.claim.waiting'),
      'the replacement did not wait for the lease',
    );
    const recovered = events.find((ev) => ev.name === 'runner.claim.recovered');
    assert.equal(recovered.data.previousOwner, job.runnerId);
    assert.ok(names.includes('thread.resumed'), 'the thread was resumed, not restarted');
    assert.ok(names.includes('agent-rollout-storage-mounted'));
    const last = JSON.stringify(rig.e.provider.requestsOf().at(-1)!.body);
    assert.ok(last.includes(firstReply), 'the provider saw the earlier conversation');
    const summary = await result(runId, commandId);
    assert.equal(summary.reply, 'Second answer after recovery.');
    assert.equal(summary.attemptId, replacement.body.attemptId);
    assert.equal(
      summary.threadId,
      (await result(first.run.runId, first.command.commandId)).threadId,
      'the same thread continues',
    );
  });
});
