import assert from 'node:assert/strict';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FakeKube } from '@svc/testkit';
import { runBody, startTestManager, type TestManager } from './helpers.js';
import { startFakeKube } from './kube-helpers.js';

/**
 * Profile behaviour that depends on the Secret store, run against both implementations of
 * the SecretStore interface: the local directory store and Kubernetes Secrets (through the
 * loopback fake API server). What each backend actually holds is read from the backend itself
 * (files on disk, objects in the API server), not through the manager.
 */

const BASE = '/api/v1/provider-profiles';
const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';
const delegatedBy = { system: 'lab-backend', requestId: 'req-contract' };

interface Backend {
  name: string;
  start(): Promise<TestManager>;
  /** The Secret as the backend holds it. */
  raw(t: TestManager, name: string): Promise<RawSecret | null>;
  /** Create a Secret behind the manager's back (an operator, kubectl apply). */
  plant(
    t: TestManager,
    name: string,
    data: Record<string, string>,
    annotations: Record<string, string>,
  ): Promise<void>;
  /** Make the next write of this Secret fail inside the backend. */
  breakWrite(t: TestManager, name: string): Promise<void>;
  stop(): Promise<void>;
}

interface RawSecret {
  data: Record<string, string>;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** Everything stored besides the values (metadata file, object metadata). */
  metadataText: string;
}

let fake: FakeKube | undefined;

const backends: Backend[] = [
  {
    name: 'local directory store',
    start: () => startTestManager(),
    async raw(t, name) {
      const dir = join(t.dataDir, 'secrets', name, 'current');
      let metadataText: string;
      try {
        metadataText = await readFile(join(dir, '..meta.json'), 'utf8');
      } catch {
        return null;
      }
      const meta = JSON.parse(metadataText);
      const data: Record<string, string> = {};
      for (const key of meta.keys) data[key] = await readFile(join(dir, key), 'utf8');
      return { data, labels: meta.labels, annotations: meta.annotations, metadataText };
    },
    async plant(t, name, data, annotations) {
      await t.manager.secrets.put(
        name,
        Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v)])),
        { annotations },
      );
    },
    async breakWrite(t, name) {
      await mkdir(join(t.dataDir, 'secrets'), { recursive: true });
      await writeFile(join(t.dataDir, 'secrets', name), 'in the way');
    },
    stop: () => Promise.resolve(),
  },
  {
    name: 'Kubernetes Secrets',
    async start() {
      fake = await startFakeKube();
      return startTestManager({
        env: { SVC_SECRET_STORE: 'kubernetes', SVC_KUBE_API_URL: fake.url },
      });
    },
    raw(_t, name) {
      const obj = fake!.get('secrets', 'svc-v01', name) as any;
      if (!obj) return Promise.resolve(null);
      const data: Record<string, string> = {};
      for (const [k, v] of Object.entries(obj.data ?? {}))
        data[k] = Buffer.from(v as string, 'base64').toString('utf8');
      return Promise.resolve({
        data,
        labels: obj.metadata.labels ?? {},
        annotations: obj.metadata.annotations ?? {},
        metadataText: JSON.stringify(obj.metadata),
      });
    },
    plant(_t, name, data, annotations) {
      fake!.seed('secrets', 'svc-v01', {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name, labels: { 'svc.dev/managed': 'true' }, annotations },
        data: Object.fromEntries(
          Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')]),
        ),
      });
      return Promise.resolve();
    },
    breakWrite() {
      // More failures than the client's bounded retries (SVC_KUBE_RETRIES, 3 by default).
      for (let i = 0; i < 5; i += 1) {
        fake!.failNext('POST', 'secrets', 500, 'InternalError');
        fake!.failNext('PUT', 'secrets', 500, 'InternalError');
      }
      return Promise.resolve();
    },
    async stop() {
      await fake?.close();
    },
  },
];

