import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ConfigError } from '@svc/contracts';
import type { FakeKube } from '@svc/testkit';
import { loadConfig } from '../src/config.js';
import { createSession, runBody, startTestManager, type TestManager } from './helpers.js';
import { containerEnv, eventually, validateManifest, startFakeKube } from './kube-helpers.js';

const NS = 'svc-v01';
const PUBLIC_URL = 'http://svc-run-manager.svc-v01.svc:8080';
const API_KEY = 'manager-api-key-0123456789';
let fake: FakeKube;
let t: TestManager;

before(async () => {
  fake = await startFakeKube();
  t = await startTestManager({
    env: {
      SVC_API_KEY: API_KEY,
      SVC_LAUNCHER: 'kubernetes',
      SVC_SECRET_STORE: 'kubernetes',
      SVC_KUBE_API_URL: fake.url,
      SVC_MANAGER_PUBLIC_URL: PUBLIC_URL,
      SVC_KUBE_POLL_INTERVAL_MS: '100',
    },
  });
  await t.configureProfile('builtin-a');
});
after(async () => {
  await t.close();
  await fake.close();
});

async function runAndCommand(extra: Record<string, unknown> = {}) {
  const run = await t.api('POST', '/api/v1/runs', runBody(extra));
  assert.equal(run.status, 201, run.raw);
  const command = await t.api('POST', `/api/v1/runs/${run.body.runId}/commands`, {
    type: 'turn',
    payload: { prompt: 'hello' },
  });
  assert.equal(command.status, 201, command.raw);
  return { runId: run.body.runId as string, commandId: command.body.commandId as string };
}

const getJob = (runId: string, runnerJobId: string) =>
  t.api('GET', `/api/v1/runs/${runId}/runner-jobs/${runnerJobId}`);

