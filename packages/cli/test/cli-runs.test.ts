import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ensureTestTag, FakeProvider, killTagged, waitForNoTaggedProcesses } from '@svc/testkit';
import {
  configureProviderProfile,
  createSession,
  dispatch,
  sendToSession,
  startE2E,
  waitFor,
  type E2E,
} from '../../manager/test/e2e-helpers.js';
import { runBody, TestRunner } from '../../manager/test/helpers.js';
import { assertBounded, assertBuilt, cli, cliJson, transcript } from './cli-helpers.js';

/**
 * `runs`: listing with filters and cursor paging, one run's state, liveness and commands, and
 * following a real turn (real runner, real agent, scripted provider) to its exit code.
 */
const KEY = 'svc-canary-runs-key-5d1e09c7b2';
const tag = ensureTestTag();
let e: E2E;
let env: Record<string, string>;

before(async () => {
  assertBuilt();
  e = await startE2E({ env: { SVC_API_KEY: KEY } });
  env = { SVC_MANAGER_URL: e.t.manager.url, SVC_API_KEY: KEY };
});
after(async () => {
  await e?.close();
  const left = await waitForNoTaggedProcesses(tag, 10_000);
  killTagged(tag);
  assert.deepEqual(left, []);
  const all = transcript.join('\n');
  assert.ok(!all.includes(KEY), 'no API key in any output');
});

const ESC = '\u001b[';

