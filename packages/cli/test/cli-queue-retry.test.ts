import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RETRYABLE_TASK_STATES } from '@svc/contracts';
import { dispatch, finish, show, submit, type QueueRig } from '../../manager/test/queue-helpers.js';
import { assertBounded, cli, cliJson } from './cli-helpers.js';
import { startCliRig } from './cli-rig.js';

/**
 * `queue retry` against a real manager on a loopback port (real PostgreSQL): one task by id,
 * or the tasks filters name, with a dry run first.
 */
const KEY = 'svc-retry-api-key-4f2a8c1d9e';
let rig: QueueRig;
let env: Record<string, string>;

before(async () => {
  ({ rig, env } = await startCliRig(KEY));
});
after(() => rig?.close());

const queue = (args: string[]) => cli('queue', args, { env });
const queueJson = (args: string[]) => cliJson('queue', args, { env });
const queueTty = (args: string[]) => cli('queue', args, { env, tty: true });

/** A task whose only attempt failed with `failureKind`. */
async function failed(queueName: string, failureKind = 'backend-failed') {
  const task = await submit(rig.t, { queue: queueName, maxAttempts: 1 });
  await finish(rig.t, await dispatch(rig.t, task.taskId), 'failed', { failureKind });
  return task.taskId as string;
}

describe('queue retry', () => {
  it('retries one task: human output says what changed; a second retry is refused', async () => {
    const taskId = await failed('cli-retry-one');
    const plan = await queueTty(['retry', taskId, '--dry-run']);
    assert.equal(plan.code, 0, plan.stderr + plan.stdout);
    assert.match(plan.stdout, new RegExp(`^dry run: retry ${taskId} \\(mutation=false`));
    assert.equal((await show(rig.t, taskId)).state, 'failed', 'a dry run changes nothing');
    const human = await queueTty(['retry', taskId, '--reason', 'flaky', '--by', 'alice']);
    assert.equal(human.code, 0, human.stderr + human.stdout);
    assertBounded(human.stdout, 25);
    assert.match(
      human.stdout,
      new RegExp(
        `retried ${taskId}: failed -> queued, fresh budget of 1 attempt\\(s\\) \\(1 earlier kept; retry 1 by alice\\)`,
      ),
    );
    assert.match(human.stdout, /state queued/);
    const again = await queue(['retry', taskId]);
    assert.equal(again.code, 3);
    assert.match(again.stderr, /^queue: state-conflict: task \S+ is queued; .*\(HTTP 409/);
    const missing = await queue(['retry', 'tsk-nosuchtask00']);
    assert.match(missing.stderr, /not-found/);
    assert.notEqual(missing.code, 0);
  });

  it('--json prints the raw answer', async () => {
    const taskId = await failed('cli-retry-json');
    const task = await queueJson(['retry', taskId]);
    assert.equal(task.taskId, taskId);
    assert.equal(task.state, 'queued');
    assert.equal(task.retries.length, 1);
    assert.equal(task.counters.sinceRetry, 0);
  });

  it('bulk: filters, --since, --limit and --dry-run', async () => {
    const q = 'cli-retry-bulk';
    const a = await failed(q, 'backend-failed');
    const b = await failed(q, 'idle-timeout');
    const c = await failed(q, 'backend-failed');

    const dry = await queueTty(['retry', '--queue', q, '--dry-run']);
    assert.equal(dry.code, 0, dry.stderr + dry.stdout);
    assert.match(dry.stdout, /^3 task\(s\) would be retried \(dry run: nothing changed\)/);
    for (const id of [a, b, c]) assert.match(dry.stdout, new RegExp(`${id}\\s+failed`));
    assert.equal((await show(rig.t, a)).state, 'failed', 'a dry run changes nothing');

    const kind = await queueJson([
      'retry',
      '--queue',
      q,
      '--state',
      'failed,blocked',
      '--failure-kind',
      'idle-timeout',
    ]);
    assert.deepEqual(
      kind.tasks.map((t: any) => [t.taskId, t.state]),
      [[b, 'queued']],
    );
    assert.equal(kind.dryRun, false);

    // --since: an instant from now matches nothing; a clock time a minute ago matches the rest.
    const none = await queueJson(['retry', '--queue', q, '--since', new Date().toISOString()]);
    assert.deepEqual(none.tasks, []);
    const earlier = new Date(Date.now() - 60_000);
    const clock = `${String(earlier.getHours()).padStart(2, '0')}:${String(earlier.getMinutes()).padStart(2, '0')}`;
    const limited = await queueTty(['retry', '--queue', q, '--since', clock, '--limit', '1']);
    assert.equal(limited.code, 0, limited.stderr + limited.stdout);
    assert.match(limited.stdout, /^1 task\(s\) retried: queued again with a fresh attempt budget/);
    assert.match(limited.stdout, new RegExp(`${a}\\s+queued`));
    assert.match(limited.stdout, /more matched than the limit of 1: run it again/);
    const rest = await queueJson(['retry', '--queue', q, '--since', clock]);
    assert.deepEqual(
      rest.tasks.map((t: any) => t.taskId),
      [c],
    );
    assert.equal(rest.more, false);
  });

  it('usage errors exit 2 with the allowed values and send nothing', async () => {
    const taskId = await failed('cli-retry-usage');
    const cases: Array<[string[], RegExp]> = [
      [
        ['retry', '--queue', 'x', '--state', 'completed'],
        new RegExp(RETRYABLE_TASK_STATES.join(', ')),
      ],
      [['retry', '--queue', 'x', '--failure-kind', 'bogus'], /must be one of .*backend-failed/],
      [['retry', '--queue', 'x', '--since', 'yesterday'], /clock time .* ISO 8601/],
      [['retry', '--queue', 'x', '--since', '25:00'], /not a time of day/],
      [['retry', '--queue', 'x', '--limit', '0'], /between 1 and 500/],
      [['retry', '--queue', 'x', '--limit', '501'], /between 1 and 500/],
      [['retry'], /give a taskId, or filters/],
      [['retry', taskId, '--queue', 'x'], /not both/],
    ];
    for (const [args, message] of cases) {
      const human = await queue(args);
      assert.equal(human.code, 2, `${args.join(' ')}: ${human.stderr}${human.stdout}`);
      assert.match(human.stderr + human.stdout, message, args.join(' '));
      const json = await queue([...args, '--json']);
      assert.equal(json.code, 2);
      assert.equal(JSON.parse(json.stdout).error.kind, 'usage');
    }
    assert.equal((await show(rig.t, taskId)).state, 'failed', 'nothing was sent');
  });
});
