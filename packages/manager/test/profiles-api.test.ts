import assert from 'node:assert/strict';
import { writeFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse } from 'smol-toml';
import { sql } from 'kysely';
import { sha256Hex } from '@svc/contracts';
import { startTestManager, type TestManager } from './helpers.js';

const BRIDGE = 'http://bridge.svc-v01.svc.cluster.local:8080/v1';
const BASE = '/api/v1/provider-profiles';
let t: TestManager;

before(async () => {
  t = await startTestManager({
    env: { SVC_BRIDGE_BASE_URL: BRIDGE, SVC_FLASH_MODEL_ID: 'flash-1' },
  });
});
after(async () => {
  await t?.close();
});

const delegatedBy = {
  system: 'lab-backend',
  userId: 'user-4711',
  username: 'ada.lovelace',
  requestId: 'req-0001',
};

function credential(profile: string, body: Record<string, unknown>) {
  return t.api('PUT', `${BASE}/${profile}/credential`, { delegatedBy, ...body });
}

async function secretOf(profile: string) {
  return t.manager.secrets.get(`svc-v01-provider-${profile}`);
}

async function listed(): Promise<string[]> {
  const list = await t.api('GET', BASE);
  assert.equal(list.status, 200, list.raw);
  return list.body.profiles.map((p: any) => p.profile);
}

describe('the profile collection', () => {
  it('always lists the four built-ins, unconfigured with secret-unavailable until written', async () => {
    const list = await t.api('GET', BASE);
    assert.equal(list.status, 200, list.raw);
    const builtins = list.body.profiles.filter((p: any) => p.builtin);
    assert.deepEqual(
      builtins.map((p: any) => p.profile),
      ['builtin-a', 'builtin-b', 'builtin-c', 'builtin-d'],
    );
    const d = builtins.find((p: any) => p.profile === 'builtin-d');
    assert.equal(d.configured, false);
    assert.equal(d.failureKind, 'secret-unavailable');
    assert.equal(d.backendKind, 'codex-app-server');
    assert.deepEqual(d.secretRef, {
      namespace: 'svc-v01',
      name: 'svc-v01-provider-builtin-d',
      keys: ['auth.json', 'config.toml', 'model-catalog.json'],
      valuesPrinted: false,
    });
    assert.equal(d.resourceVersion, null);
    assert.equal(d.lastValidation, null);
  });

  it('answers an unknown dynamic slug with its unconfigured status, without listing it', async () => {
    const one = await t.api('GET', `${BASE}/never-written`);
    assert.equal(one.status, 200, one.raw);
    assert.equal(one.body.configured, false);
    assert.equal(one.body.failureKind, 'secret-unavailable');
    assert.equal(one.body.builtin, false);
    assert.deepEqual(one.body.missingKeys, ['auth.json', 'config.toml']);
    assert.ok(!(await listed()).includes('never-written'));
  });

  it('refuses slugs outside the pattern and the reserved runtime-default on every endpoint', async () => {
    for (const slug of ['Bad_Slug', '-lead', 'runtime-default', 'x'.repeat(65)]) {
      for (const [method, path, body] of [
        ['GET', `${BASE}/${slug}`, undefined],
        ['DELETE', `${BASE}/${slug}`, undefined],
        ['GET', `${BASE}/${slug}/config`, undefined],
        ['PUT', `${BASE}/${slug}/config`, { configToml: 'model = "m"' }],
        ['PUT', `${BASE}/${slug}/credential`, { apiKey: 'sk-abcdefgh', delegatedBy }],
        ['POST', `${BASE}/${slug}/validate`, undefined],
      ] as const) {
        const res = await t.api(method, path, body);
        assert.equal(res.status, 400, `${method} ${path}: ${res.raw}`);
        assert.equal(res.body.failureKind, 'schema-invalid');
      }
    }
    assert.equal(await secretOf('runtime-default').catch(() => null), null);
  });
});