describe('a manager on the Kubernetes launcher and Secret store', () => {
  it('keeps provider Secrets as Kubernetes Secrets', () => {
    const secret = fake.get('secrets', NS, 'svc-v01-provider-builtin-a') as any;
    assert.ok(secret, 'configureProfile wrote through the API');
    assert.equal(secret.metadata.labels['svc.dev/managed'], 'true');
    assert.deepEqual(Object.keys(secret.data).sort(), ['auth.json', 'config.toml']);
  });

  it('checks the profile of a new run with one read of its Secret, never a list of every Secret', async () => {
    fake.clearRequests();
    const run = await t.api('POST', '/api/v1/runs', runBody());
    assert.equal(run.status, 201, run.raw);
    const secretCalls = fake.requests
      .filter((r) => r.path.includes('/secrets'))
      .map((r) => `${r.method} ${r.path}`);
    assert.deepEqual(secretCalls, [
      `GET /api/v1/namespaces/${NS}/secrets/svc-v01-provider-builtin-a`,
    ]);

    fake.clearRequests();
    const missing = await t.api('POST', '/api/v1/runs', runBody({ backendProfile: 'absent-x' }));
    assert.equal(missing.status, 424, missing.raw);
    assert.equal(missing.body.failureKind, 'secret-unavailable');
    assert.ok(
      fake.requests.every((r) => r.method !== 'GET' || !r.path.endsWith('/secrets')),
      'no Secret list',
    );
  });

  it('POST /runner-jobs creates the per-job Secret and the Job, and follows its phases', async () => {
    const { runId, commandId } = await runAndCommand();
    const created = await t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, {
      commandId,
      idempotencyKey: 'k8s-job-1',
      transientEnv: [{ name: 'LAB_RUNTIME_API_URL', value: 'https://lab.example/api' }],
    });
    assert.equal(created.status, 201, created.raw);
    const job = created.body;
    assert.equal(job.launcher, 'kubernetes');
    assert.equal(job.namespace, NS);
    assert.equal(job.phase, 'starting');
    assert.match(job.podIdentity, new RegExp(`^kubernetes:${NS}/job/${job.jobName}#`));
    assert.deepEqual(job.transientEnv.secretRef, { name: `${job.jobName}-env`, namespace: NS });

    const manifest = fake.get('jobs', NS, job.jobName) as any;
    validateManifest(manifest);
    const env = containerEnv(manifest);
    assert.equal(env.SVC_MANAGER_URL, PUBLIC_URL);
    assert.equal(env.SVC_RUN_ID, runId);
    assert.equal(env.SVC_ATTEMPT_ID, job.attemptId);
    assert.equal(env.SVC_RUNNER_JOB_ID, job.runnerJobId);
    assert.equal(manifest.metadata.labels['svc.dev/runner-job-id'], job.runnerJobId);
    assert.equal(manifest.spec.ttlSecondsAfterFinished, 3600);
    const secret = fake.get('secrets', NS, `${job.jobName}-env`) as any;
    // The runner gets its own token for this run alone, never the operator's API key.
    const managerToken = Buffer.from(secret.data['manager-token'], 'base64').toString();
    assert.match(managerToken, /^svcr_[A-Za-z0-9_-]{20,}$/);
    assert.notEqual(managerToken, API_KEY);
    assert.equal(secret.metadata.ownerReferences[0].uid, manifest.metadata.uid);

    // The same idempotency key returns the same job and creates nothing.
    const jobsBefore = fake.list('jobs', NS).length;
    const again = await t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, {
      commandId,
      idempotencyKey: 'k8s-job-1',
      transientEnv: [{ name: 'LAB_RUNTIME_API_URL', value: 'https://lab.example/api' }],
    });
    assert.equal(again.status, 200, again.raw);
    assert.equal(again.body.runnerJobId, job.runnerJobId);
    assert.equal(fake.list('jobs', NS).length, jobsBefore);

    fake.setJobState(NS, job.jobName, 'running');
    await eventually(async () =>
      (await getJob(runId, job.runnerJobId)).body.phase === 'running' ? true : undefined,
    );
    fake.setJobState(NS, job.jobName, 'succeeded');
    const done = await eventually(async () => {
      const current = await getJob(runId, job.runnerJobId);
      return current.body.phase === 'succeeded' ? current.body : undefined;
    });
    assert.equal(done.exitCode, 0);
    assert.equal(done.terminalSummary.condition, 'Complete');
    assert.ok(done.finishedAt);
  });

  it('a dry run returns the Job and Secret manifests with names and hashes only', async () => {
    const { runId, commandId } = await runAndCommand();
    const jobsBefore = fake.list('jobs', NS).length;
    const secretsBefore = fake.list('secrets', NS).length;
    const value = 'lab-value-never-printed-0123';
    const dry = await t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, {
      commandId,
      dryRun: true,
      transientEnv: [{ name: 'LAB_API_KEY', value }],
    });
    assert.equal(dry.status, 200, dry.raw);
    assert.equal(dry.body.dryRun, true);
    assert.equal(dry.body.valuesPrinted, false);
    const manifest = dry.body.manifest;
    assert.equal(manifest.kind, 'KubernetesRunnerJob');
    validateManifest(manifest.job);
    validateManifest(manifest.secret);
    assert.equal(manifest.secret.metadata.name, `${dry.body.jobName}-env`);
    assert.deepEqual(manifest.secretData.map((d: any) => d.key).sort(), [
      'manager-token',
      'transient-env.json',
    ]);
    assert.deepEqual(dry.body.transientEnv.names, ['LAB_API_KEY']);
    for (const secret of [value, API_KEY]) assert.ok(!dry.raw.includes(secret));
    assert.equal(fake.list('jobs', NS).length, jobsBefore, 'a dry run creates no Job');
    assert.equal(fake.list('secrets', NS).length, secretsBefore, 'nor a Secret');
  });

  it('reports a Job that disappeared as failed', async () => {
    const { runId, commandId } = await runAndCommand();
    const created = await t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, { commandId });
    assert.equal(created.status, 201, created.raw);
    fake.remove('jobs', NS, created.body.jobName);
    const failed = await eventually(async () => {
      const current = await getJob(runId, created.body.runnerJobId);
      return current.body.phase === 'failed' ? current.body : undefined;
    });
    assert.equal(failed.terminalSummary.reason, 'job-not-found');
  });

  it('a Job that fails before claiming fails its command at once with the launcher reason', async () => {
    const { runId, commandId } = await runAndCommand();
    const created = await t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, { commandId });
    assert.equal(created.status, 201, created.raw);
    const started = Date.now();
    fake.setJobState(NS, created.body.jobName, 'failed', {
      exitCode: 3,
      reason: 'BackoffLimitExceeded',
    });
    const command = await eventually(async () => {
      const current = await t.api('GET', `/api/v1/runs/${runId}/commands/${commandId}`);
      return current.body.state === 'failed' ? current.body : undefined;
    });
    // The command TTL is minutes; this is the launcher's report, not the expiry.
    assert.ok(Date.now() - started < 10_000, 'at once, not at the command expiry');
    assert.equal(command.failureKind, 'infra-failed');
    assert.match(command.message, /before claiming its run/);
    assert.match(command.message, /BackoffLimitExceeded|exit code 3/);
    const run = (await t.api('GET', `/api/v1/runs/${runId}`)).body;
    assert.equal(run.state, 'failed');
    assert.equal(run.failureKind, 'infra-failed');
  });

  it('a session creates its claim; its runner Job mounts it in the agent home', async () => {
    const sessionId = (await createSession(t)).sessionId as string;
    const pvcName = `svc-v01-session-${sessionId}`;
    const claim = fake.get('persistentvolumeclaims', NS, pvcName) as any;
    assert.ok(claim, 'the claim was created with the session');
    validateManifest(claim);

    const sent = await t.api('POST', `/api/v1/sessions/${sessionId}/send`, { prompt: 'go' });
    assert.equal(sent.status, 201, sent.raw);
    const runnerJob = sent.body.runnerJob;
    assert.ok(runnerJob, sent.raw);
    const manifest = fake.get('jobs', NS, runnerJob.jobName) as any;
    const pod = manifest.spec.template.spec;
    const volume = pod.volumes.find((v: any) => v.persistentVolumeClaim);
    assert.equal(volume.persistentVolumeClaim.claimName, pvcName);
    const mount = pod.containers[0].volumeMounts.find((m: any) => m.name === volume.name);
    assert.equal(mount.mountPath, '/home/runner/agent-home/sessions');
    const env = containerEnv(manifest);
    assert.equal(env.SVC_SESSION_PVC_NAME, pvcName);
    assert.equal(env.SVC_SESSION_PVC_NAMESPACE, NS);
    assert.equal(env.SVC_SESSION_PVC_MOUNT_PATH, '/home/runner/agent-home/sessions');
    assert.equal(env.SVC_AGENT_ROLLOUT_SUBDIR, 'sessions');
    assert.equal(manifest.metadata.labels['svc.dev/session-id'], sessionId);
  });
});

