import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { submit, type QueueRig } from '../../manager/test/queue-helpers.js';
import { assertBounded, cli, cliJson } from './cli-helpers.js';
import { startCliRig } from './cli-rig.js';

/**
 * `queue pause`, `queue resume`, `queue limits` and `queue submit --concurrency-key`, through
 * the built client against a real manager (real PostgreSQL, real HTTP).
 */
const KEY = 'svc-canary-api-key-controls-8c2d41';
let rig: QueueRig;
let env: Record<string, string>;

before(async () => {
  ({ rig, env } = await startCliRig(KEY, {
    SVC_SCHEDULER_MAX_RUNNING: '10',
    SVC_TENANT_ALLOWLIST: 'tenant-a,a,b',
  }));
});
after(async () => {
  await rig?.close();
});

/** Human output on a terminal; with a body on standard input, a pipe (JSON output). */
const queue = (args: string[], stdin?: string) =>
  cli('queue', args, { env, ...(stdin !== undefined ? { stdin } : { tty: true }) });

const task = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    tenantId: 'tenant-a',
    projectId: 'proj-1',
    queue: 'cliq',
    title: 'keyed task',
    payload: { prompt: 'say ok' },
    ...extra,
  });

describe('queue controls from the CLI', () => {
  it('pause and resume a queue: every view says so and a dispatch is refused', async () => {
    const waiting = (await submit(rig.t, { queue: 'pausedq' })).taskId;
    const paused = await queue(['pause', 'pausedq']);
    assert.equal(paused.code, 0, paused.stderr);
    assert.match(paused.stdout, /queue pausedq paused: nothing of it is dispatched/);

    const show = await queue(['show', waiting]);
    assert.match(
      show.stdout,
      /waiting: queue-paused: its queue pausedq is paused; queue resume pausedq/,
    );
    const stats = await queue(['stats', '--queue', 'pausedq']);
    assert.match(stats.stdout, /paused: pausedq/);
    const scheduler = await queue(['scheduler']);
    assert.equal(scheduler.code, 0, scheduler.stderr);
    assertBounded(scheduler.stdout, 40);
    assert.match(scheduler.stdout, /paused queues: pausedq/);
    const commander = await queue(['commander']);
    assert.match(commander.stdout, /paused queues: pausedq/);
    const dispatch = await queue(['dispatch', waiting]);
    assert.notEqual(dispatch.code, 0);
    assert.match(dispatch.stderr + dispatch.stdout, /queue-paused/);
    const json = await cliJson('queue', ['scheduler'], { env });
    assert.deepEqual(json.queues, [{ queue: 'pausedq', maxRunning: null, paused: true }]);

    const resumed = await queue(['resume', 'pausedq']);
    assert.equal(resumed.code, 0, resumed.stderr);
    assert.match(resumed.stdout, /queue pausedq resumed/);
    const after = await queue(['show', waiting]);
    assert.doesNotMatch(after.stdout, /queue-paused/);
    const started = await queue(['dispatch', waiting]);
    assert.equal(started.code, 0, started.stderr);
  });

  it('sets limits at run time and shows where each comes from', async () => {
    const set = await queue([
      'limits',
      '--global',
      '10',
      '--tenant',
      'a=3',
      '--profile',
      'p=2',
      '--tenant',
      'b=none',
      '--profile-rate',
      'builtin-a=30',
    ]);
    assert.equal(set.code, 0, set.stderr);
    assert.match(set.stdout, /limits in force: global 10 \(stored\)/);
    assert.match(set.stdout, /tenants: each unlimited \(configured\); a=3 \(stored\)/);
    assert.match(set.stdout, /profiles: each unlimited \(configured\); p=2 \(stored\)/);
    assert.match(set.stdout, /profile start rates: builtin-a=30\/min \(stored\)/);
    const shown = await cliJson('queue', ['limits'], { env });
    assert.deepEqual(shown.tenants, { a: 3 });
    assert.deepEqual(shown.sources, {
      global: 'stored',
      tenants: { a: 'stored' },
      profiles: { p: 'stored' },
    });
    const back = await cliJson(
      'queue',
      [
        'limits',
        '--global',
        'none',
        '--tenant',
        'a=none',
        '--profile',
        'p=none',
        '--profile-rate',
        'builtin-a=none',
      ],
      { env },
    );
    assert.deepEqual([back.global, back.sources.global], [10, 'configured']);
    assert.deepEqual([back.tenants, back.profiles, back.profileRates], [{}, {}, {}]);
    for (const args of [
      ['limits', '--tenant', 'a'],
      ['limits', '--tenant', '=3'],
      ['limits', '--global', '-1'],
      ['limits', '--profile', 'p=two'],
      ['limits', '--profile-rate', 'p=0'],
    ]) {
      const refused = await queue(args);
      assert.equal(refused.code, 2, `${args.join(' ')}: ${refused.stderr}`);
    }
  });

  it('submits with a concurrency key and shows it', async () => {
    const submitted = await cliJson(
      'queue',
      ['submit', '--json-stdin', '--concurrency-key', 'repo/main', '--concurrency-limit', '2'],
      { env, stdin: task() },
    );
    assert.equal(submitted.concurrencyKey, 'repo/main');
    assert.equal(submitted.concurrencyLimit, 2);
    const show = await queue(['show', submitted.taskId]);
    assert.match(show.stdout, /concurrency key repo\/main \(at most 2 at once\)/);
    const list = await queue(['list', '--queue', 'cliq']);
    assert.match(list.stdout, /concurrency key repo\/main \(at most 2 at once\)/);
    const single = await cliJson('queue', ['submit', '--json-stdin', '--concurrency-key', 'k'], {
      env,
      stdin: task(),
    });
    assert.equal(single.concurrencyLimit, 1);
    const noKey = await queue(['submit', '--json-stdin', '--concurrency-limit', '2'], task());
    assert.equal(noKey.code, 2, noKey.stderr);
    assert.match(noKey.stderr, /--concurrency-limit needs --concurrency-key/);
    const zero = await queue(
      ['submit', '--json-stdin', '--concurrency-key', 'k', '--concurrency-limit', '0'],
      task(),
    );
    assert.equal(zero.code, 2, zero.stderr);
    const tooLong = await queue(
      ['submit', '--json-stdin', '--concurrency-key', 'k'.repeat(201)],
      task(),
    );
    assert.notEqual(tooLong.code, 0);
    assert.match(tooLong.stderr + tooLong.stdout, /schema-invalid/);
  });
});
