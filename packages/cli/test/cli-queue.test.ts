import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { freePort } from '@svc/testkit';
import { finish, type QueueRig } from '../../manager/test/queue-helpers.js';
import { assertBounded, cli, cliJson, transcript } from './cli-helpers.js';
import { startCliRig } from './cli-rig.js';

/**
 * The built `queue` and `sessions` clients against a real manager on a loopback port (real
 * PostgreSQL; a stand-in runner program whose part the test plays through the runner API).
 */
const KEY = 'svc-canary-api-key-5d1e9c0b7a';
let rig: QueueRig;
let dir: string;
let env: Record<string, string>;

before(async () => {
  ({ rig, env } = await startCliRig(KEY));
  dir = await mkdtemp(join(tmpdir(), 'svc-cli-'));
});
after(async () => {
  await rig?.close();
  await rm(dir, { recursive: true, force: true });
});

const LONG = 'x'.repeat(5000);
const task = (extra: Record<string, unknown> = {}) => ({
  tenantId: 'tenant-a',
  projectId: 'proj-1',
  queue: 'cli',
  title: 'update the changelog',
  // The API key pasted into a prompt: the manager redacts it at the door.
  payload: { prompt: `use key ${KEY} then ${LONG}` },
  references: [{ kind: 'issue', ref: 'acme/web#7' }],
  ...extra,
});
const queue = (args: string[], stdin?: string) =>
  cli('queue', args, { env, ...(stdin !== undefined ? { stdin } : {}) });
const queueJson = (args: string[], stdin?: string) =>
  cliJson('queue', args, { env, ...(stdin !== undefined ? { stdin } : {}) });
const queueTty = (args: string[]) => cli('queue', args, { env, tty: true });

