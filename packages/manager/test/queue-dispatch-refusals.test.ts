import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  dispatch,
  fingerprint,
  show,
  startQueueRig,
  submit,
  type QueueRig,
} from './queue-helpers.js';
import { createSession } from './helpers.js';

let rig: QueueRig;
before(async () => {
  rig = await startQueueRig();
});
after(() => rig.close());

const api = (method: string, url: string, body?: unknown) => rig.t.api(method, url, body);
const DIGEST = (c: string) => `registry.example.com/runner@sha256:${c.repeat(64)}`;
const SSH_TOOL = {
  tool: 'platform-ssh',
  purpose: 'ssh-passthrough',
  secretRef: { name: 'svc-v01-tool-ssh', keys: ['PLATFORM_SSH_CLIENT_TOKEN'] },
  projection: { kind: 'env', envName: 'PLATFORM_SSH_CLIENT_TOKEN' },
};

/** Every kind of runner Job override the manager refuses, with the refusal it gets. */
const BAD_OVERRIDES: Array<[string, Record<string, unknown>, number, string]> = [
  ['a mutable image tag', { image: 'registry.example.com/runner:latest' }, 400, 'schema-invalid'],
  ['a tag without registry', { image: 'runner' }, 400, 'schema-invalid'],
  ['a digest not allowlisted', { image: DIGEST('c') }, 403, 'tenant-policy-denied'],
  [
    'an environment specification not catalogued',
    {
      backendImageRef: {
        source: {
          kind: 'env-image-dockerfile',
          repoUrl: 'https://example.com/acme/env.git',
          commitId: 'a'.repeat(40),
          dockerfilePath: 'Dockerfile',
        },
      },
    },
    409,
    'build-required',
  ],
  ...[
    'OPENAI_API_KEY',
    'GITHUB_TOKEN',
    'GH_TOKEN',
    'CODEHOST_TOKEN',
    'PLATFORM_SSH_CLIENT_TOKEN',
    'SVC_API_KEY',
    'DEPLOY_SSH_KEY',
  ].map((name): [string, Record<string, unknown>, number, string] => [
    `transientEnv ${name}`,
    { transientEnv: [{ name, value: 'x' }] },
    400,
    'schema-invalid',
  ]),
  [
    'a transientEnv value over 4096 bytes',
    { transientEnv: [{ name: 'LAB_NOTE', value: 'v'.repeat(4097) }] },
    400,
    'schema-invalid',
  ],
  [
    'a transientEnv value shaped like a token',
    { transientEnv: [{ name: 'LAB_NOTE', value: `ghp_${'A'.repeat(36)}` }] },
    400,
    'schema-invalid',
  ],
  [
    'a transientEnv name given twice',
    {
      transientEnv: [
        { name: 'LAB_NOTE', value: 'a' },
        { name: 'LAB_NOTE', value: 'b' },
      ],
    },
    400,
    'schema-invalid',
  ],
];

async function expectRefused(
  taskId: string,
  body: Record<string, unknown>,
  status: number,
  failureKind: string,
) {
  const before = await fingerprint(rig.t);
  const planned = await api('POST', `/api/v1/queue/tasks/${taskId}/dispatch`, {
    ...body,
    dryRun: true,
  });
  const real = await api('POST', `/api/v1/queue/tasks/${taskId}/dispatch`, body);
  for (const [what, res] of [
    ['dry run', planned],
    ['dispatch', real],
  ] as const) {
    assert.equal(res.status, status, `${what}: ${res.raw}`);
    assert.equal(res.body.failureKind, failureKind, `${what}: ${res.raw}`);
  }
  assert.equal(planned.body.message, real.body.message, 'the same refusal for both');
  assert.deepEqual(await fingerprint(rig.t), before, 'nothing was written');
}

describe('queue dispatch refuses bad runner Job overrides before anything is written', () => {
  for (const [what, runnerJob, status, failureKind] of BAD_OVERRIDES) {
    it(`${what}: ${failureKind} for the dry run and the dispatch; the task stays queued`, async () => {
      const task = await submit(rig.t);
      await expectRefused(task.taskId, { runnerJob }, status, failureKind);
      const shown = await show(rig.t, task.taskId);
      assert.equal(shown.state, 'queued');
      assert.equal(shown.counters.attempts, 0, 'no attempt was spent');
      assert.equal(shown.latestAttempt, null);
      const ok = await dispatch(rig.t, task.taskId);
      assert.equal(ok.attempt.retryIndex, 0, 'the first real attempt is still attempt 0');
    });
  }

  it('a task on a session: refused the same way, the session untouched', async () => {
    const session = await createSession(rig.t);
    const task = await submit(rig.t, { sessionRef: { sessionId: session.sessionId } });
    await expectRefused(
      task.taskId,
      { runnerJob: { image: 'registry.example.com/runner:v2' } },
      400,
      'schema-invalid',
    );
    const after = (await api('GET', `/api/v1/sessions/${session.sessionId}`)).body;
    assert.equal(after.activeCommandId, null);
    assert.equal(after.version, session.version);
  });

  it('a platform-ssh task without an endpoint: refused before its attempt; with one it dispatches', async () => {
    const task = await submit(rig.t, {
      executionPolicy: { secretScope: { toolCredentials: [SSH_TOOL] } },
    });
    await expectRefused(task.taskId, {}, 400, 'schema-invalid');
    assert.equal((await show(rig.t, task.taskId)).counters.attempts, 0);
    const ok = await dispatch(rig.t, task.taskId, {
      runnerJob: {
        transientEnv: [{ name: 'PLATFORM_FRONTEND_URL', value: 'https://frontend.internal' }],
      },
    });
    assert.equal(ok.attempt.retryIndex, 0);
  });

  it('a valid override passes the same check in both, and the dispatch reports workReady', async () => {
    const task = await submit(rig.t);
    const runnerJob = {
      retention: 'keep',
      transientEnv: [{ name: 'LAB_NOTE', value: 'n'.repeat(4096) }],
    };
    const planned = await api('POST', `/api/v1/queue/tasks/${task.taskId}/dispatch`, {
      runnerJob,
      dryRun: true,
    });
    assert.equal(planned.status, 200, planned.raw);
    const d = await dispatch(rig.t, task.taskId, { runnerJob });
    assert.ok(d.workReady, 'workReady is filled before the runner reports');
    assert.equal(d.workReady.valuesPrinted, false);
    assert.ok(d.workReady.tools.some((tool: { name: string }) => tool.name === 'git'));
    const again = await api('POST', `/api/v1/queue/tasks/${task.taskId}/dispatch`, {
      attemptId: d.attempt.attemptId,
    });
    assert.equal(again.status, 200, again.raw);
    assert.deepEqual(again.body.workReady, d.workReady, 'a replayed dispatch reports it too');
  });
});

describe('session send refuses bad runner Job overrides before the run is written', () => {
  for (const [what, runnerJob, status, failureKind] of BAD_OVERRIDES.slice(0, 6)) {
    it(`${what}: ${failureKind}, no run or command left behind`, async () => {
      const session = await createSession(rig.t);
      const before = await fingerprint(rig.t);
      for (const dryRun of [true, false]) {
        const res = await api('POST', `/api/v1/sessions/${session.sessionId}/send`, {
          prompt: 'hello',
          runnerJob,
          dryRun,
        });
        assert.equal(res.status, status, res.raw);
        assert.equal(res.body.failureKind, failureKind);
      }
      assert.deepEqual(await fingerprint(rig.t), before, 'nothing was written');
    });
  }
});
