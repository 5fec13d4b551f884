import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ensureTestTag, killTagged, waitForNoTaggedProcesses } from '@svc/testkit';
import { startE2E, type E2E } from '../../manager/test/e2e-helpers.js';
import { assertBounded, assertBuilt, cli, cliJson, transcript } from './cli-helpers.js';

/**
 * The whole path a user walks with the clients: submit, dispatch, follow the session's output
 * while the real runner drives the real coding agent (only the model provider is scripted),
 * then refresh and read the outcome from the queue.
 */
const KEY = 'svc-canary-follow-key-91c2e7aa04';
const tag = ensureTestTag();
let e: E2E;
let env: Record<string, string>;

before(async () => {
  assertBuilt();
  e = await startE2E({
    env: { SVC_API_KEY: KEY },
    providerKey: 'sk-canary-provider-key-3b8d0f6e2c11',
  });
  env = { SVC_MANAGER_URL: e.t.manager.url, SVC_API_KEY: KEY };
});
after(async () => {
  await e?.close();
  const left = await waitForNoTaggedProcesses(tag, 10_000);
  killTagged(tag);
  assert.deepEqual(left, []);
});

describe('following a dispatched task with the real agent', () => {
  it('prints the session output as it comes and stops when the command is terminal', async () => {
    e.provider.enqueue(
      { kind: 'tool-call', command: 'echo follow-marker-4711' },
      { kind: 'text', text: 'Changelog updated.', deltas: 6, frameDelayMs: 150 },
    );
    const submitted = await cliJson('queue', ['submit', '--json-stdin'], {
      env,
      stdin: JSON.stringify({
        tenantId: 'tenant-a',
        projectId: 'proj-1',
        queue: 'e2e',
        title: 'update the changelog',
        executionPolicy: { timeoutMs: 60_000 },
        payload: { prompt: `Update the changelog. (The key ${KEY} is not for you.)` },
      }),
    });
    const dispatched = await cliJson('queue', ['dispatch', submitted.taskId], { env });
    const sessionId: string = dispatched.session.sessionId;

    // Two followers at once: a person at a terminal, and a script reading JSON lines.
    const [human, piped] = await Promise.all([
      cli('sessions', ['output', sessionId, '--follow'], { env, tty: true, timeoutMs: 120_000 }),
      cli('sessions', ['output', sessionId, '--follow', '--limit', '2'], {
        env,
        timeoutMs: 120_000,
      }),
    ]);
    assert.equal(human.code, 0, human.stderr + human.stdout);
    assertBounded(human.stdout, 200);
    assert.match(human.stdout, /command_output .*follow-marker-4711/);
    assert.match(human.stdout, /assistant_message .*Changelog updated\./);
    assert.match(human.stdout, /terminal_status command\.terminal {2}completed/);
    assert.match(
      human.stdout,
      new RegExp(`session ${sessionId} terminal: last outcome completed\\n$`),
    );

    assert.equal(piped.code, 0, piped.stderr);
    const events = piped.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    const seqs = events.map((ev) => ev.seq);
    assert.deepEqual(
      seqs,
      [...new Set(seqs)].sort((a, b) => a - b),
      'each event once, in order',
    );
    assert.ok(events.every((ev) => ev.runId === dispatched.run.runId));
    assert.equal(events.at(-1).category, 'terminal_status');
    assert.match(piped.stderr, /terminal: last outcome completed/);

    const refreshed = await cliJson('queue', ['refresh', submitted.taskId], { env });
    assert.equal(refreshed.state, 'completed');
    assert.equal(refreshed.latestAttempt.terminalStatus, 'completed');
    assert.ok(refreshed.latestAttempt.eventCount >= events.length - 1);
    const show = await cli('queue', ['show', submitted.taskId], { env, tty: true });
    assertBounded(show.stdout, 20);
    assert.match(show.stdout, /outcome completed/);
    assert.match(show.stdout, /supervisor: phase terminal · last activity #\d+/);
    assert.match(show.stdout, new RegExp(`next: sessions output ${sessionId} --after-seq \\d+`));
    const view = await cliJson('queue', ['commander', '--queue', 'e2e', '--reader-id', 'dana'], {
      env,
    });
    assert.equal(view.items[0].reason, 'unread');
    const stats = await cliJson('queue', ['stats', '--queue', 'e2e'], { env });
    assert.equal(stats.tasks.byState.completed, 1);

    const all = transcript.join('\n');
    assert.ok(!all.includes(KEY), 'no API key in any output');
    assert.ok(!all.includes(e.providerKey), 'no provider key in any output');
  });
});
