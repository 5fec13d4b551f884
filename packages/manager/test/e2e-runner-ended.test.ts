import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { dispatch, isolateTests, useE2E, waitFor, waitForCommand } from './e2e-helpers.js';

/**
 * A runner whose run ends under it (cancelled by an operator while the runner waits for work)
 * finds its token refused: the manager retires a job's token with its run. That is the run's
 * end, not the runner's failure: the job exits 0 and its log says why, with no error line.
 */
const rig = useE2E({ env: { SVC_RUNNER_IDLE_EXIT_MS: '60000' } });
isolateTests(rig);

/** The runner's log lines, parsed; and the ones a reader would take for trouble. */
async function runnerLog(jobName: string) {
  const log = await readFile(`${rig.e.t.dataDir}/jobs/${jobName}/runner.log`, 'utf8');
  const lines = log
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { level: unknown; msg: string; reason?: string });
  const trouble = lines.filter((l) => ['error', 'warn', 40, 50, 60].includes(l.level as string));
  return { log, lines, trouble };
}

async function finishedJob(runId: string, runnerJobId: string) {
  return waitFor('the runner job to end', async () => {
    const j = (await rig.e.t.api('GET', `/api/v1/runs/${runId}/runner-jobs/${runnerJobId}`)).body;
    return ['succeeded', 'failed', 'cancelled'].includes(j.phase) ? j : null;
  });
}

/** Cancel the run; its runner job must end succeeded, exit 0, with no error or warning. */
async function cancelAndExpectQuietEnd(
  runId: string,
  job: { runnerJobId: string; jobName: string },
) {
  const cancelled = await rig.e.t.api('POST', `/api/v1/runs/${runId}/cancel`, {
    reason: 'operator',
  });
  assert.equal(cancelled.status, 200, cancelled.raw);
  const finished = await finishedJob(runId, job.runnerJobId);
  const { log, lines, trouble } = await runnerLog(job.jobName);
  assert.deepEqual([finished.phase, finished.exitCode], ['succeeded', 0], log);
  assert.equal(lines.find((l) => l.msg === 'runner exiting')?.reason, 'run-terminal', log);
  assert.deepEqual(trouble, [], 'no error or warning for a run that simply ended');
}

describe('a runner whose run ends under it', () => {
  it('exits 0 without an error when the run is cancelled mid-turn', async () => {
    // The model takes its time: the run is cancelled while the turn is in flight, so the
    // runner's last calls for that turn reach a manager that has retired its token.
    rig.e.provider.enqueue({ kind: 'stall', ms: 20_000 });
    const { runId, commandId, job } = await dispatch(rig.e, 'take your time');
    await waitFor('the turn to start', async () => {
      const c = (await rig.e.t.api('GET', `/api/v1/runs/${runId}/commands/${commandId}`)).body;
      return c.state === 'confirmed' && rig.e.provider.requestsOf().length > 0 ? c : null;
    });
    await cancelAndExpectQuietEnd(runId, job);
  });

  it('exits 0 quietly when the run is cancelled between turns', async () => {
    rig.e.provider.enqueue({ kind: 'text', text: 'done' });
    const { runId, commandId, job } = await dispatch(rig.e, 'say done');
    assert.equal((await waitForCommand(rig.e.t, runId, commandId)).state, 'completed');
    await cancelAndExpectQuietEnd(runId, job);
  });
});
