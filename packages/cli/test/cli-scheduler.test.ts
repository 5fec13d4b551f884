import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { dispatch, submit, type QueueRig } from '../../manager/test/queue-helpers.js';
import { assertBounded, cli, cliJson } from './cli-helpers.js';
import { startCliRig } from './cli-rig.js';

/**
 * `queue scheduler` and the judge runs in `queue show`, through the built client against a real
 * manager (real PostgreSQL). The scheduler loop is off here so the counts stay where the test
 * puts them; the read is the same either way.
 */
const KEY = 'svc-canary-api-key-sched-3f7a21';
let rig: QueueRig;
let env: Record<string, string>;

before(async () => {
  ({ rig, env } = await startCliRig(KEY, {
    SVC_SCHEDULER_MAX_RUNNING: '10',
    SVC_SCHEDULER_TENANT_MAX_RUNNING: '4',
    SVC_SCHEDULER_TENANT_LIMITS: 'tenant-quiet=0',
    SVC_SCHEDULER_PROFILE_LIMITS: 'builtin-a=6',
  }));
});
after(async () => {
  await rig?.close();
});

const queue = (args: string[]) => cli('queue', args, { env, tty: true });

describe('queue scheduler', () => {
  let taskId: string;
  let attemptId: string;

  it('shows capacity in use against each limit, backlog per tenant and queue', async () => {
    const settings = await rig.t.api('PUT', '/api/v1/queue/queues/sched/settings', {
      maxRunning: 5,
    });
    assert.equal(settings.status, 200, settings.raw);
    taskId = (await submit(rig.t, { queue: 'sched' })).taskId;
    await submit(rig.t, { queue: 'sched' });
    const later = new Date(Date.now() + 3_600_000).toISOString();
    await submit(rig.t, { queue: 'sched', tenantId: 'tenant-b', runAfter: later });
    const dispatched = await dispatch(rig.t, taskId);
    attemptId = dispatched.attempt.attemptId;

    const json = await cliJson('queue', ['scheduler'], { env });
    assert.equal(json.inUse.global, 1);
    assert.deepEqual(json.inUse.byTenant, { 'tenant-a': 1 });
    assert.equal(json.limits.queues.sched, 5);

    const human = await queue(['scheduler']);
    assert.equal(human.code, 0, human.stderr);
    assertBounded(human.stdout, 30);
    const out = human.stdout;
    assert.match(out, /^scheduler off \(instance /m);
    assert.match(out, /capacity in use: global 1\/10/);
    assert.match(out, /per tenant: each 4\n\s+tenant-a {2}1\/4\n\s+tenant-quiet {2}0\/0/);
    assert.match(out, /per backend profile: each unlimited\n\s+builtin-a {2}1\/6/);
    assert.match(out, /per queue: each unlimited\n\s+sched {2}1\/5/);
    assert.match(out, /tenant-a {2}sched {2}1 {2}0 {2}-/, 'one ready task of tenant-a');
    assert.ok(
      out.includes(`tenant-b  sched  0  1  ${later.slice(0, 19)}`),
      `tenant-b waits for its runAfter:\n${out}`,
    );
    assert.ok(!out.includes(KEY));
  });

  it("prints a task's judge runs in show and in judge-runs", async () => {
    const db = rig.t.manager.store.db;
    await sql`
      INSERT INTO queue_judge_runs (judge_run_id, task_id, attempt_id, state, request, result,
        verdict, failure_kind, retry_suggestion, backend_profile, terminal_at)
      VALUES ('jdg-cli-1', ${taskId}, ${attemptId}, 'completed', '{}'::jsonb, '{}'::jsonb,
        'fail', 'schema-invalid', 'add the missing changelog entry', 'builtin-a', now())`.execute(
      db,
    );

    const show = await queue(['show', taskId]);
    assert.equal(show.code, 0, show.stderr);
    assertBounded(show.stdout, 30);
    assert.match(show.stdout, /judge runs: 1/);
    assert.match(
      show.stdout,
      new RegExp(`judge jdg-cli-1 completed verdict fail schema-invalid {2}attempt ${attemptId}`),
    );
    assert.match(show.stdout, /retry suggestion: add the missing changelog entry/);

    const list = await cliJson('queue', ['judge-runs', taskId], { env });
    assert.equal(list.judgeRuns.length, 1);
    assert.equal(list.judgeRuns[0].verdict, 'fail');
    assert.equal(list.judgeRuns[0].retrySuggestion, 'add the missing changelog entry');
    const human = await queue(['judge-runs', taskId]);
    assert.match(human.stdout, /1 judge run\(s\) for /);
    assert.match(human.stdout, new RegExp(`attempt ${attemptId}`));
  });
});
