import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  runBody,
  startTestManager,
  TestRunner,
  type TestManager,
} from '../../manager/test/helpers.js';
import { assertBuilt, cli } from './cli-helpers.js';

/**
 * `runs events --follow` against a manager that holds its limit of client watches: the refused
 * long-poll (429, Retry-After) is asked again after the time named, and the follow ends with
 * the turn's outcome, not with an error.
 */
let t: TestManager;
before(async () => {
  assertBuilt();
  t = await startTestManager({
    listen: true,
    env: { SVC_MAX_WATCHES: '1', SVC_CLIENT_WAIT_MAX_MS: '8000' },
  });
  await t.configureProfile('builtin-a');
});
after(() => t.close());

describe('following a run while the manager holds its watch limit', () => {
  it('waits out the refusal and follows the turn to its end', async () => {
    const run = await t.api('POST', '/api/v1/runs', runBody());
    const runId = run.body.runId as string;
    const command = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'hi' },
    });
    const runner = new TestRunner(t, 'rnr-cliwatch1', runId);
    assert.equal((await runner.claim()).status, 200);
    assert.equal((await runner.ack(command.body.commandId)).status, 200);
    const lastSeq = (await t.api('GET', `/api/v1/runs/${runId}`)).body.lastSeq as number;

    // Another client holds the one slot for 8 s.
    const other = await t.api('POST', '/api/v1/runs', runBody());
    const holding = fetch(
      `${t.manager.url}/api/v1/runs/${other.body.runId}/events?afterSeq=1000&waitMs=8000`,
    );
    await new Promise((r) => setTimeout(r, 200));
    const refused = await fetch(`${t.manager.url}/api/v1/runs/${runId}/events?waitMs=1000`);
    assert.equal(refused.status, 429, 'the slot is taken');

    const following = cli('runs', ['events', runId, '--follow', '--after', String(lastSeq)], {
      env: { SVC_MANAGER_URL: t.manager.url },
      timeoutMs: 60_000,
    });
    await holding;
    // The follower was refused meanwhile (counted), and is now past it.
    const metrics = (await t.api('GET', '/metrics')).raw;
    const refusals = Number(
      /svc_client_watches_total\{kind="long-poll",outcome="refused"\} (\d+)/.exec(metrics)?.[1],
    );
    assert.ok(refusals >= 2, `the follower's long-poll was refused too: ${refusals}`);
    await new Promise((r) => setTimeout(r, 3000));
    const done = await runner.finish(command.body.commandId, 'completed');
    assert.equal(done.status, 200, done.raw);
    const result = await following;
    assert.equal(result.code, 0, `${result.stderr}${result.stdout}`);
    assert.match(result.stdout, /terminal_status/);
    assert.doesNotMatch(result.stderr, /capacity-exceeded/);
  });
});
