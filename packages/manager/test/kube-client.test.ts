import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { ServiceError } from '@svc/contracts';
import type { FakeKube } from '@svc/testkit';
import { createKubeApis, kubeFailure } from '../src/launcher/kube-api.js';
import { KubernetesLauncher } from '../src/launcher/kubernetes.js';
import { capturedLogger, runnerSpec, startFakeKube } from './kube-helpers.js';

/** Client discipline against the loopback fake API server: time limits, retries, refusals. */
const NS = 'svc-v01';
let fake: FakeKube;

before(async () => {
  fake = await startFakeKube();
});
after(() => fake.close());
beforeEach(() => {
  for (const resource of ['jobs', 'secrets'])
    for (const obj of fake.list(resource, NS)) fake.remove(resource, NS, obj.metadata.name);
  fake.clearRequests();
});

const apis = () => createKubeApis({ apiUrl: fake.url, requestTimeoutMs: 300, retries: 2 });
const launcherOn = (kube = apis()) =>
  new KubernetesLauncher({
    apis: kube,
    namespace: NS,
    killGraceMs: 1000,
    pollIntervalMs: 60_000,
    logger: capturedLogger().logger,
  });
const count = (method: string, resource: string) =>
  fake.requests.filter((r) => r.method === method && r.path.endsWith(`/${resource}`)).length;

async function failure(promise: Promise<unknown>, action: string): Promise<ServiceError> {
  try {
    await promise;
  } catch (error) {
    const typed = kubeFailure(error, action);
    assert.equal(typed.failureKind, 'infra-failed');
    return typed;
  }
  assert.fail('the call succeeded');
}

describe('Kubernetes client discipline', () => {
  it('keeps connections to the API server open across calls', async () => {
    const kube = apis();
    for (let i = 0; i < 5; i++)
      await kube.core.createNamespacedSecret({
        namespace: NS,
        body: { metadata: { name: `reuse-${i}`, namespace: NS }, data: { a: 'YQ==' } },
      });
    await Promise.all(
      Array.from({ length: 4 }, () => kube.batch.listNamespacedJob({ namespace: NS })),
    );
    assert.equal(fake.requests.length, 9);
    // Sequential calls ride one kept-alive connection (a new one per call before).
    const sequential = new Set(fake.requests.slice(0, 5).map((r) => r.clientPort));
    assert.ok(sequential.size <= 2, `${sequential.size} connections for 5 calls in a row`);
    // Four at once need at most four more.
    const ports = new Set(fake.requests.map((r) => r.clientPort));
    assert.ok(ports.size <= sequential.size + 4, `${ports.size} connections for 9 calls`);
  });

  it('gives up on an API server that hangs: each try times out, tries are bounded', async () => {
    fake.hangNext('GET', 'jobs', 3);
    const started = Date.now();
    const error = await failure(apis().batch.listNamespacedJob({ namespace: NS }), 'list Jobs');
    const elapsed = Date.now() - started;
    assert.equal(count('GET', 'jobs'), 3, 'one try and two retries');
    assert.ok(elapsed >= 900 && elapsed < 8000, `took ${elapsed} ms`);
    assert.equal(error.details?.['refusal'], 'timeout');
    assert.match(error.message, /did not answer in time/);
  });

  it('retries a transient failure and succeeds', async () => {
    fake.failNext('GET', 'jobs', 503, 'ServiceUnavailable');
    fake.hangNext('GET', 'jobs');
    const list = await apis().batch.listNamespacedJob({ namespace: NS });
    assert.deepEqual(list.items, []);
    assert.equal(count('GET', 'jobs'), 3);
  });

  it('does not send a create again after a time-out (it may have been applied)', async () => {
    fake.hangNext('POST', 'secrets');
    const error = await failure(launcherOn().launch(runnerSpec()), 'launch');
    assert.equal(count('POST', 'secrets'), 1);
    assert.equal(count('POST', 'jobs'), 0);
    assert.match(error.message, /did not answer in time/);
  });

  const refusals: Array<[string, number, string, string, string, RegExp]> = [
    [
      'quota',
      403,
      'Forbidden',
      'jobs "svc-v01-runner-x" is forbidden: exceeded quota: compute, requested: limits.memory=4Gi, used: limits.memory=16Gi, limited: limits.memory=16Gi',
      'quota-exceeded',
      /ResourceQuota is exhausted.*exceeded quota: compute/,
    ],
    [
      'admission',
      400,
      'BadRequest',
      'admission webhook "policy.example.dev" denied the request: image registry not allowed',
      'admission-denied',
      /admission policy refused.*denied the request/,
    ],
    [
      'RBAC',
      403,
      'Forbidden',
      'jobs.batch is forbidden: User "system:serviceaccount:svc-v01:svc-run-manager" cannot create resource "jobs"',
      'forbidden',
      /Role does not allow it \(RBAC\)/,
    ],
  ];
  for (const [what, status, reason, message, refusal, text] of refusals) {
    it(`reports a ${what} refusal as infra-failed naming it, without retrying`, async () => {
      fake.failNext('POST', 'jobs', status, reason, message);
      const error = await failure(launcherOn().launch(runnerSpec()), 'launch');
      assert.equal(count('POST', 'jobs'), 1, 'a refusal is an answer, not retried');
      assert.equal(error.details?.['refusal'], refusal);
      assert.equal(error.details?.['httpStatus'], status);
      assert.match(error.message, text);
      // The per-job Secret of the refused Job is removed again.
      assert.deepEqual(fake.list('secrets', NS), []);
    });
  }

  it('fails a launch clearly when the API server is not there at all', async () => {
    const gone = createKubeApis({
      apiUrl: 'http://127.0.0.1:9',
      requestTimeoutMs: 300,
      retries: 1,
    });
    const error = await failure(launcherOn(gone).launch(runnerSpec()), 'launch');
    assert.equal(error.details?.['refusal'], 'unreachable');
    assert.match(error.message, /could not be reached/);
  });
});
