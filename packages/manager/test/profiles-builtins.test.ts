import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { parse } from 'smol-toml';
import { runBody, startTestManager, type TestManager } from './helpers.js';

const BRIDGE = 'http://bridge.svc-v01.svc.cluster.local:8080/v1';
const BASE = '/api/v1/provider-profiles';
const delegatedBy = { system: 'lab-backend', requestId: 'req-builtins' };
let t: TestManager;

before(async () => {
  t = await startTestManager({
    env: { SVC_BRIDGE_BASE_URL: BRIDGE, SVC_FLASH_MODEL_ID: 'flash-1' },
  });
});
after(async () => {
  await t?.close();
});

const credential = (profile: string, body: Record<string, unknown>) =>
  t.api('PUT', `${BASE}/${profile}/credential`, { delegatedBy, ...body });
const stored = async (profile: string, key: string) =>
  (await t.manager.secrets.get(`svc-v01-provider-${profile}`))?.data[key]?.toString() ?? null;

describe('builtin-b: the internal bridge only', () => {
  it('routes to the bridge and asks for the external bridge update unless the caller did it', async () => {
    const first = await credential('builtin-b', {
      apiKey: 'sk-builtin-b-000000000000',
      config: { model: 'gpt-b' },
    });
    assert.equal(first.status, 201, first.raw);
    assert.equal(first.body.requiresExternalBridgeUpdate, true);
    const config = parse((await stored('builtin-b', 'config.toml'))!) as any;
    assert.equal(config.model_providers[config.model_provider].base_url, BRIDGE);

    const synced = await credential('builtin-b', {
      apiKey: 'sk-builtin-b-111111111111',
      config: { baseUrl: `${BRIDGE}/` },
      bridgeSyncDone: true,
    });
    assert.equal(synced.status, 200, synced.raw);
    assert.equal(synced.body.requiresExternalBridgeUpdate, false);
    const viaConfig = await t.api('PUT', `${BASE}/builtin-b/config`, {
      configToml: (await t.api('GET', `${BASE}/builtin-b/config`)).body.configToml,
    });
    assert.equal(viaConfig.status, 200, viaConfig.raw);
    assert.equal(viaConfig.body.requiresExternalBridgeUpdate, true);
  });

  it('refuses any other gateway, by credential or by config, and keeps the bridge config', async () => {
    const before = await stored('builtin-b', 'config.toml');
    const other = await credential('builtin-b', {
      apiKey: 'sk-builtin-b-222222222222',
      config: { baseUrl: 'https://api.openai.com/v1' },
    });
    assert.equal(other.status, 400, other.raw);
    assert.equal(other.body.failureKind, 'schema-invalid');
    assert.equal(other.body.details.reason, 'not-the-bridge');
    for (const configToml of [
      `model = "gpt-b"\nmodel_provider = "svc"\n[model_providers.svc]\nbase_url = "https://gateway.example.com/v1"\n`,
      // The agent's built-in provider is another gateway too.
      `model = "gpt-b"\n`,
    ]) {
      const res = await t.api('PUT', `${BASE}/builtin-b/config`, { configToml });
      assert.equal(res.status, 400, res.raw);
      assert.equal(res.body.failureKind, 'schema-invalid');
    }
    assert.equal(await stored('builtin-b', 'config.toml'), before);
  });

  it('never falls back to builtin-a: without its Secret a builtin-b run is secret-unavailable', async () => {
    await credential('builtin-a', {
      apiKey: 'sk-builtin-a-000000000000',
      config: { model: 'gpt-a', baseUrl: 'https://llm.example.com/v1' },
    });
    const deleted = await t.api('DELETE', `${BASE}/builtin-b`);
    assert.equal(deleted.body.removed, true);
    const run = await t.api('POST', '/api/v1/runs', runBody({ backendProfile: 'builtin-b' }));
    assert.equal(run.status, 424, run.raw);
    assert.equal(run.body.failureKind, 'secret-unavailable');
    assert.equal((await t.api('POST', '/api/v1/runs', runBody())).status, 201);
  });

  it('is refused as a whole when this manager has no bridge configured', async () => {
    const bare = await startTestManager({ store: t.store });
    try {
      const res = await bare.api('PUT', `${BASE}/builtin-b/credential`, {
        apiKey: 'sk-builtin-b-333333333333',
        config: { model: 'gpt-b', baseUrl: BRIDGE },
        delegatedBy,
      });
      assert.equal(res.status, 502, res.raw);
      assert.equal(res.body.failureKind, 'infra-failed');
      assert.equal(res.body.details.reason, 'bridge-not-configured');
    } finally {
      await bare.close();
    }
  });
});

