import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ServiceError } from '@svc/contracts';
import type { FakeKube } from '@svc/testkit';
import { KubernetesSecretStore } from '../src/secrets/kubernetes-store.js';
import { LocalSecretStore } from '../src/secrets/local-store.js';
import type { SecretStore } from '../src/secrets/store.js';
import { apisFor, startFakeKube } from './kube-helpers.js';

const NS = 'svc-v01';
let fake: FakeKube;
let dir: string;
before(async () => {
  fake = await startFakeKube();
  dir = await mkdtemp(join(tmpdir(), 'svc-secrets-'));
});
after(async () => {
  await fake.close();
  await rm(dir, { recursive: true, force: true });
});

const kubeStore = () => {
  const apis = apisFor(fake);
  return new KubernetesSecretStore({ core: apis.core });
};

/** The same contract cases run against both implementations. */
const IMPLEMENTATIONS: Array<{ name: string; make: () => SecretStore }> = [
  { name: 'LocalSecretStore', make: () => new LocalSecretStore(join(dir, 'local')) },
  { name: 'KubernetesSecretStore', make: () => kubeStore() },
];

const isKind = (kind: string) => (e: unknown) =>
  e instanceof ServiceError && e.failureKind === kind;
const buf = (text: string) => Buffer.from(text);
const profileData = (key: string) => ({
  'auth.json': buf(JSON.stringify({ OPENAI_API_KEY: key })),
  'config.toml': buf('model = "m"\n'),
});

