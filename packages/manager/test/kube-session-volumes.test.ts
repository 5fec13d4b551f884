import assert from 'node:assert/strict';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ServiceError } from '@svc/contracts';
import type { FakeKube } from '@svc/testkit';
import { loadConfig } from '../src/config.js';
import { createSessionVolumes } from '../src/sessions/index.js';
import { KubernetesSessionVolumes } from '../src/sessions/kubernetes-volumes.js';
import { LocalSessionVolumes } from '../src/sessions/local-volumes.js';
import type { SessionVolumes } from '../src/sessions/volumes.js';
import { apisFor, validateManifest, startFakeKube } from './kube-helpers.js';

const NS = 'svc-v01';
let fake: FakeKube;
let dir: string;
before(async () => {
  fake = await startFakeKube();
  dir = await mkdtemp(join(tmpdir(), 'svc-volumes-'));
});
after(async () => {
  await fake.close();
  await rm(dir, { recursive: true, force: true });
});

const IMPLEMENTATIONS: Array<{ name: string; make: () => SessionVolumes }> = [
  { name: 'LocalSessionVolumes', make: () => new LocalSessionVolumes(join(dir, 'sessions')) },
  {
    name: 'KubernetesSessionVolumes',
    make: () =>
      new KubernetesSessionVolumes({
        core: apisFor(fake).core,
        namespace: NS,
        storageClass: 'local-path',
      }),
  },
];

const schemaInvalid = (e: unknown) =>
  e instanceof ServiceError && e.failureKind === 'schema-invalid';

for (const impl of IMPLEMENTATIONS) {
  describe(`SessionVolumes contract: ${impl.name}`, () => {
    let volumes: SessionVolumes;
    before(() => {
      volumes = impl.make();
    });

    it('creates one volume per session, idempotently, named after the claim', async () => {
      const created = await volumes.create('ses-one1');
      assert.equal(created.pvcName, 'svc-v01-session-ses-one1');
      assert.equal(created.capacity, '1Gi');
      assert.ok(created.mountPath);
      const again = await volumes.create('ses-one1');
      assert.deepEqual(again, created);
      assert.deepEqual(await volumes.get('ses-one1'), created);
      assert.equal(await volumes.get('ses-none'), null);
    });

    it('deletes: true when it existed, false after, and get answers null', async () => {
      await volumes.create('ses-two2');
      assert.equal(await volumes.delete('ses-two2'), true);
      assert.equal(await volumes.get('ses-two2'), null);
      assert.equal(await volumes.delete('ses-two2'), false);
      // A deleted session's storage can be created afresh (a new claim, no old content).
      assert.ok(await volumes.create('ses-two2'));
    });

    it('refuses session ids that are not safe names', async () => {
      for (const bad of ['../x', 'ABC', 'a/b', '', `s${'a'.repeat(63)}`, '-x'])
        for (const op of [
          () => volumes.create(bad),
          () => volumes.get(bad),
          () => volumes.delete(bad),
        ])
          await assert.rejects(op, schemaInvalid, JSON.stringify(bad));
    });
  });
}

describe('LocalSessionVolumes', () => {
  it('keeps each session in its own 0700 directory, which is its mount path', async () => {
    const volumes = new LocalSessionVolumes(join(dir, 'local-only'));
    const volume = await volumes.create('ses-dir1');
    assert.equal(volume.mountPath, join(dir, 'local-only', 'ses-dir1'));
    assert.equal((await stat(volume.mountPath)).mode & 0o777, 0o700);
    assert.equal(volume.phase, 'Bound');
    await volumes.delete('ses-dir1');
    await assert.rejects(stat(volume.mountPath));
  });
});

describe('KubernetesSessionVolumes', () => {
  it('creates a ReadWriteOnce claim of the configured class and size, labelled for lookup', async () => {
    const volumes = new KubernetesSessionVolumes({
      core: apisFor(fake).core,
      namespace: NS,
      storageClass: 'fast-ssd',
      capacity: '2Gi',
    });
    fake.clearRequests();
    const volume = await volumes.create('ses-pvc1');
    assert.deepEqual(
      fake.requests.map((r) => `${r.method} ${r.path}`),
      [`POST /api/v1/namespaces/${NS}/persistentvolumeclaims`],
    );
    const claim = fake.get('persistentvolumeclaims', NS, 'svc-v01-session-ses-pvc1') as any;
    validateManifest(fake.requests[0]!.body);
    assert.deepEqual(claim.spec.accessModes, ['ReadWriteOnce']);
    assert.equal(claim.spec.storageClassName, 'fast-ssd');
    assert.equal(claim.spec.resources.requests.storage, '2Gi');
    assert.equal(claim.metadata.labels['svc.dev/session-id'], 'ses-pvc1');
    assert.deepEqual(
      { phase: volume.phase, storageClass: volume.storageClass, mountPath: volume.mountPath },
      { phase: 'Pending', storageClass: 'fast-ssd', mountPath: '/home/runner/agent-home/sessions' },
    );
    fake.setStatus('persistentvolumeclaims', NS, 'svc-v01-session-ses-pvc1', {
      phase: 'Bound',
      capacity: { storage: '2Gi' },
    });
    assert.equal((await volumes.get('ses-pvc1'))!.phase, 'Bound');
    fake.clearRequests();
    await volumes.delete('ses-pvc1');
    assert.deepEqual(
      fake.requests.map((r) => `${r.method} ${r.path}`),
      [`DELETE /api/v1/namespaces/${NS}/persistentvolumeclaims/svc-v01-session-ses-pvc1`],
    );
  });

  it('is what the factory gives with the Kubernetes launcher (defaults: 1Gi, local-path)', async () => {
    const config = loadConfig({
      SVC_DATA_DIR: dir,
      SVC_LAUNCHER: 'kubernetes',
      SVC_KUBE_API_URL: fake.url,
      SVC_MANAGER_PUBLIC_URL: 'http://svc-run-manager.svc-v01.svc:8080',
    });
    const volumes = await createSessionVolumes(config);
    assert.equal(volumes.kind, 'kubernetes');
    await volumes.create('ses-factory1');
    const claim = fake.get('persistentvolumeclaims', NS, 'svc-v01-session-ses-factory1') as any;
    assert.equal(claim.spec.storageClassName, 'local-path');
    assert.equal(claim.spec.resources.requests.storage, '1Gi');
    assert.equal((await createSessionVolumes(loadConfig({ SVC_DATA_DIR: dir }))).kind, 'local');
  });

  it('turns API failures into infra-failed', async () => {
    const volumes = new KubernetesSessionVolumes({
      core: apisFor(fake).core,
      namespace: NS,
      storageClass: 'local-path',
    });
    fake.failNext('POST', 'persistentvolumeclaims', 403, 'Forbidden');
    await assert.rejects(
      volumes.create('ses-denied'),
      (e: unknown) => e instanceof ServiceError && e.failureKind === 'infra-failed',
    );
  });
});