describe('runs list', () => {
  it('filters by tenant, project and state and pages with the printed cursor', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const run = await e.t.api('POST', '/api/v1/runs', runBody({ projectId: 'proj-list' }));
      assert.equal(run.status, 201, run.raw);
      ids.push(run.body.runId);
    }
    await e.t.api('POST', '/api/v1/runs', runBody({ projectId: 'proj-other' }));

    const first = await cliJson(
      'runs',
      ['list', '--tenant', 'tenant-a', '--project', 'proj-list', '--limit', '2'],
      {
        env,
      },
    );
    assert.deepEqual(
      first.runs.map((r: any) => r.runId),
      [ids[2], ids[1]],
      'newest first',
    );
    assert.ok(first.nextCursor);
    const second = await cliJson(
      'runs',
      ['list', '--project', 'proj-list', '--limit', '2', '--cursor', first.nextCursor],
      { env },
    );
    assert.deepEqual(
      second.runs.map((r: any) => r.runId),
      [ids[0]],
    );
    assert.equal(second.nextCursor, null);

    const none = await cliJson(
      'runs',
      ['list', '--project', 'proj-list', '--state', 'completed,failed'],
      { env },
    );
    assert.deepEqual(none.runs, []);

    // A person at a terminal gets one line per run and the command for the next page.
    const human = await cli(
      'runs',
      ['list', '--tenant', 'tenant-a', '--project', 'proj-list', '--limit', '2'],
      {
        env: { ...env, NO_COLOR: '1' },
        tty: true,
      },
    );
    assert.equal(human.code, 0, human.stderr);
    assert.ok(!human.stdout.includes(ESC), 'NO_COLOR: no colour codes');
    assertBounded(human.stdout, 6);
    assert.match(human.stdout, new RegExp(`${ids[2]} +pending`));
    assert.match(
      human.stdout,
      new RegExp(
        `more: runs list --tenant tenant-a --project proj-list --limit 2 --cursor ${first.nextCursor}`,
      ),
    );
  });

  it('shows activity and the last outcome, and filters on them', async () => {
    const failed = await e.t.api('POST', '/api/v1/runs', runBody({ projectId: 'proj-outcome' }));
    const waiting = await e.t.api('POST', '/api/v1/runs', runBody({ projectId: 'proj-outcome' }));
    const runner = new TestRunner(e.t, 'rnr-cliout01', failed.body.runId);
    assert.equal((await runner.claim()).status, 200);
    const turn = (runId: string) =>
      e.t.api('POST', `/api/v1/runs/${runId}/commands`, { type: 'turn', payload: { prompt: 'x' } });
    const commandId = (await turn(failed.body.runId)).body.commandId;
    await turn(waiting.body.runId);
    assert.equal((await runner.ack(commandId)).status, 200);
    const finished = await runner.finish(commandId, 'failed', {
      failureKind: 'provider-auth-failed',
      message: 'provider answered 401',
    });
    assert.equal(finished.status, 200, finished.raw);

    const byOutcome = await cliJson(
      'runs',
      ['list', '--project', 'proj-outcome', '--last-outcome', 'failed'],
      { env },
    );
    assert.deepEqual(
      byOutcome.runs.map((r: any) => [r.runId, r.activity, r.lastCommand.failureKind]),
      [[failed.body.runId, 'idle', 'provider-auth-failed']],
    );
    const byActivity = await cliJson(
      'runs',
      ['list', '--project', 'proj-outcome', '--activity', 'waiting-runner,turn-active'],
      { env },
    );
    assert.deepEqual(
      byActivity.runs.map((r: any) => r.runId),
      [waiting.body.runId],
    );

    const human = await cli('runs', ['list', '--project', 'proj-outcome'], {
      env: { ...env, NO_COLOR: '1' },
      tty: true,
    });
    assert.equal(human.code, 0, human.stderr);
    assert.match(
      human.stdout,
      new RegExp(`${failed.body.runId} +running +idle +last turn failed provider-auth-failed`),
    );
    assert.match(
      human.stdout,
      new RegExp(`${waiting.body.runId} +pending +waiting-runner +last turn accepted`),
    );
    const shown = await cli('runs', ['show', failed.body.runId], {
      env: { ...env, NO_COLOR: '1' },
      tty: true,
    });
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, /activity idle/);
    assert.match(
      shown.stdout,
      new RegExp(
        `last turn failed provider-auth-failed: ${commandId} +ended \\S+ +provider answered 401`,
      ),
    );

    // A value the API does not know is a usage error naming the allowed ones; nothing is sent.
    for (const [flag, value, allowed] of [
      ['--activity', 'busy', 'waiting-runner, turn-active, idle, closed'],
      ['--last-outcome', 'running', 'completed, failed, blocked, cancelled, expired'],
      ['--state', 'done', 'pending, claimed, running, completed, failed, blocked, cancelled'],
    ] as const) {
      const usage = await cli('runs', ['list', flag, value], {
        env: { ...env, SVC_MANAGER_URL: 'http://127.0.0.1:9' },
      });
      assert.equal(usage.code, 2, `${flag} ${value}: ${usage.stderr}`);
      assert.ok(usage.stderr.includes(allowed), usage.stderr);
    }
  });

  it('errors: one line on standard error, or a JSON object on standard output under --json', async () => {
    const plain = await cli('runs', ['show', 'run-does-not-exist'], { env });
    assert.equal(plain.code, 3);
    assert.equal(plain.stdout, '');
    assert.match(plain.stderr, /^runs: [a-z-]+: .+\(HTTP 404/);

    const json = await cli('runs', ['show', 'run-does-not-exist', '--json'], { env });
    assert.equal(json.code, 3, 'the exit code does not change');
    const body = JSON.parse(json.stdout);
    assert.equal(typeof body.error.kind, 'string');
    assert.match(body.error.message, /HTTP 404/);
    assert.equal(json.stderr, '');

    const usage = await cli('runs', ['list', '--limit', 'many', '--json'], { env });
    assert.equal(usage.code, 2);
    assert.equal(JSON.parse(usage.stdout).error.kind, 'usage');

    const down = await cli('runs', ['list', '--json'], {
      env: { ...env, SVC_MANAGER_URL: 'http://127.0.0.1:9' },
    });
    assert.equal(down.code, 4);
    assert.equal(JSON.parse(down.stdout).error.kind, 'manager-unreachable');
  });
});

