import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { FakeKube } from '@svc/testkit';
import { runBody, startTestManager, type TestManager } from './helpers.js';
import { validateManifest, startFakeKube } from './kube-helpers.js';

/**
 * The runner pod as the Kubernetes launcher renders and sends it, field by field: what a
 * cluster running code a model wrote must be able to rely on.
 */
const NS = 'svc-v01';
const API_KEY = 'manager-api-key-hardening-0123';
const TOKEN_CANARY = 'transient-canary-value-7f3a9c';
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
      SVC_MANAGER_PUBLIC_URL: 'http://svc-run-manager.svc-v01.svc:8080',
      SVC_KUBE_POLL_INTERVAL_MS: '100',
      SVC_JOB_TTL_SECONDS: '900',
      SVC_RUNNER_CPU_REQUEST: '500m',
      SVC_RUNNER_MEMORY_REQUEST: '1Gi',
      SVC_RUNNER_MEMORY_LIMIT: '3Gi',
      SVC_RUNNER_CPU_LIMIT: '2',
      SVC_RUNNER_EPHEMERAL_STORAGE_LIMIT: 'none',
      SVC_RUNNER_JOB_DEADLINE_FACTOR: '4',
    },
  });
  await t.configureProfile('builtin-a');
});
after(async () => {
  await t.close();
  await fake.close();
});

/** A run with this idle budget, a turn, and its runner Job launched; the Job as stored. */
async function launched(timeoutMs: number) {
  const run = await t.api(
    'POST',
    '/api/v1/runs',
    runBody({ executionPolicy: { timeoutMs, sandbox: 'workspace-write', network: 'disabled' } }),
  );
  assert.equal(run.status, 201, run.raw);
  const command = await t.api('POST', `/api/v1/runs/${run.body.runId}/commands`, {
    type: 'turn',
    payload: { prompt: 'hello' },
  });
  assert.equal(command.status, 201, command.raw);
  const job = await t.api('POST', `/api/v1/runs/${run.body.runId}/runner-jobs`, {
    commandId: command.body.commandId,
    transientEnv: [{ name: 'LAB_TOKEN', value: TOKEN_CANARY }],
  });
  assert.equal(job.status, 201, job.raw);
  const manifest = fake.get('jobs', NS, job.body.jobName) as any;
  assert.ok(manifest, 'the Job reached the API server');
  validateManifest(manifest);
  return { jobName: job.body.jobName as string, manifest, pod: manifest.spec.template.spec };
}

describe('hardened runner pods', () => {
  let job: Awaited<ReturnType<typeof launched>>;
  before(async () => {
    job = await launched(120_000);
  });

  it('run as a non-root user, at pod and container level', () => {
    assert.equal(job.pod.securityContext.runAsNonRoot, true);
    assert.equal(job.pod.securityContext.runAsUser, 1000);
    assert.notEqual(job.pod.securityContext.runAsUser, 0);
    for (const c of job.pod.containers) {
      assert.equal(c.securityContext.runAsNonRoot, true, c.name);
      assert.equal(c.securityContext.allowPrivilegeEscalation, false, c.name);
      assert.notEqual(c.securityContext.privileged, true, c.name);
    }
  });

  it('drop every capability and add none', () => {
    for (const c of job.pod.containers) {
      assert.deepEqual(c.securityContext.capabilities.drop, ['ALL'], c.name);
      assert.equal(c.securityContext.capabilities.add, undefined, c.name);
    }
  });

  it('use the RuntimeDefault seccomp profile and a read-only root filesystem', () => {
    assert.deepEqual(job.pod.securityContext.seccompProfile, { type: 'RuntimeDefault' });
    for (const c of job.pod.containers)
      assert.equal(c.securityContext.readOnlyRootFilesystem, true);
  });

  it('get no service-account token and no host namespaces', () => {
    assert.equal(job.pod.automountServiceAccountToken, false);
    assert.equal(job.pod.hostNetwork, undefined);
    assert.equal(job.pod.hostPID, undefined);
    assert.equal(job.pod.hostIPC, undefined);
    assert.equal(job.pod.enableServiceLinks, false);
  });

  it('take resource requests and limits from the configuration', () => {
    const [runner] = job.pod.containers;
    assert.deepEqual(runner.resources, {
      requests: { cpu: '500m', memory: '1Gi', 'ephemeral-storage': '1Gi' },
      // `none` leaves a limit out.
      limits: { cpu: '2', memory: '3Gi' },
    });
  });

  it('stop at a deadline that follows the run timeout, once, and are kept for the TTL', async () => {
    assert.equal(job.manifest.spec.backoffLimit, 0);
    assert.equal(job.pod.restartPolicy, 'Never');
    assert.equal(job.manifest.spec.ttlSecondsAfterFinished, 900);
    // Four idle budgets of 120 s, plus the start-up allowance.
    assert.equal(job.manifest.spec.activeDeadlineSeconds, 4 * 120 + 600);
    const longer = await launched(900_000);
    assert.equal(longer.manifest.spec.activeDeadlineSeconds, 4 * 900 + 600);
  });

  it('keep secret material in memory-backed or Secret volumes, never in the manifest', () => {
    const volumes = new Map<string, any>(job.pod.volumes.map((v: any) => [v.name, v]));
    for (const home of ['runner-home', 'agent-home'])
      assert.deepEqual(volumes.get(home).emptyDir, { medium: 'Memory' }, home);
    for (const secret of ['job-env', 'profile']) {
      assert.ok(volumes.get(secret).secret, secret);
      const mount = job.pod.containers[0].volumeMounts.find((m: any) => m.name === secret);
      assert.equal(mount.readOnly, true, secret);
    }
    const text = JSON.stringify(job.manifest);
    assert.ok(!text.includes(TOKEN_CANARY), 'a transient value in the Job');
    assert.ok(!text.includes(API_KEY), 'the manager token in the Job');
    assert.ok(!job.pod.containers[0].env.some((e: any) => e.valueFrom), 'no Secret env refs');
  });

  it('own their per-job Secret: it names the Job as owner and goes with it', async () => {
    const secret = fake.get('secrets', NS, `${job.jobName}-env`) as any;
    assert.ok(secret);
    assert.equal(secret.immutable, true);
    const owners = secret.metadata.ownerReferences;
    assert.equal(owners.length, 1);
    assert.equal(owners[0].kind, 'Job');
    assert.equal(owners[0].apiVersion, 'batch/v1');
    assert.equal(owners[0].name, job.jobName);
    assert.equal(owners[0].uid, job.manifest.metadata.uid);
    const value = Buffer.from(secret.data['transient-env.json'], 'base64').toString();
    assert.ok(value.includes(TOKEN_CANARY), 'the value lives in the Secret only');
    // The garbage collector removes dependents with their owner (the fake does as the real).
    const response = await fetch(
      `${fake.url}/apis/batch/v1/namespaces/${NS}/jobs/${job.jobName}?propagationPolicy=Background`,
      { method: 'DELETE' },
    );
    assert.equal(response.status, 200);
    assert.equal(fake.get('secrets', NS, `${job.jobName}-env`), undefined);
  });
});