for (const impl of IMPLEMENTATIONS) {
  describe(`SecretStore contract: ${impl.name}`, () => {
    let store: SecretStore;
    let n = 0;
    // Every case uses its own names, so the cases stay independent on one store.
    const name = (prefix = 'svc-v01-provider-') => `${prefix}c${++n}`;
    before(() => {
      store = impl.make();
    });

    it('round-trips data, labels and annotations', async () => {
      const secretName = name();
      const meta = await store.put(secretName, profileData('sk-one-0123456789'), {
        labels: { 'svc.dev/profile': 'c' },
        annotations: { 'svc.dev/config-hash': 'abc123' },
      });
      assert.equal(meta.name, secretName);
      assert.equal(meta.namespace, NS);
      assert.deepEqual(meta.keys, ['auth.json', 'config.toml']);
      assert.match(meta.resourceVersion, /^\S+$/);
      assert.deepEqual(meta.labels, { 'svc.dev/profile': 'c' });
      assert.deepEqual(meta.annotations, { 'svc.dev/config-hash': 'abc123' });
      assert.equal(typeof meta.updatedAt, 'string');
      const got = await store.get(secretName);
      assert.ok(got);
      assert.equal(
        got.data['auth.json']!.toString(),
        JSON.stringify({ OPENAI_API_KEY: 'sk-one-0123456789' }),
      );
      assert.equal(got.data['config.toml']!.toString(), 'model = "m"\n');
      assert.equal(got.resourceVersion, meta.resourceVersion);
      assert.deepEqual(got.labels, meta.labels);
      assert.equal(await store.get(name()), null);
    });

    it('replaces the whole Secret and moves resourceVersion; labels stay unless given', async () => {
      const secretName = name();
      const first = await store.put(secretName, profileData('sk-a-0123456789'), {
        labels: { 'svc.dev/profile': 'x' },
      });
      const second = await store.put(secretName, { 'config.toml': buf('model = "n"\n') });
      assert.notEqual(second.resourceVersion, first.resourceVersion);
      assert.deepEqual(second.keys, ['config.toml'], 'keys not written are gone');
      assert.deepEqual(second.labels, { 'svc.dev/profile': 'x' });
      const third = await store.put(secretName, { 'config.toml': buf('model = "o"\n') });
      assert.notEqual(third.resourceVersion, second.resourceVersion);
      assert.equal((await store.get(secretName))!.data['config.toml']!.toString(), 'model = "o"\n');
    });

    it('refuses a write whose expected resourceVersion is stale (optimistic concurrency)', async () => {
      const secretName = name();
      await assert.rejects(
        store.put(secretName, profileData('k-0123456789'), { expectedResourceVersion: '12345' }),
        isKind('state-conflict'),
        'expecting a version of a Secret that does not exist',
      );
      const created = await store.put(secretName, profileData('k-0123456789'), {
        expectedResourceVersion: null,
      });
      await assert.rejects(
        store.put(secretName, profileData('k-0123456789'), { expectedResourceVersion: null }),
        isKind('state-conflict'),
        'expecting absence of a Secret that exists',
      );
      const updated = await store.put(secretName, profileData('k2-0123456789'), {
        expectedResourceVersion: created.resourceVersion,
      });
      await assert.rejects(
        store.put(secretName, profileData('k3-0123456789'), {
          expectedResourceVersion: created.resourceVersion,
        }),
        isKind('state-conflict'),
      );
      const now = await store.get(secretName);
      assert.equal(now!.resourceVersion, updated.resourceVersion);
      assert.match(now!.data['auth.json']!.toString(), /k2-/);
    });

    it('lists metadata of controlled Secrets by name prefix, without data', async () => {
      const a = name('svc-v01-provider-list-');
      const b = name('svc-v01-provider-list-');
      const tool = name('svc-v01-tool-list-');
      for (const secretName of [b, a, tool])
        await store.put(secretName, profileData('v-0123456789'));
      const providers = await store.list('svc-v01-provider-list-');
      assert.deepEqual(
        providers.map((m) => m.name),
        [a, b].sort(),
      );
      assert.ok(providers.every((m) => !('data' in m)));
      assert.deepEqual(
        (await store.list('svc-v01-tool-list-')).map((m) => m.name),
        [tool],
      );
      assert.deepEqual(
        (await store.list(a)).map((m) => m.name),
        [a],
      );
      const all = await store.list('');
      assert.ok(all.every((m) => /^svc-v01-(provider|tool)-/.test(m.name)));
    });

    it('reads the metadata of one Secret by name, as the list shows it, without data', async () => {
      const secretName = name('svc-v01-provider-meta-');
      const longer = `${secretName}x`;
      assert.equal(await store.meta(secretName), null, 'absent');
      await store.put(longer, profileData('m-0123456789'));
      assert.equal(await store.meta(secretName), null, 'a longer name is another Secret');
      await store.put(secretName, profileData('m-0123456789'), { labels: { team: 'a' } });
      const meta = await store.meta(secretName);
      assert.deepEqual(
        meta,
        (await store.list(secretName)).find((m) => m.name === secretName),
      );
      assert.deepEqual(meta.keys, ['auth.json', 'config.toml']);
      assert.equal(meta.labels['team'], 'a');
      assert.ok(!('data' in meta));
      assert.doesNotMatch(JSON.stringify(meta), /m-0123456789/);
      await store.delete(secretName);
      assert.equal(await store.meta(secretName), null, 'deleted');
    });

    it('refuses names outside the controlled prefixes, for every operation', async () => {
      const before = fake.requests.length;
      for (const bad of [
        'kube-root-ca.crt',
        'svc-v01-other-x',
        'runtime-default',
        'svc-v01-provider-',
        'svc-v01-provider--x',
        'svc-v01-provider-UPPER',
        'svc-v01-tool-a/b',
        `svc-v01-provider-${'a'.repeat(65)}`,
      ]) {
        await assert.rejects(async () => store.get(bad), isKind('tenant-policy-denied'), bad);
        await assert.rejects(async () => store.meta(bad), isKind('tenant-policy-denied'), bad);
        await assert.rejects(
          async () => store.put(bad, profileData('v')),
          isKind('tenant-policy-denied'),
          bad,
        );
        await assert.rejects(async () => store.delete(bad), isKind('tenant-policy-denied'), bad);
      }
      assert.equal(fake.requests.length, before, 'refused before any API call');
    });

    it('refuses invalid keys', async () => {
      await assert.rejects(
        async () => store.put(name(), { '../escape': buf('x') }),
        isKind('schema-invalid'),
      );
    });

    it('deletes: true when it existed, false after', async () => {
      const secretName = name();
      await store.put(secretName, profileData('d-0123456789'));
      assert.equal(await store.delete(secretName), true);
      assert.equal(await store.get(secretName), null);
      assert.equal(await store.delete(secretName), false);
      assert.ok(!(await store.list('svc-v01-provider-')).some((m) => m.name === secretName));
    });
  });
}