describe('following a run with the real agent', () => {
  it('prints each event once, in order, and exits 0 when the turn completed', async () => {
    e.provider.enqueue(
      { kind: 'tool-call', command: 'echo runs-marker-2291' },
      { kind: 'text', text: 'All done here.', deltas: 5, frameDelayMs: 100 },
    );
    const { runId, commandId } = await dispatch(e, 'Say something.');
    const [piped, human] = await Promise.all([
      cli('runs', ['events', runId, '--follow', '--limit', '3'], { env, timeoutMs: 120_000 }),
      cli('runs', ['events', runId, '--follow'], { env, tty: true, timeoutMs: 120_000 }),
    ]);
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
    assert.equal(seqs[0], 1, 'from the first event');
    assert.equal(events.at(-1).category, 'terminal_status');
    assert.match(piped.stderr, new RegExp(`run ${runId} command ${commandId} ended completed`));

    assert.equal(human.code, 0, human.stderr + human.stdout);
    assertBounded(human.stdout, 400);
    assert.match(human.stdout, /command_output .*runs-marker-2291/);
    // On a terminal the terminal status is coloured (green: completed).
    assert.match(
      human.stdout,
      new RegExp(`\\u001b\\[32m#\\d+ terminal_status .*completed\\u001b\\[39m`),
    );

    const plain = await cli('runs', ['events', runId, '--after', String(seqs.at(-2))], {
      env: { ...env, NO_COLOR: '1' },
      tty: true,
    });
    assert.equal(plain.code, 0);
    assert.ok(!plain.stdout.includes(ESC), 'NO_COLOR: no colour codes');
    assert.equal(plain.stdout.trim().split('\n').length, 1, 'only events after --after');

    // Following a turn that already ended answers at once with its outcome.
    const again = await cli('runs', ['events', runId, '--follow', '--after', String(seqs.at(-1))], {
      env,
      timeoutMs: 30_000,
    });
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stdout, '');

    const show = await cli('runs', ['show', runId], { env, tty: true });
    assert.equal(show.code, 0, show.stderr);
    assertBounded(show.stdout, 12);
    assert.match(show.stdout, new RegExp(`run ${runId} +running|run ${runId} +completed`));
    assert.match(show.stdout, /liveness [a-z-]+/);
    assert.match(
      show.stdout,
      new RegExp(`command ${commandId} +.*completed.*reply: All done here\\.`),
    );
    const shown = await cliJson('runs', ['show', runId], { env });
    assert.equal(shown.run.runId, runId);
    assert.equal(typeof shown.liveness.phase, 'string');
    assert.deepEqual(
      shown.commands.map((c: any) => [c.commandId, c.terminalStatus]),
      [[commandId, 'completed']],
    );
  });

  it('exits 6 when the followed turn is cancelled with runs cancel', async () => {
    e.provider.enqueue({ kind: 'stall' });
    const { runId } = await dispatch(e, 'Take your time.');
    await waitFor(
      'the turn to start',
      async () => {
        const run = await cliJson('runs', ['show', runId], { env });
        return run.run.state === 'running';
      },
      60_000,
    );
    const follow = cli('runs', ['events', runId, '--follow'], { env, timeoutMs: 120_000 });
    const cancelled = await cliJson('runs', ['cancel', runId, '--reason', 'not needed'], { env });
    assert.equal(cancelled.runId, runId);
    const followed = await follow;
    assert.equal(followed.code, 6, followed.stderr);
    assert.match(followed.stderr, /ended cancelled/);
  });

  it('exits 5 when the followed turn failed', async () => {
    const provider = await FakeProvider.start();
    try {
      // More failures than the agent's retries, so the turn fails.
      provider.enqueue(
        ...Array.from({ length: 8 }, () => ({ kind: 'http-error', status: 401 }) as const),
      );
      await configureProviderProfile(
        e.t,
        'runs-fail',
        provider.baseUrl,
        'sk-test-runs-fail-0000000000',
      );
      const { runId } = await dispatch(e, 'hello', { backendProfile: 'runs-fail' });
      const followed = await cli('runs', ['events', runId, '--follow'], {
        env,
        timeoutMs: 120_000,
      });
      assert.equal(followed.code, 5, followed.stderr);
      assert.match(followed.stderr, /ended failed/);
      assert.ok(followed.stdout.includes('"category":"error"'));

      // `sessions output --follow` answers the same way for a session's failed turn.
      provider.enqueue(
        ...Array.from({ length: 8 }, () => ({ kind: 'http-error', status: 401 }) as const),
      );
      const session = await createSession(e.t, { backendProfile: 'runs-fail' });
      await sendToSession(e.t, session.sessionId, { prompt: 'hello again' });
      const output = await cli('sessions', ['output', session.sessionId, '--follow'], {
        env,
        timeoutMs: 120_000,
      });
      assert.equal(output.code, 5, output.stderr);
      assert.match(output.stderr, /last outcome failed/);
    } finally {
      await provider.close();
    }
  });
});
