import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FakeKube } from '@svc/testkit';
import { createKubeApis, kubeFailure, type KubeApis } from '../src/launcher/kube-api.js';

/**
 * Every Kubernetes API call the manager makes is bounded when the API server hangs: each try
 * is aborted at the request time limit, tries are bounded, and the failure names a time-out.
 * The table below is checked against the calls in the source, so a new call cannot slip in
 * without being shown bounded here.
 */
const NS = 'svc-v01';
const TIMEOUT_MS = 250;
const RETRIES = 1;
let fake: FakeKube;
let apis: KubeApis;

before(async () => {
  // Every client method against a hung server, those the manager's Role does not need included:
  // no RBAC here (kube-rbac.test.ts holds the Role to the calls).
  fake = await FakeKube.start();
  apis = createKubeApis({ apiUrl: fake.url, requestTimeoutMs: TIMEOUT_MS, retries: RETRIES });
});
after(() => fake.close());

const secret = { metadata: { name: 'svc-v01-hang' }, data: {} };
const pvc = {
  metadata: { name: 'svc-v01-session-hang' },
  spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
};
const job = {
  metadata: { name: 'svc-v01-runner-hang' },
  spec: {
    template: {
      spec: { restartPolicy: 'Never', containers: [{ name: 'runner', image: 'runner:1' }] },
    },
  },
};
const named = { name: 'svc-v01-hang', namespace: NS };

type Call = [api: 'core' | 'batch', method: string, resource: string, http: string, args: object];
const CALLS: Call[] = [
  ['core', 'createNamespacedSecret', 'secrets', 'POST', { namespace: NS, body: secret }],
  ['core', 'readNamespacedSecret', 'secrets', 'GET', named],
  ['core', 'listNamespacedSecret', 'secrets', 'GET', { namespace: NS }],
  ['core', 'replaceNamespacedSecret', 'secrets', 'PUT', { ...named, body: secret }],
  [
    'core',
    'patchNamespacedSecret',
    'secrets',
    'PATCH',
    { ...named, body: [{ op: 'add', path: '/metadata/labels', value: {} }] },
  ],
  ['core', 'deleteNamespacedSecret', 'secrets', 'DELETE', named],
  ['core', 'listNamespacedPod', 'pods', 'GET', { namespace: NS }],
  [
    'core',
    'createNamespacedPersistentVolumeClaim',
    'persistentvolumeclaims',
    'POST',
    { namespace: NS, body: pvc },
  ],
  ['core', 'readNamespacedPersistentVolumeClaim', 'persistentvolumeclaims', 'GET', named],
  ['core', 'deleteNamespacedPersistentVolumeClaim', 'persistentvolumeclaims', 'DELETE', named],
  ['batch', 'createNamespacedJob', 'jobs', 'POST', { namespace: NS, body: job }],
  ['batch', 'readNamespacedJob', 'jobs', 'GET', named],
  ['batch', 'listNamespacedJob', 'jobs', 'GET', { namespace: NS }],
  ['batch', 'deleteNamespacedJob', 'jobs', 'DELETE', named],
];

async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => join(e.parentPath, e.name));
}

describe('Kubernetes API calls against a server that hangs', () => {
  it('covers every API method the manager calls', async () => {
    const called = new Set<string>();
    for (const file of await sourceFiles(join(import.meta.dirname, '../src'))) {
      const text = await readFile(file, 'utf8');
      for (const m of text.matchAll(
        /\.((?:create|read|list|replace|patch|delete)Namespaced[A-Za-z]+)\(/g,
      ))
        called.add(m[1]!);
    }
    assert.ok(called.size >= 10, `found only ${[...called].join(', ')}`);
    const tested = new Set(CALLS.map((c) => c[1]));
    const untested = [...called].filter((m) => !tested.has(m));
    assert.deepEqual(untested, [], 'API methods called by the manager but not shown bounded');
  });

  for (const [api, method, resource, http, args] of CALLS) {
    const creates = method.startsWith('create');
    // A create that timed out may have been applied, so it is never sent again.
    const tries = creates ? 1 : RETRIES + 1;
    it(`${method}: ${tries} ${tries === 1 ? 'try' : 'tries'}, each aborted at the time limit`, async () => {
      fake.hangNext(http, resource, tries);
      fake.clearRequests();
      const client = apis[api] as unknown as Record<string, (a: object) => Promise<unknown>>;
      const started = Date.now();
      const outcome = await client[method]!(args).then(
        () => null,
        (error: unknown) => error,
      );
      const elapsed = Date.now() - started;
      assert.ok(outcome, `${method} succeeded against a hung server`);
      const typed = kubeFailure(outcome, method);
      assert.equal(typed.failureKind, 'infra-failed');
      assert.equal(typed.details?.['refusal'], 'timeout', typed.message);
      assert.match(typed.message, /did not answer in time/);
      const sent = fake.requests.filter((r) => r.method === http).length;
      assert.equal(sent, tries, `${method} sent ${sent} requests`);
      // Each try waits out its time limit; backoff between tries is at most a few hundred ms.
      assert.ok(elapsed >= tries * TIMEOUT_MS - 50, `gave up after ${elapsed} ms`);
      assert.ok(elapsed < tries * TIMEOUT_MS + 3000, `took ${elapsed} ms`);
    });
  }
});