describe('KubernetesSecretStore on the API', () => {
  let store: KubernetesSecretStore;
  before(() => {
    store = kubeStore();
  });
  const secretOf = (name: string) => fake.get('secrets', NS, name) as any;

  it('writes with create or update, labelled managed, never with a last-applied annotation', async () => {
    // Made by hand with `kubectl apply`: its last-applied annotation holds the data.
    const seeded = fake.seed('secrets', NS, {
      metadata: {
        name: 'svc-v01-provider-handmade',
        annotations: {
          'kubectl.kubernetes.io/last-applied-configuration': '{"data":{"auth.json":"c2stb2xk"}}',
          'team.example/owner': 'platform',
        },
      },
      data: { 'auth.json': Buffer.from('sk-old').toString('base64') },
    });
    fake.clearRequests();
    await store.put('svc-v01-provider-handmade', profileData('sk-new-0123456789'));
    const written = secretOf('svc-v01-provider-handmade');
    assert.deepEqual(Object.keys(written.metadata.annotations).sort(), [
      'svc.dev/updated-at',
      'team.example/owner',
    ]);
    assert.equal(written.metadata.labels['svc.dev/managed'], 'true');
    assert.deepEqual(
      fake.requests.map((r) => `${r.method} ${r.path}`),
      [
        `GET /api/v1/namespaces/${NS}/secrets/svc-v01-provider-handmade`,
        `PUT /api/v1/namespaces/${NS}/secrets/svc-v01-provider-handmade`,
      ],
    );
    const put = fake.requests[1]!.body as any;
    assert.equal(
      put.metadata.resourceVersion,
      seeded.metadata.resourceVersion,
      'a conditional update',
    );
    assert.ok(!JSON.stringify(put.metadata).includes('last-applied'));
    await assert.rejects(
      store.put('svc-v01-provider-handmade', profileData('x-0123456789'), {
        annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{}' },
      }),
      isKind('schema-invalid'),
    );
    await assert.rejects(
      store.put(
        'svc-v01-provider-handmade',
        { token: buf('sk-leaky-0123456789') },
        { annotations: { note: 'the key is sk-leaky-0123456789' } },
      ),
      isKind('schema-invalid'),
    );
  });

  it('lists only Secrets labelled managed with controlled names', async () => {
    fake.seed('secrets', NS, {
      metadata: { name: 'svc-v01-provider-unlabelled' },
      data: {},
    });
    fake.seed('secrets', NS, {
      metadata: { name: 'kube-root-ca.crt', labels: { 'svc.dev/managed': 'true' } },
    });
    fake.seed('secrets', NS, {
      metadata: { name: 'svc-v01-other-x', labels: { 'svc.dev/managed': 'true' } },
    });
    fake.clearRequests();
    const names = (await store.list('')).map((m) => m.name);
    assert.ok(!names.includes('svc-v01-provider-unlabelled'));
    assert.ok(!names.includes('kube-root-ca.crt'));
    assert.ok(!names.includes('svc-v01-other-x'));
    assert.equal(fake.requests[0]!.query.labelSelector, 'svc.dev/managed=true');
    // A controlled name is still readable when someone else created it, but it is not one of
    // the manager's own Secrets: its metadata reads as absent, as in the list.
    assert.ok(await store.get('svc-v01-provider-unlabelled'));
    assert.equal(await store.meta('svc-v01-provider-unlabelled'), null);
  });

  it('retries an unconditional write that raced another writer', async () => {
    await store.put('svc-v01-provider-raced', profileData('r1-0123456789'));
    fake.failNext('PUT', 'secrets', 409, 'Conflict');
    const meta = await store.put('svc-v01-provider-raced', profileData('r2-0123456789'));
    assert.match((await store.get('svc-v01-provider-raced'))!.data['auth.json']!.toString(), /r2-/);
    assert.equal(meta.resourceVersion, secretOf('svc-v01-provider-raced').metadata.resourceVersion);
  });

  it('turns API failures into infra-failed without echoing the response', async () => {
    // A server error is retried (three times by default) before it is reported.
    for (let i = 0; i < 4; i += 1) fake.failNext('GET', 'secrets', 500, 'InternalError');
    await assert.rejects(store.get('svc-v01-provider-any'), (e: unknown) => {
      assert.ok(isKind('infra-failed')(e));
      assert.equal(
        (e as Error).message,
        'Kubernetes API: read Secret svc-v01-provider-any failed with HTTP 500 InternalError: ' +
          'the API server failed (injected InternalError)',
      );
      return true;
    });
    const unreachable = new KubernetesSecretStore({
      core: apisFor({ url: 'http://127.0.0.1:9' } as FakeKube).core,
    });
    await assert.rejects(unreachable.list('svc-v01-provider-'), isKind('infra-failed'));
  });
});