describe('builtin-d: fixed model, 1M context window, its model catalog', () => {
  it('writes the fixed model, window, compact limit and catalog path, and a matching catalog', async () => {
    const res = await credential('builtin-d', { apiKey: 'sk-builtin-d-000000000000' });
    assert.equal(res.status, 201, res.raw);
    assert.equal(res.body.configured, true);
    assert.match(res.body.catalogHashSuffix, /^[0-9a-f]{12}$/);
    const config = parse((await stored('builtin-d', 'config.toml'))!) as any;
    assert.equal(config.model, 'flash-1');
    assert.equal(config.model_context_window, 1_000_000);
    assert.equal(config.model_auto_compact_token_limit, 900_000);
    assert.equal(config.model_catalog_json, 'model-catalog.json');
    assert.equal(config.model_providers[config.model_provider].base_url, BRIDGE);
    const catalog = JSON.parse((await stored('builtin-d', 'model-catalog.json'))!);
    const entry = catalog.models.find((m: any) => m.slug === 'flash-1');
    assert.equal(entry.context_window, config.model_context_window);
    for (const field of [
      'display_name',
      'supported_reasoning_levels',
      'shell_type',
      'visibility',
      'supported_in_api',
      'priority',
      'base_instructions',
      'support_verbosity',
      'truncation_policy',
      'experimental_supported_tools',
    ])
      assert.ok(field in entry, `catalog entry has ${field}`);
    const status = (await t.api('GET', `${BASE}/builtin-d`)).body;
    assert.equal(status.configured, true);
  });

  it('refuses another model, another context window and another gateway', async () => {
    const model = await credential('builtin-d', {
      apiKey: 'sk-builtin-d-111111111111',
      config: { model: 'gpt-5' },
    });
    assert.equal(model.status, 400, model.raw);
    assert.equal(model.body.details.field, 'config.model');
    const gateway = await credential('builtin-d', {
      apiKey: 'sk-builtin-d-111111111111',
      config: { baseUrl: 'https://gateway.example.com/v1' },
    });
    assert.equal(gateway.status, 400, gateway.raw);
    const window = await t.api('PUT', `${BASE}/builtin-d/config`, {
      configToml: `model = "flash-1"\nmodel_context_window = 2000000\nmodel_provider = "svc"\n[model_providers.svc]\nbase_url = "${BRIDGE}"\n`,
    });
    assert.equal(window.status, 400, window.raw);
    assert.equal(window.body.details.field, 'configToml.model_context_window');
  });

  it('accepts a wrapper-local bridge on loopback and completes the fixed settings of a config', async () => {
    const res = await t.api('PUT', `${BASE}/builtin-d/config`, {
      configToml: `model = "flash-1"\nmodel_provider = "local"\n[model_providers.local]\nbase_url = "http://127.0.0.1:18080/v1"\nrequires_openai_auth = true\n`,
    });
    assert.equal(res.status, 200, res.raw);
    const config = parse((await stored('builtin-d', 'config.toml'))!) as any;
    assert.equal(config.model_context_window, 1_000_000);
    assert.equal(config.model_auto_compact_token_limit, 900_000);
    assert.equal(config.model_catalog_json, 'model-catalog.json');
    assert.ok(await stored('builtin-d', 'auth.json'), 'auth.json is kept');
  });

  it("keeps an operator's catalog, bringing its context window to the config's value", async () => {
    const secret = (await t.manager.secrets.get('svc-v01-provider-builtin-d'))!;
    const custom = JSON.parse(secret.data['model-catalog.json']!.toString());
    custom.models[0].description = 'tuned by operations';
    custom.models[0].context_window = 128_000;
    await t.manager.secrets.put('svc-v01-provider-builtin-d', {
      ...secret.data,
      'model-catalog.json': Buffer.from(JSON.stringify(custom)),
    });
    const res = await credential('builtin-d', { apiKey: 'sk-builtin-d-222222222222' });
    assert.equal(res.status, 200, res.raw);
    const kept = JSON.parse((await stored('builtin-d', 'model-catalog.json'))!);
    assert.equal(kept.models[0].description, 'tuned by operations');
    assert.equal(kept.models[0].context_window, 1_000_000);
  });
});