for (const backend of backends) {
  describe(`provider profiles on the ${backend.name}`, () => {
    let t: TestManager;
    before(async () => {
      t = await backend.start();
    });
    after(async () => {
      await t?.close();
      await backend.stop();
    });
    const credential = (profile: string, apiKey: string, extra: Record<string, unknown> = {}) =>
      t.api('PUT', `${BASE}/${profile}/credential`, {
        apiKey,
        config: { model: 'm', baseUrl: 'https://llm.example.com/v1' },
        delegatedBy,
        ...extra,
      });
    const listed = async () =>
      (await t.api('GET', BASE)).body.profiles.map((p: any) => p.profile) as string[];

    it('writes exactly auth.json and config.toml, labelled and annotated without values', async () => {
      const apiKey = 'sk-contract-create-00000000';
      const res = await credential('ct-create', apiKey);
      assert.equal(res.status, 201, res.raw);
      const raw = (await backend.raw(t, 'svc-v01-provider-ct-create'))!;
      assert.deepEqual(Object.keys(raw.data).sort(), ['auth.json', 'config.toml']);
      assert.equal(JSON.parse(raw.data['auth.json']!).OPENAI_API_KEY, apiKey);
      assert.equal(raw.annotations['svc.v01/provider-profile'], 'ct-create');
      assert.ok(!raw.metadataText.includes(apiKey), 'no value in labels, annotations or metadata');
      assert.ok(!raw.metadataText.includes(Buffer.from(apiKey).toString('base64')));
      assert.ok((await listed()).includes('ct-create'));
      const status = (await t.api('GET', `${BASE}/ct-create`)).body;
      assert.equal(status.configured, true);
      assert.equal(status.resourceVersion, res.body.resourceVersion);
    });

    it('replaces only config.toml on PUT config and refuses a stale resourceVersion', async () => {
      await credential('ct-config', 'sk-contract-config-0000000');
      const before = (await backend.raw(t, 'svc-v01-provider-ct-config'))!;
      const got = (await t.api('GET', `${BASE}/ct-config/config`)).body;
      const put = await t.api('PUT', `${BASE}/ct-config/config`, {
        configToml: got.configToml.replace('model = "m"', 'model = "m2"'),
        resourceVersion: got.resourceVersion,
      });
      assert.equal(put.status, 200, put.raw);
      assert.notEqual(put.body.resourceVersion, got.resourceVersion);
      const after = (await backend.raw(t, 'svc-v01-provider-ct-config'))!;
      assert.equal(after.data['auth.json'], before.data['auth.json']);
      assert.match(after.data['config.toml']!, /model = "m2"/);
      const stale = await t.api('PUT', `${BASE}/ct-config/config`, {
        configToml: 'model = "m3"',
        resourceVersion: got.resourceVersion,
      });
      assert.equal(stale.status, 409, stale.raw);
    });

    it('keeps a deleted built-in listed as unconfigured and drops a deleted dynamic profile', async () => {
      await credential('builtin-c', 'sk-contract-builtin-c-0000');
      await credential('ct-gone', 'sk-contract-gone-000000000');
      assert.equal(
        (await t.api('POST', '/api/v1/runs', runBody({ backendProfile: 'ct-gone' }))).status,
        201,
      );
      for (const profile of ['builtin-c', 'ct-gone']) {
        const res = await t.api('DELETE', `${BASE}/${profile}`);
        assert.equal(res.status, 200, res.raw);
        assert.deepEqual([res.body.removed, res.body.alreadyAbsent], [true, false]);
        assert.equal(await backend.raw(t, `svc-v01-provider-${profile}`), null);
        const again = await t.api('DELETE', `${BASE}/${profile}`);
        assert.deepEqual([again.body.removed, again.body.alreadyAbsent], [false, true]);
      }
      const list = (await t.api('GET', BASE)).body.profiles;
      const c = list.find((p: any) => p.profile === 'builtin-c');
      assert.deepEqual([c.configured, c.failureKind], [false, 'secret-unavailable']);
      assert.ok(!list.some((p: any) => p.profile === 'ct-gone'));
      const run = await t.api('POST', '/api/v1/runs', runBody({ backendProfile: 'ct-gone' }));
      assert.equal(run.status, 424, run.raw);
      assert.equal(run.body.failureKind, 'secret-unavailable');
    });

    it('drops a last-applied annotation holding Secret data on the next write', async () => {
      const old = '{"OPENAI_API_KEY":"sk-applied-by-kubectl-000","auth_mode":"apikey"}';
      await backend.plant(
        t,
        'svc-v01-provider-ct-applied',
        { 'auth.json': old, 'config.toml': 'model = "m"\n' },
        {
          [LAST_APPLIED]: JSON.stringify({
            data: { 'auth.json': Buffer.from(old).toString('base64') },
          }),
          'team.example.com/owner': 'platform',
        },
      );
      assert.ok((await listed()).includes('ct-applied'), 'discovered by its controlled name');
      const res = await credential('ct-applied', 'sk-contract-applied-new-000');
      assert.equal(res.status, 200, res.raw);
      const raw = (await backend.raw(t, 'svc-v01-provider-ct-applied'))!;
      assert.equal(raw.annotations[LAST_APPLIED], undefined);
      assert.equal(raw.annotations['team.example.com/owner'], 'platform');
      assert.ok(!raw.metadataText.includes('sk-applied-by-kubectl'));
    });

    it('answers a failing backend write with infra-failed and leaves nothing behind', async () => {
      await backend.breakWrite(t, 'svc-v01-provider-ct-broken');
      const res = await credential('ct-broken', 'sk-contract-broken-0000000');
      assert.equal(res.status, 502, res.raw);
      assert.equal(res.body.failureKind, 'infra-failed');
      assert.equal(res.body.details.reason, 'secret-write-failed');
      assert.equal(await backend.raw(t, 'svc-v01-provider-ct-broken'), null);
      assert.equal((await t.api('GET', `${BASE}/ct-broken`)).body.configured, false);
    });
  });
}
