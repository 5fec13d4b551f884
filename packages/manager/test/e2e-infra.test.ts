import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DEFAULT_BASE_TOOLS, detectWorkReady } from '@svc/contracts/work-ready';
import { dispatch, runEvents, useE2E, waitFor, waitForCommand } from './e2e-helpers.js';

// A base tool this machine lacks, to require it: the runner must refuse to start work.
const missing = (await detectWorkReady({ tools: DEFAULT_BASE_TOOLS })).tools.find(
  (tool) => !tool.present,
)?.name;
const skip = missing
  ? false
  : 'every base tool is installed on this machine; none can be required and found missing';
const rig = useE2E({ env: { SVC_REQUIRED_TOOLS: `git,node,${missing ?? ''}` } });

describe('runner start on a machine that is not work-ready', { skip }, () => {
  it('fails fast as infra-failed, naming the missing tool, before any turn', async () => {
    const { runId, commandId, job } = await dispatch(rig.e, 'hello');
    const command = await waitForCommand(rig.e.t, runId, commandId);
    assert.equal(command.state, 'failed');
    assert.equal(command.failureKind, 'infra-failed');
    const run = (await rig.e.t.api('GET', `/api/v1/runs/${runId}`)).body;
    assert.equal(run.state, 'failed');
    assert.equal(run.failureKind, 'infra-failed');
    assert.match(run.message, new RegExp(missing!));
    const startup = (await runEvents(rig.e.t, runId)).find((ev) => ev.name === 'runner.startup');
    const fact = startup.data.workReady.tools.find((tool: any) => tool.name === missing);
    assert.deepEqual([fact.required, fact.present], [true, false]);
    const finished = await waitFor('the runner job to end', async () => {
      const j = (await rig.e.t.api('GET', `/api/v1/runs/${runId}/runner-jobs/${job.runnerJobId}`))
        .body;
      return j.phase === 'failed' ? j : null;
    });
    assert.equal(finished.exitCode, 1);
    assert.equal(rig.e.provider.requestsOf().length, 0, 'no model request was made');
  });
});