describe('configuration of the Kubernetes edges', () => {
  const problems = (env: Record<string, string>) => {
    try {
      loadConfig(env);
      return [];
    } catch (error) {
      assert.ok(error instanceof ConfigError);
      return [...error.problems];
    }
  };

  it('defaults to the local launcher and store, with 1Gi local-path claims', () => {
    const config = loadConfig({});
    assert.equal(config.launcher.kind, 'local');
    assert.equal(config.secretStore.kind, 'local');
    assert.equal(config.kubernetes.sessionStorageClass, 'local-path');
    assert.equal(config.kubernetes.sessionStorageSize, '1Gi');
    assert.equal(config.kubernetes.apiUrl, null);
  });

  it('refuses settings the cluster edges cannot work with', () => {
    assert.deepEqual(problems({ SVC_LAUNCHER: 'kubernetes' }), [
      'SVC_MANAGER_PUBLIC_URL is required with SVC_LAUNCHER=kubernetes (the URL pods use)',
    ]);
    assert.deepEqual(problems({ SVC_SECRET_STORE: 'kubernetes', SVC_NAMESPACE: 'default' }), [
      'SVC_NAMESPACE must be svc-v01 with the Kubernetes launcher or Secret store',
    ]);
    assert.equal(problems({ SVC_SECRET_STORE: 'vault' }).length, 1);
    assert.equal(problems({ SVC_SESSION_STORAGE_SIZE: '1GB' }).length, 1);
    assert.equal(problems({ SVC_KUBE_POLL_INTERVAL_MS: '10' }).length, 1);
    assert.deepEqual(
      problems({
        SVC_LAUNCHER: 'kubernetes',
        SVC_SECRET_STORE: 'kubernetes',
        SVC_MANAGER_PUBLIC_URL: PUBLIC_URL,
      }),
      [],
    );
  });
});
