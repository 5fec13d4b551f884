import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { callKey, type FakeKube } from '@svc/testkit';
import { KubernetesLauncher } from '../src/launcher/kubernetes.js';
import { KubernetesSecretStore } from '../src/secrets/kubernetes-store.js';
import { KubernetesSessionVolumes } from '../src/sessions/kubernetes-volumes.js';
import {
  apisFor,
  capturedLogger,
  eventually,
  MANAGER_ROLE,
  runnerSpec,
  sessionPvc,
  startFakeKube,
} from './kube-helpers.js';

const NS = 'svc-v01';

/** Every verb the Role grants, as `group/resource:verb`. */
function granted(): Set<string> {
  const keys = new Set<string>();
  for (const rule of MANAGER_ROLE)
    for (const group of rule.apiGroups)
      for (const resource of rule.resources)
        for (const verb of rule.verbs) keys.add(callKey({ group, resource, verb }));
  return keys;
}

/**
 * The Role in deploy/ against what the code does: every Kubernetes code path of the manager
 * (runner Jobs, their per-job Secrets and the sweep of leftovers, a finished Job's pods,
 * provider and tool Secrets, session claims) runs here against the fake API server, which
 * enforces the Role (as every Kubernetes test's fake does, so a call the Role lacks fails
 * there too). The verbs called must be exactly the verbs granted: no call refused, no grant
 * unused.
 */
describe("the manager's Role grants exactly what its code calls", () => {
  let fake: FakeKube;
  before(async () => {
    fake = await startFakeKube();
  });
  after(() => fake.close());

  it('runner Jobs, Secrets and session claims: every call allowed, every grant used', async () => {
    const log = capturedLogger();
    const apis = apisFor(fake);
    // A per-job Secret whose Job is long gone: the launcher's start sweeps it.
    fake.seed('secrets', NS, {
      metadata: {
        name: 'svc-v01-runner-gone-env',
        labels: {
          'app.kubernetes.io/component': 'runner-env',
          'app.kubernetes.io/managed-by': 'svc-run-manager',
          'svc.dev/job-name': 'svc-v01-runner-gone',
        },
        creationTimestamp: '2020-01-01T00:00:00Z',
      },
    });
    const launcher = new KubernetesLauncher({
      apis,
      namespace: NS,
      killGraceMs: 1000,
      pollIntervalMs: 100,
      logger: log.logger,
    });
    const phases: string[] = [];
    await launcher.start((update) => {
      phases.push(`${update.jobName}:${update.phase}`);
      return Promise.resolve();
    }, []);
    await eventually(() =>
      fake.get('secrets', NS, 'svc-v01-runner-gone-env') === undefined ? true : undefined,
    );

    // A Job that runs to its end (its pods give the exit code), one that is cancelled.
    const done = runnerSpec({ sessionPvc: sessionPvc('ses-rbac') });
    await launcher.launch(done);
    assert.deepEqual(await launcher.transientEnvOf(done.jobName), done.transientEnv);
    fake.setJobState(NS, done.jobName, 'succeeded');
    await eventually(() => (phases.includes(`${done.jobName}:succeeded`) ? true : undefined));
    const cancelled = runnerSpec();
    await launcher.launch(cancelled);
    await launcher.cancel(cancelled.jobName);
    await launcher.close();

    // Provider and tool Secrets: written new, replaced, read, listed, deleted.
    const secrets = new KubernetesSecretStore({ core: apis.core, namespace: NS });
    await secrets.put('svc-v01-provider-rbac', { 'auth.json': Buffer.from('{}') });
    await secrets.put('svc-v01-provider-rbac', { 'auth.json': Buffer.from('{"a":1}') });
    assert.ok(await secrets.get('svc-v01-provider-rbac'));
    assert.equal((await secrets.list('svc-v01-provider-')).length, 1);
    assert.equal(await secrets.delete('svc-v01-provider-rbac'), true);

    // Session claims: created, read, deleted.
    const volumes = new KubernetesSessionVolumes({
      core: apis.core,
      namespace: NS,
      storageClass: 'standard',
    });
    await volumes.create('ses-rbac');
    assert.ok(await volumes.get('ses-rbac'));
    assert.equal(await volumes.delete('ses-rbac'), true);

    const forbidden = log.lines.filter((line) => /forbidden/i.test(line));
    assert.deepEqual(forbidden, [], 'no call was refused');
    assert.deepEqual([...fake.calls].sort(), [...granted()].sort());
  });
});