describe('queue client', () => {
  let taskId: string;
  let sessionId: string;

  it('submits from standard input and prints bounded JSON when piped', async () => {
    const submitted = await queueJson(['submit', '--json-stdin'], JSON.stringify(task()));
    taskId = submitted.taskId;
    assert.match(taskId, /^tsk-/);
    assert.equal(submitted.state, 'queued');
    assert.deepEqual(submitted.payload.fields, ['prompt'], 'the payload is summarized, not copied');
    const stored = await rig.t.api('GET', `/api/v1/queue/tasks/${taskId}`);
    assert.ok(stored.body.payload.prompt.startsWith('use key [redacted] then'));

    const file = join(dir, 'task.json');
    await writeFile(file, JSON.stringify(task({ title: 'from a reusable file' })));
    const fromFile = await queueJson(['submit', '--json-file', file]);
    assert.equal(fromFile.title, 'from a reusable file');

    const before = (await queueJson(['list', '--queue', 'cli'])).tasks.length;
    const plan = await queueJson(['submit', '--json-stdin', '--dry-run'], JSON.stringify(task()));
    assert.equal(plan.mutation, false);
    assert.equal(plan.plan.storeTask.state, 'queued');
    assert.equal(
      (await queueJson(['list', '--queue', 'cli'])).tasks.length,
      before,
      'nothing stored',
    );

    const missing = await queue(['submit', '--json-file', join(dir, 'nope.json')]);
    assert.equal(missing.code, 2);
    const both = await queue(['submit', '--json-stdin', '--json-file', file], '{}');
    assert.equal(both.code, 2);
    const notJson = await queue(['submit', '--json-stdin'], 'not json');
    assert.equal(notJson.code, 2);
    assert.match(notJson.stderr, /^queue: usage: standard input is not valid JSON\n$/);
  });

  it('lists and shows a bounded human summary on a terminal, expanded with --full', async () => {
    const list = await queueTty(['list', '--queue', 'cli']);
    assert.equal(list.code, 0, list.stderr);
    assertBounded(list.stdout, 40);
    assert.match(list.stdout, new RegExp(`${taskId}\\s+queued`));
    assert.match(list.stdout, new RegExp(`next: queue dispatch ${taskId}`));
    assert.ok(!list.stdout.includes(LONG.slice(0, 100)), 'no payload in the list');

    const show = await queueTty(['show', taskId]);
    assert.equal(show.code, 0, show.stderr);
    assertBounded(show.stdout, 20);
    assert.match(show.stdout, /payload: 1 field\(s\), \d+ bytes; prompt "use key \[redacted\]/);
    assert.match(show.stdout, /references: issue acme\/web#7/);
    assert.match(show.stdout, /sessionPath: none yet/);
    const full = await queueTty(['show', taskId, '--full']);
    assert.ok(full.stdout.replaceAll('\n', '').includes(LONG), '--full expands the payload');

    const listJson = await queueJson(['list', '--queue', 'cli', '--limit', '1']);
    assert.equal(listJson.tasks.length, 1);
    assert.equal(listJson.tasks[0].payload, undefined);
    assert.ok(listJson.nextCursor);
    const listFull = await queueJson(['list', '--queue', 'cli', '--limit', '1', '--full']);
    assert.ok(listFull.tasks[0].payload.prompt);
    const polled = await queueJson(['list', '--updated-after', '0', '--limit', '2']);
    assert.equal(polled.order, 'changeSeq');
  });

  it('dispatches (dry run first), then shows the attempt, session and supervisor', async () => {
    const plan = await queueJson(['dispatch', taskId, '--dry-run']);
    assert.equal(plan.mutation, false);
    assert.equal(plan.plan.session.origin, 'bootstrapped');
    assert.equal((await queueJson(['show', taskId])).counters.attempts, 0, 'dry run wrote nothing');

    const dispatched = await queueJson(
      ['dispatch', taskId, '--json-stdin'],
      '{"runnerJob":{"retention":"keep"}}',
    );
    sessionId = dispatched.session.sessionId;
    assert.equal(dispatched.attempt.retryIndex, 0);
    assert.equal(dispatched.sessionPath, `/api/v1/sessions/${sessionId}`);
    const show = await queueTty(['show', taskId]);
    assertBounded(show.stdout, 20);
    assert.match(show.stdout, new RegExp(`sessionPath: /api/v1/sessions/${sessionId}`));
    assert.match(
      show.stdout,
      /supervisor: phase waiting-runner · no activity yet · budget within-budget/,
    );
    assert.match(show.stdout, /recovery (continue-same-session|create-runner-job)/);
    assert.match(show.stdout, new RegExp(`next: sessions output ${sessionId} --follow`));
    const again = await queue(['dispatch', taskId]);
    assert.equal(again.code, 3);
    assert.match(again.stderr, /^queue: attempt-in-progress: .* \(HTTP 409, traceId [^)]+\)\n$/);

    await finish(rig.t, dispatched, 'completed');
    const refreshPlan = await queueJson(['refresh', taskId, '--dry-run']);
    assert.equal(refreshPlan.mutation, false);
    assert.equal(refreshPlan.plan.taskState.to, 'completed');
    const refreshed = await queueJson(['refresh', taskId]);
    assert.equal(refreshed.state, 'completed');
    assert.equal(refreshed.latestAttempt.terminalStatus, 'completed');
    const human = await queueTty(['show', taskId]);
    assert.match(human.stdout, /outcome completed/);
    assert.match(
      human.stdout,
      /supervisor: phase terminal · last activity #\d+ \(run-[a-z0-9]+:\d+\)/,
    );
  });

  it('reads the session through the sessions client: show, output, trace', async () => {
    const session = await cliJson('sessions', ['show', sessionId], { env });
    assert.equal(session.executionState, 'terminal');
    assert.equal(session.supervisor.phase, 'terminal');
    const output = await cliJson('sessions', ['output', sessionId], { env });
    assert.ok(output.events.some((e: any) => e.data.text === 'working on it'));
    const trace = await cliJson(
      'sessions',
      ['trace', sessionId, '--after-seq', '0', '--limit', '1'],
      { env },
    );
    assert.equal(trace.events.length, 1);
    assert.equal(trace.hasMore, true);
    const human = await cli('sessions', ['output', sessionId], { env, tty: true });
    assertBounded(human.stdout, 20);
    assert.match(human.stdout, /#\d+ assistant_message {2}working on it/);
    assert.match(human.stdout, /#\d+ terminal_status command\.terminal {2}completed/);
    const shown = await cli('sessions', ['show', sessionId, '--reader-id', 'bob'], {
      env,
      tty: true,
    });
    assert.match(shown.stdout, /unread by bob/);
    assert.match(shown.stdout, /supervisor: phase terminal/);
  });

  it('answers stats, commander and read, with a dry run of read', async () => {
    const stats = await queueJson(['stats', '--queue', 'cli']);
    assert.equal(stats.tasks.byState.completed, 1);
    assert.equal(stats.attempts.byState.completed, 1);
    const statsHuman = await queueTty(['stats', '--queue', 'cli']);
    assert.match(statsHuman.stdout, /cli\/default {2}completed {2}builtin-a {2}1/);

    const view = await queueJson([
      'commander',
      '--queue',
      'cli',
      '--reader-id',
      'alice',
      '--limit',
      '5',
    ]);
    assert.equal(view.unread, 2);
    assert.ok(view.items.some((i: any) => i.task.taskId === taskId && i.reason === 'unread'));
    const plan = await queueJson(['read', taskId, '--reader-id', 'alice', '--dry-run']);
    assert.equal(plan.mutation, false);
    assert.equal(
      (await queueJson(['commander', '--queue', 'cli', '--reader-id', 'alice'])).unread,
      2,
    );
    const read = await queueJson(['read', taskId, '--reader-id', 'alice']);
    assert.equal(read.unread, false);
    const afterRead = await queueJson(['commander', '--queue', 'cli', '--reader-id', 'alice']);
    assert.equal(afterRead.unread, 1);
    assert.ok(
      !afterRead.items.some((i: any) => i.task.taskId === taskId),
      'read: gone from the view',
    );

    const human = await queueTty(['commander', '--queue', 'cli', '--reader-id', 'alice']);
    assertBounded(human.stdout, 30);
    assert.match(human.stdout, /commander: queue cli, reader alice .* unread 1/);
    assert.match(human.stdout, /\[queued\] tsk-/);
    assert.match(human.stdout, /next:\n {2}queue dispatch tsk-/);
    const noReader = await queue(['read', taskId]);
    assert.equal(noReader.code, 2, 'read needs --reader-id');
    // A page of nothing is refused by the client, before any request.
    for (const args of [
      ['list', '--limit', '0'],
      ['commander', '--reader-id', 'alice', '--limit', '0'],
      ['list', '--limit', '201'],
    ]) {
      const refused = await queue(args);
      assert.equal(refused.code, 2, args.join(' '));
      assert.match(refused.stderr, /--limit must be a whole number between 1 and 200/);
    }
  });

  it('cancels with a reason (dry run first); a cancelled task refuses dispatch', async () => {
    const other = await queueJson(['submit', '--json-stdin'], JSON.stringify(task()));
    const plan = await queueJson(['cancel', other.taskId, '--reason', 'not needed', '--dry-run']);
    assert.equal(plan.mutation, false);
    assert.equal((await queueJson(['show', other.taskId])).state, 'queued');
    const cancelled = await queueJson(['cancel', other.taskId, '--reason', 'not needed']);
    assert.equal(cancelled.state, 'cancelled');
    assert.equal(cancelled.cancelReason, 'not needed');
    const refused = await queue(['dispatch', other.taskId]);
    assert.equal(refused.code, 3);
    assert.match(refused.stderr, /^queue: task-terminal: task tsk-\S+ is cancelled/);
    assert.equal(refused.stderr.trim().split('\n').length, 1, 'one line');
  });
});

describe('sessions client', () => {
  const runBase = {
    tenantId: 'tenant-a',
    projectId: 'proj-1',
    workspaceRef: { kind: 'opaque' },
    providerId: 'openai',
  };

  it('creates a session on send, sends again from a prompt file, lists, reads and cancels', async () => {
    const sent = await cliJson(
      'sessions',
      ['send', '--json-stdin', '--prompt', 'say hello', '--profile', 'builtin-a'],
      { env, stdin: JSON.stringify(runBase) },
    );
    assert.equal(sent.createdSession, true);
    assert.equal(sent.decision, 'new-run');
    assert.ok(sent.runnerJob.jobName);
    const id = sent.sessionId;

    const promptFile = join(dir, 'prompt.txt');
    await writeFile(promptFile, 'and now the tests');
    const second = await cliJson('sessions', ['send', id, '--prompt-file', promptFile], { env });
    assert.equal(second.createdSession, false);
    assert.equal(second.sessionId, id);

    const ps = await cliJson('sessions', ['ps', '--reader-id', 'carol', '--profile', 'builtin-a'], {
      env,
    });
    assert.ok(ps.sessions.some((s: any) => s.sessionId === id));
    const psHuman = await cli('sessions', ['ps', '--state', 'running'], { env, tty: true });
    assert.match(psHuman.stdout, new RegExp(`${id}\\s+running`));

    const cancelled = await cliJson('sessions', ['cancel', id, '--reason', 'enough'], { env });
    assert.equal(cancelled.cancelled.commandId, second.command.commandId);
    const read = await cliJson('sessions', ['read', id, '--reader-id', 'carol'], { env });
    assert.equal(read.reader.unread, false);
    const after = await cliJson('sessions', ['ps', '--reader-id', 'carol'], { env });
    assert.ok(
      !after.sessions.some((s: any) => s.sessionId === id),
      'read: out of the default list',
    );
    const all = await cliJson('sessions', ['ps', '--reader-id', 'carol', '--state', 'all'], {
      env,
    });
    assert.ok(all.sessions.some((s: any) => s.sessionId === id));
  });

  it('refuses ambiguous input before sending anything', async () => {
    const both = await cli(
      'sessions',
      ['send', '--json-stdin', '--prompt-stdin', '--profile', 'builtin-a'],
      {
        env,
        stdin: '{}',
      },
    );
    assert.equal(both.code, 2);
    assert.match(
      both.stderr,
      /^sessions: usage: standard input can carry the prompt or the JSON body, not both/,
    );
    const none = await cli('sessions', ['send', 'ses-0000000000000000000000'], { env });
    assert.equal(none.code, 2);
    const noProfile = await cli('sessions', ['send', '--json-stdin', '--prompt', 'x'], {
      env,
      stdin: JSON.stringify(runBase),
    });
    assert.equal(noProfile.code, 2);
  });
});

describe('failures and exit codes', () => {
  it('prints one line naming the failure kind, with distinct exit codes', async () => {
    const missing = await queue(['show', 'tsk-000000000000000000000000']);
    assert.equal(missing.code, 3);
    assert.match(
      missing.stderr,
      /^queue: not-found: task tsk-0+ not found \(HTTP 404, traceId [^)]+\)\n$/,
    );
    assert.equal(missing.stdout, '');

    const wrong = await cli('queue', ['list'], {
      env: { SVC_MANAGER_URL: rig.t.manager.url, SVC_API_KEY: 'wrong-token-0123456789' },
    });
    assert.equal(wrong.code, 3);
    assert.match(wrong.stderr, /^queue: auth-failed: /);
    assert.ok(!wrong.stderr.includes('wrong-token-0123456789'), 'the token is never printed');

    const flagToken = await cli('queue', ['list', '--token', KEY, '--url', rig.t.manager.url], {
      env: {},
    });
    assert.equal(flagToken.code, 0, flagToken.stderr);

    const bare = await cli('queue', [], { env });
    assert.equal(bare.code, 2);
    assert.match(bare.stderr, /Usage: queue/);
    const unknown = await queue(['list', '--nope']);
    assert.equal(unknown.code, 2);
    assert.equal(unknown.stderr, "queue: usage: unknown option '--nope' (see queue --help)\n");
    const tooMany = await queue(['list', '--limit', '201']);
    assert.equal(tooMany.code, 2);
    const badUrl = await cli('queue', ['list'], { env: { SVC_MANAGER_URL: 'not a url' } });
    assert.equal(badUrl.code, 2);
    assert.match(badUrl.stderr, /SVC_MANAGER_URL is not a valid URL/);
    const help = await cli('queue', ['--help'], { env });
    assert.equal(help.code, 0);
  });

  it('says when the manager cannot be reached, naming the URL without its credentials', async () => {
    const port = await freePort();
    const url = `http://operator:hunter2-password@127.0.0.1:${port}`;
    for (const run of [
      cli('queue', ['stats'], { env: { SVC_MANAGER_URL: url } }),
      cli('sessions', ['ps', '--url', url], { env: {} }),
    ]) {
      const result = await run;
      assert.equal(result.code, 4);
      assert.match(
        result.stderr,
        new RegExp(
          `^(queue|sessions): manager-unreachable: cannot reach the manager at http://127\\.0\\.0\\.1:${port}/`,
        ),
      );
      assert.ok(!result.stderr.includes('hunter2'), 'no credentials in the message');
      assert.ok(!result.stderr.includes('operator'), 'no user name either');
      assert.equal(result.stderr.trim().split('\n').length, 1);
    }
  });

  it('never printed the API key or anything the manager redacted', () => {
    const all = transcript.join('\n');
    assert.ok(transcript.length > 40, 'the checks above ran the clients');
    assert.ok(!all.includes(KEY), 'API key');
    assert.ok(!all.includes(Buffer.from(KEY).toString('base64')), 'API key, base64');
    assert.ok(!all.includes('hunter2'), 'URL password');
  });
});