describe('PUT credential', () => {
  it('creates a dynamic profile: auth.json from the key, a custom provider config, a listed configured profile', async () => {
    const apiKey = 'sk-dyn-one-0123456789abcdef';
    const res = await credential('dyn-one', {
      apiKey,
      config: { model: 'gpt-x', baseUrl: 'https://llm.example.com/v1' },
      reason: 'initial setup',
    });
    assert.equal(res.status, 201, res.raw);
    assert.equal(res.body.created, true);
    assert.equal(res.body.configured, true);
    assert.equal(res.body.valuesPrinted, false);
    assert.equal(res.body.secretRef.name, 'svc-v01-provider-dyn-one');
    assert.match(res.body.credentialHashSuffix, /^[0-9a-f]{12}$/);
    assert.ok(!res.raw.includes(apiKey));
    // Salted: the suffix is not a piece of the key's plain SHA-256.
    assert.ok(!sha256Hex(apiKey).includes(res.body.credentialHashSuffix));
    assert.equal(res.body.requiresExternalBridgeUpdate, undefined);

    const secret = await secretOf('dyn-one');
    assert.deepEqual(JSON.parse(secret!.data['auth.json']!.toString()), {
      OPENAI_API_KEY: apiKey,
      auth_mode: 'apikey',
    });
    const config = parse(secret!.data['config.toml']!.toString()) as any;
    assert.equal(config.model, 'gpt-x');
    assert.equal(config.model_provider, 'svc');
    assert.deepEqual(
      { ...config.model_providers.svc },
      {
        name: 'svc',
        base_url: 'https://llm.example.com/v1',
        wire_api: 'responses',
        requires_openai_auth: true,
      },
    );

    assert.ok((await listed()).includes('dyn-one'));
    const status = (await t.api('GET', `${BASE}/dyn-one`)).body;
    assert.equal(status.configured, true);
    assert.equal(status.failureKind, null);
    assert.equal(status.resourceVersion, res.body.resourceVersion);
    assert.equal(status.credentialHashSuffix, res.body.credentialHashSuffix);
    assert.equal(status.configHashSuffix, res.body.configHashSuffix);
  });

  it('keeps the suffix for the same key, changes it for another, and stores a resent key as sent', async () => {
    const apiKey = 'sk-dyn-two-aaaaaaaaaaaaaaaa';
    const body = { apiKey, config: { model: 'm1', baseUrl: 'https://llm.example.com/v1' } };
    const first = await credential('dyn-two', body);
    // The key is now known to the redactor; the same key again must not arrive as [redacted].
    const again = await credential('dyn-two', body);
    assert.equal(again.status, 200, again.raw);
    assert.equal(again.body.created, false);
    assert.equal(again.body.credentialHashSuffix, first.body.credentialHashSuffix);
    assert.notEqual(again.body.resourceVersion, first.body.resourceVersion);
    assert.equal(
      JSON.parse((await secretOf('dyn-two'))!.data['auth.json']!.toString()).OPENAI_API_KEY,
      apiKey,
    );
    const other = await credential('dyn-two', { apiKey: 'sk-dyn-two-bbbbbbbbbbbbbbbb' });
    assert.equal(other.status, 200, other.raw);
    assert.notEqual(other.body.credentialHashSuffix, first.body.credentialHashSuffix);
  });

  it("keeps an existing config's other keys and replaces only model and provider routing", async () => {
    await credential('dyn-keep', {
      apiKey: 'sk-dyn-keep-0000000000000000',
      config: { model: 'm1', baseUrl: 'https://a.example.com/v1' },
    });
    const put = await t.api('PUT', `${BASE}/dyn-keep/config`, {
      configToml: [
        'model = "m1"',
        'model_provider = "corp"',
        'model_reasoning_effort = "high"',
        '[model_providers.corp]',
        'name = "Corp gateway"',
        'base_url = "https://a.example.com/v1"',
        'env_key = "CORP_KEY"',
        'stream_idle_timeout_ms = 1234',
      ].join('\n'),
    });
    assert.equal(put.status, 200, put.raw);
    const res = await credential('dyn-keep', {
      apiKey: 'sk-dyn-keep-1111111111111111',
      config: { model: 'm2', baseUrl: 'https://b.example.com/v1' },
    });
    assert.equal(res.status, 200, res.raw);
    const config = parse((await secretOf('dyn-keep'))!.data['config.toml']!.toString()) as any;
    assert.equal(config.model, 'm2');
    assert.equal(config.model_reasoning_effort, 'high');
    assert.equal(config.model_provider, 'corp');
    assert.deepEqual(
      { ...config.model_providers.corp },
      {
        name: 'Corp gateway',
        base_url: 'https://b.example.com/v1',
        wire_api: 'responses',
        requires_openai_auth: true,
        stream_idle_timeout_ms: 1234,
      },
    );
  });

  it('refuses an invalid baseUrl or a missing model without writing anything', async () => {
    for (const baseUrl of [
      'not a url',
      'ftp://llm.example.com/v1',
      'https://user:hunter2-password@llm.example.com/v1',
      'https://llm.example.com/v1?api_key=abc',
    ]) {
      const res = await credential('dyn-bad-url', {
        apiKey: 'sk-bad-url-000000000000',
        config: { model: 'm', baseUrl },
      });
      assert.equal(res.status, 400, res.raw);
      assert.equal(res.body.failureKind, 'schema-invalid');
      assert.equal(res.body.details.field, 'config.baseUrl');
      assert.ok(!res.raw.includes('hunter2'), 'the refused URL is not echoed');
    }
    const noModel = await credential('dyn-bad-url', {
      apiKey: 'sk-bad-url-000000000000',
      config: { baseUrl: 'https://llm.example.com/v1' },
    });
    assert.equal(noModel.status, 400, noModel.raw);
    assert.equal(noModel.body.details.field, 'config.model');
    assert.equal(await secretOf('dyn-bad-url'), null);
    assert.ok(!(await listed()).includes('dyn-bad-url'));
  });

  it('refuses a SecretRef of another namespace or name (scope violation)', async () => {
    for (const secretRef of [
      { namespace: 'kube-system' },
      { name: 'svc-v01-provider-builtin-a' },
      { namespace: 'svc-v01', name: 'my-own-secret' },
    ]) {
      const res = await credential('dyn-scope', {
        apiKey: 'sk-scope-0000000000000',
        config: { model: 'm', baseUrl: 'https://llm.example.com/v1' },
        secretRef,
      });
      assert.equal(res.status, 403, res.raw);
      assert.equal(res.body.failureKind, 'tenant-policy-denied');
    }
    assert.equal(await secretOf('dyn-scope'), null);
    const config = await t.api('PUT', `${BASE}/dyn-scope/config`, {
      configToml: 'model = "m"',
      secretRef: { namespace: 'default' },
    });
    assert.equal(config.status, 403, config.raw);
  });

  it('answers a failing Secret write with a structured infra-failed', async () => {
    // A file where the Secret's directory must go: the store cannot write it.
    await mkdir(join(t.dataDir, 'secrets'), { recursive: true });
    await writeFile(join(t.dataDir, 'secrets', 'svc-v01-provider-dyn-blocked'), 'in the way');
    const res = await credential('dyn-blocked', {
      apiKey: 'sk-blocked-00000000000000',
      config: { model: 'm', baseUrl: 'https://llm.example.com/v1' },
    });
    assert.equal(res.status, 502, res.raw);
    assert.equal(res.body.failureKind, 'infra-failed');
    assert.equal(res.body.details.reason, 'secret-write-failed');
    assert.equal(res.body.details.secretName, 'svc-v01-provider-dyn-blocked');
  });

  it('answers a stored config that cannot be parsed with a structured failure that quotes nothing', async () => {
    await t.manager.secrets.put('svc-v01-provider-dyn-broken', {
      'auth.json': Buffer.from('{"OPENAI_API_KEY":"sk-old-key-000000000","auth_mode":"apikey"}'),
      'config.toml': Buffer.from('model = "m"\nthis line = is broken SENSITIVE-LINE-TEXT ]]\n'),
    });
    const res = await credential('dyn-broken', { apiKey: 'sk-new-key-0000000000000' });
    assert.equal(res.status, 400, res.raw);
    assert.equal(res.body.failureKind, 'schema-invalid');
    assert.equal(res.body.details.reason, 'config-parse-failed');
    assert.match(res.body.message, /line 2/);
    assert.ok(!res.raw.includes('SENSITIVE-LINE-TEXT'));
    const kept = (await secretOf('dyn-broken'))!.data['auth.json']!.toString();
    assert.match(kept, /sk-old-key/, 'nothing was written');
  });

  it('records delegatedBy as audit data only: ids and names hashed, request id and system kept', async () => {
    const res = await credential('dyn-audit', {
      apiKey: 'sk-audit-0123456789abcdef',
      config: { model: 'm', baseUrl: 'https://llm.example.com/v1' },
      reason: 'rotation for sk-audit-0123456789abcdef',
    });
    assert.equal(res.status, 201, res.raw);
    const refused = await credential('dyn-audit', {
      apiKey: 'sk-audit-0123456789abcdef',
      config: { baseUrl: 'ftp://nope' },
    });
    assert.equal(refused.status, 400);
    const rows = (
      await sql<any>`SELECT * FROM provider_profile_audit WHERE profile = 'dyn-audit' ORDER BY created_at`.execute(
        t.manager.store.db,
      )
    ).rows;
    assert.deepEqual(
      rows.map((r) => [r.action, r.outcome]),
      [
        ['credential-put', 'applied'],
        ['credential-put', 'schema-invalid'],
      ],
    );
    const applied = rows[0];
    assert.equal(applied.delegated_system, 'lab-backend');
    assert.equal(applied.request_id, 'req-0001');
    assert.match(applied.delegated_user_hash, /^[0-9a-f]{24}$/);
    assert.notEqual(applied.delegated_user_hash, applied.delegated_username_hash);
    assert.equal(applied.credential_hash_suffix, res.body.credentialHashSuffix);
    assert.equal(applied.reason, 'rotation for [redacted]');
    const dump = JSON.stringify(rows);
    for (const raw of ['user-4711', 'ada.lovelace', 'sk-audit-0123456789abcdef'])
      assert.ok(!dump.includes(raw), `${raw} is not stored`);
  });
});

