import assert from 'node:assert/strict';
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { canary, ensureTestTag, processesWithTag } from '@svc/testkit';
import {
  agentPidOf,
  dispatch,
  isolateTests,
  useE2E,
  waitFor,
  waitForCommand,
} from './e2e-helpers.js';
import { findCanariesInTree } from './secret-scan.js';

const providerKey = `sk-${canary('provider-key')}`;
const rig = useE2E({ providerKey });
isolateTests(rig);
const tag = ensureTestTag();

/** Runner tokens have a recognisable shape; none may stay on disk whatever its value. */
const RUNNER_TOKEN = /svcr_[A-Za-z0-9_-]{16,}/;

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

/** A job with a transientEnv canary; returns its ids, directory and the values to look for. */
async function secretJob(prompt: string) {
  const transient = canary('transient-env');
  const dispatched = await dispatch(
    rig.e,
    prompt,
    {},
    { transientEnv: [{ name: 'LAB_TOKEN_HINT', value: transient }] },
  );
  const jobDir = join(rig.e.t.dataDir, 'jobs', dispatched.job.jobName as string);
  const authJson = JSON.stringify({ OPENAI_API_KEY: providerKey, auth_mode: 'apikey' });
  const apiKey = process.env['SVC_API_KEY'];
  return {
    ...dispatched,
    jobDir,
    canaries: [providerKey, authJson, transient, ...(apiKey ? [apiKey] : [])],
  };
}

async function jobPhase(runId: string, runnerJobId: string): Promise<string> {
  return (await rig.e.t.api('GET', `/api/v1/runs/${runId}/runner-jobs/${runnerJobId}`)).body.phase;
}

/** Wait for the job's terminal phase, then assert nothing secret is left under the data dir. */
async function assertNoSecretOnDisk(job: Awaited<ReturnType<typeof secretJob>>): Promise<string> {
  const phase = await waitFor(
    'the job to reach a terminal phase',
    async () => {
      const p = await jobPhase(job.runId, job.job.runnerJobId);
      return ['succeeded', 'failed', 'cancelled'].includes(p) && p;
    },
    60_000,
  );
  // The phase is recorded after the cleanup: at this point the disk must already be clean.
  // `secrets/` is the local Secret store, where the profile's key is meant to live.
  const hits = await findCanariesInTree(rig.e.t.dataDir, job.canaries, {
    skip: ['secrets'],
    pattern: RUNNER_TOKEN,
  });
  assert.deepEqual(hits, [], `secret material left on disk after a ${phase} job`);
  for (const dir of ['secret', 'agent-home', 'home'])
    assert.equal(await exists(join(job.jobDir, dir)), false, `${dir}/ is removed`);
  assert.ok(await exists(join(job.jobDir, 'runner.log')), 'the (redacted) runner log stays');
  return phase;
}

/** While the job runs, its agent home holds the key: proof the scan looks at the right place. */
async function assertKeyOnDiskWhileRunning(job: Awaited<ReturnType<typeof secretJob>>) {
  const hits = await findCanariesInTree(job.jobDir, job.canaries);
  assert.ok(
    hits.some((h) => h.file === join('agent-home', 'auth.json') && h.canary === providerKey),
    `the running job's agent home has auth.json: ${JSON.stringify(hits)}`,
  );
  assert.deepEqual(
    hits.filter((h) => h.file.startsWith('secret/')),
    [],
    'the runner removed the per-job Secret files once it had read them',
  );
}

async function shellRunning(marker: string): Promise<void> {
  await waitFor(
    'the shell command to run',
    () => processesWithTag(tag).some((p) => p.command.includes(marker)),
    30_000,
  );
}

describe('secret material on disk lives as long as the job', () => {
  it('is gone after a completed turn', async () => {
    rig.e.provider.enqueue({ kind: 'text', text: 'Done.' });
    const job = await secretJob('Say done.');
    assert.equal((await waitForCommand(rig.e.t, job.runId, job.commandId)).state, 'completed');
    assert.equal(await assertNoSecretOnDisk(job), 'succeeded');
  });

  it('is gone after the runner is killed with SIGKILL mid-turn, and its agent and shell are stopped', async () => {
    rig.e.provider.enqueue({ kind: 'tool-call', command: 'sleep 41' });
    const job = await secretJob('Wait a while.');
    await shellRunning('sleep 41');
    await assertKeyOnDiskWhileRunning(job);
    const agentPid = agentPidOf(job.job.jobName as string);
    assert.ok(agentPid, 'the agent runs');
    const runnerPid = Number(String(job.job.podIdentity).split(':').at(-1));
    // Only the runner: its agent (own group) and the shell (own session) stay behind.
    process.kill(runnerPid, 'SIGKILL');
    assert.equal(await assertNoSecretOnDisk(job), 'failed');
    assert.deepEqual(
      processesWithTag(tag).filter(
        (p) => p.command.includes('sleep 41') || p.pid === agentPid || p.pid === runnerPid,
      ),
      [],
      'no process of the job outlives its terminal phase',
    );
  });

  it('is gone after the run is cancelled mid-turn', async () => {
    rig.e.provider.enqueue({ kind: 'tool-call', command: 'sleep 43' });
    const job = await secretJob('Wait a while longer.');
    await shellRunning('sleep 43');
    await assertKeyOnDiskWhileRunning(job);
    const cancelled = await rig.e.t.api('POST', `/api/v1/runs/${job.runId}/cancel`, {
      reason: 'user pressed stop',
    });
    assert.equal(cancelled.status, 200, cancelled.raw);
    await assertNoSecretOnDisk(job);
    assert.equal(
      processesWithTag(tag).some((p) => p.command.includes('sleep 43')),
      false,
      'the shell is stopped',
    );
  });
});
