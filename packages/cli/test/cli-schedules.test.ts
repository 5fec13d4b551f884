import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { waitFor } from '../../manager/test/e2e-helpers.js';
import { type QueueRig } from '../../manager/test/queue-helpers.js';
import { cli, cliJson } from './cli-helpers.js';
import { startCliRig } from './cli-rig.js';

/** `queue schedules ...` through the built client against a real manager (real PostgreSQL). */
const KEY = 'svc-canary-api-key-schedules-9c2e41';
let rig: QueueRig;
let env: Record<string, string>;

before(async () => {
  // The scheduler fires the ticks; no capacity, so fired tasks stay queued.
  ({ rig, env } = await startCliRig(KEY, {
    SVC_SCHEDULER: 'on',
    SVC_SCHEDULER_SCAN_MS: '200',
    SVC_SCHEDULER_MAX_RUNNING: '0',
  }));
});
after(async () => {
  await rig?.close();
});

/** Human output: on a terminal (off a terminal the client answers JSON, as with --json). */
const queue = (args: string[]) => cli('queue', args, { env, tty: true });
const TEMPLATE = [
  '--tenant-id',
  'tenant-a',
  '--project-id',
  'proj-1',
  '--queue',
  'nightly',
  '--title',
  'nightly triage',
];

describe('queue schedules', () => {
  let scheduleId: string;

  it('creates a schedule from flags and shows it in the list, with --json everywhere', async () => {
    const created = await cliJson(
      'queue',
      [
        'schedules',
        'create',
        '--cron',
        '0 9 * * mon-fri',
        '--timezone',
        'Europe/Berlin',
        '--name',
        'triage',
        '--prompt',
        'triage new issues',
        ...TEMPLATE,
      ],
      { env },
    );
    scheduleId = created.scheduleId;
    assert.match(scheduleId, /^sch-/);
    assert.equal(created.timezone, 'Europe/Berlin');
    assert.equal(created.task.payload.prompt, 'triage new issues');
    assert.ok(new Date(created.nextRunAt) > new Date());

    const listed = await queue(['schedules']);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(
      listed.stdout,
      new RegExp(
        `${scheduleId}\\s+triage\\s+"0 9 \\* \\* mon-fri"\\s+Europe/Berlin\\s+next ${created.nextRunAt}`,
      ),
    );
    const page = await cliJson('queue', ['--json', 'schedules', 'list'], { env });
    assert.deepEqual(
      page.schedules.map((s: { scheduleId: string }) => s.scheduleId),
      [scheduleId],
    );

    const shown = await queue(['schedules', 'show', scheduleId]);
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, /cron: 0 9 \* \* mon-fri {2}timezone: Europe\/Berlin/);
    assert.match(shown.stdout, /last run: never fired/);
    assert.equal(
      (await cliJson('queue', ['schedules', 'show', scheduleId], { env })).name,
      'triage',
    );
  });

  it('shows the last task a tick made, and the task shows its schedule', async () => {
    await sql`UPDATE queue_schedules SET next_run_at = now() - interval '1 minute'
      WHERE schedule_id = ${scheduleId}`.execute(rig.t.manager.store.db);
    const fired = await waitFor('tick fired', async () => {
      const x = await cliJson('queue', ['schedules', 'show', scheduleId], { env });
      return x.lastTaskId ? x : null;
    });
    const shown = await queue(['schedules', 'show', scheduleId]);
    assert.match(shown.stdout, new RegExp(`last run: \\S+ -> ${fired.lastTaskId} \\(1 fired\\)`));
    assert.match(shown.stdout, new RegExp(`next: queue show ${fired.lastTaskId}`));
    const task = await queue(['show', fired.lastTaskId]);
    assert.equal(task.code, 0, task.stdout);
    assert.match(task.stdout, new RegExp(`from schedule ${scheduleId}, tick ${fired.lastRunAt}`));
    assert.match(task.stdout, /queue nightly\/default/);
  });

  it('takes the template from a task JSON, the flags on top', async () => {
    const body = JSON.stringify({
      tenantId: 'tenant-a',
      projectId: 'proj-1',
      queue: 'main',
      title: 'from json',
      payload: { prompt: 'json prompt' },
      priority: 3,
    });
    const created = await cliJson(
      'queue',
      ['schedules', 'create', '--cron', '*/15 * * * *', '--json-stdin', '--title', 'flag title'],
      { env, stdin: body },
    );
    assert.equal(created.task.title, 'flag title');
    assert.equal(created.task.priority, 3);
    assert.equal(created.timezone, 'UTC');
    const deleted = await queue(['schedules', 'delete', created.scheduleId]);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.match(deleted.stdout, /fires no more/);
    const gone = await queue(['schedules', 'show', created.scheduleId]);
    assert.equal(gone.code, 3);
    assert.match(gone.stdout + gone.stderr, /not found/);
  });

  it('refuses usage errors with exit 2 and sends nothing; the manager refuses a bad cron', async () => {
    for (const args of [
      ['schedules', 'create', '--prompt', 'x', ...TEMPLATE],
      ['schedules', 'create', '--cron', '* * * * *', '--prompt', 'x'],
      ['schedules', 'create', '--cron', '* * * * *', ...TEMPLATE],
      ['schedules', 'create', '--cron', '* * * * *', '--priority', 'high', ...TEMPLATE],
      ['schedules', 'show'],
      ['schedules', 'delete'],
      ['schedules', 'list', '--limit', '0'],
    ]) {
      const res = await queue(args);
      assert.equal(res.code, 2, `${args.join(' ')}: ${res.stdout} ${res.stderr}`);
    }
    const refused = await queue([
      'schedules',
      'create',
      '--cron',
      '0 0 9 * * *',
      '--prompt',
      'x',
      ...TEMPLATE,
    ]);
    assert.equal(refused.code, 3);
    assert.match(refused.stdout + refused.stderr, /seconds are not supported/);
    const page = await cliJson('queue', ['schedules'], { env });
    assert.equal(page.schedules.length, 1);
    assert.equal((await queue(['schedules', 'delete', scheduleId])).code, 0);
  });
});