describe('config', () => {
  it('GET config is secret-unavailable without a Secret, and returns the stored text with versions after', async () => {
    const missing = await t.api('GET', `${BASE}/dyn-cfg/config`);
    assert.equal(missing.status, 424, missing.raw);
    assert.equal(missing.body.failureKind, 'secret-unavailable');
    const written = await credential('dyn-cfg', {
      apiKey: 'sk-cfg-000000000000000',
      config: { model: 'm', baseUrl: 'https://llm.example.com/v1' },
    });
    const got = await t.api('GET', `${BASE}/dyn-cfg/config`);
    assert.equal(got.status, 200, got.raw);
    assert.equal(got.body.configToml, (await secretOf('dyn-cfg'))!.data['config.toml']!.toString());
    assert.equal(got.body.resourceVersion, written.body.resourceVersion);
    assert.equal(got.body.configHashSuffix, written.body.configHashSuffix);
    assert.equal(got.body.credentialHashSuffix, written.body.credentialHashSuffix);
    assert.equal(got.body.secretRef.name, 'svc-v01-provider-dyn-cfg');
    assert.ok(!got.raw.includes('sk-cfg-000000000000000'));
  });

  it('PUT config replaces only config.toml, keeps auth.json, and honours a pinned resourceVersion', async () => {
    await credential('dyn-put', {
      apiKey: 'sk-put-000000000000000',
      config: { model: 'm', baseUrl: 'https://llm.example.com/v1' },
    });
    const before = (await secretOf('dyn-put'))!;
    const got = (await t.api('GET', `${BASE}/dyn-put/config`)).body;
    const put = await t.api('PUT', `${BASE}/dyn-put/config`, {
      configToml: `# comment\nmodel = "m2"\nmodel_provider = "svc"\n[model_providers.svc]\nbase_url = "https://llm.example.com/v1"\nrequires_openai_auth = true\n`,
      resourceVersion: got.resourceVersion,
    });
    assert.equal(put.status, 200, put.raw);
    assert.equal(put.body.credentialHashSuffix, got.credentialHashSuffix);
    assert.notEqual(put.body.configHashSuffix, got.configHashSuffix);
    const after = (await secretOf('dyn-put'))!;
    assert.deepEqual(after.data['auth.json'], before.data['auth.json']);
    const text = after.data['config.toml']!.toString();
    assert.ok(!text.includes('# comment'), 'stored config is the re-rendered document');
    assert.equal((parse(text) as any).model, 'm2');

    const stale = await t.api('PUT', `${BASE}/dyn-put/config`, {
      configToml: 'model = "m3"',
      resourceVersion: got.resourceVersion,
    });
    assert.equal(stale.status, 409, stale.raw);
    assert.equal(stale.body.failureKind, 'state-conflict');

    const invalid = await t.api('PUT', `${BASE}/dyn-put/config`, { configToml: 'model = ' });
    assert.equal(invalid.status, 400, invalid.raw);
    assert.equal(invalid.body.details.reason, 'config-parse-failed');
    assert.equal(
      (parse((await secretOf('dyn-put'))!.data['config.toml']!.toString()) as any).model,
      'm2',
    );
  });

  it('refuses credentials inside config.toml, which GET config would print', async () => {
    const res = await t.api('PUT', `${BASE}/dyn-inline/config`, {
      configToml: `model = "m"\nmodel_provider = "x"\n[model_providers.x]\nbase_url = "https://llm.example.com/v1"\nexperimental_bearer_token = "tok-INLINE-SECRET-123"\n[model_providers.x.http_headers]\nAuthorization = "Bearer tok-INLINE-SECRET-456"\n`,
    });
    assert.equal(res.status, 400, res.raw);
    assert.ok(!res.raw.includes('INLINE-SECRET'));
    assert.deepEqual(res.body.details.fields, [
      'configToml.model_providers.x.experimental_bearer_token',
      'configToml.model_providers.x.http_headers.Authorization',
    ]);
    // Written by other means, such a config is shown with the values masked.
    await t.manager.secrets.put('svc-v01-provider-dyn-inline', {
      'config.toml': Buffer.from(
        `model = "m"\nmodel_provider = "x"\n[model_providers.x]\nbase_url = "https://llm.example.com/v1"\nexperimental_bearer_token = "tok-INLINE-SECRET-123"\n`,
      ),
    });
    const got = await t.api('GET', `${BASE}/dyn-inline/config`);
    assert.equal(got.status, 200, got.raw);
    assert.ok(!got.raw.includes('INLINE-SECRET'));
    assert.deepEqual(got.body.redactedFields, ['model_providers.x.experimental_bearer_token']);
  });
});
