import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import { describe, it } from 'node:test';
import { ConfigError } from '@svc/contracts';
import { loadConfig } from '../src/index.js';
import { runBody, startTestManager } from './helpers.js';

describe('authentication', () => {
  it('requires the bearer token on every /api/v1 path when a key is set, and not on health', async () => {
    const t = await startTestManager({ env: { SVC_API_KEY: 'correct-horse-battery-staple' } });
    try {
      const none = await t.api('GET', '/api/v1/backends', undefined, { authorization: '' });
      assert.equal(none.status, 401);
      assert.equal(none.body.failureKind, 'auth-failed');
      const wrong = await t.api('GET', '/api/v1/backends', undefined, {
        authorization: 'Bearer correct-horse-battery-stapleX',
      });
      assert.equal(wrong.status, 401);
      const scheme = await t.api('GET', '/api/v1/backends', undefined, {
        authorization: 'Basic correct-horse-battery-staple',
      });
      assert.equal(scheme.status, 401);
      const right = await t.api('GET', '/api/v1/backends');
      assert.equal(right.status, 200);
      const unknownRoute = await t.api('GET', '/api/v1/not-a-route', undefined, {
        authorization: '',
      });
      assert.equal(
        unknownRoute.status,
        401,
        'auth runs before routing: nothing about the API leaks',
      );
      const write = await t.api('POST', '/api/v1/runs', runBody(), {
        authorization: 'Bearer nope',
      });
      assert.equal(write.status, 401);
      for (const path of ['/health', '/health/live', '/health/readiness']) {
        assert.equal(
          (await t.api('GET', path, undefined, { authorization: '' })).status,
          200,
          path,
        );
      }
    } finally {
      await t.close();
    }
  });

  it('reads the key from SVC_API_KEY_FILE', async () => {
    const file = join(tmpdir(), `svc-key-${process.pid}`);
    await writeFile(file, 'key-from-file-123\n');
    const t = await startTestManager({ env: { SVC_API_KEY_FILE: file } });
    try {
      assert.equal((await t.api('GET', '/api/v1/backends')).status, 401);
      assert.equal(
        (
          await t.api('GET', '/api/v1/backends', undefined, {
            authorization: 'Bearer key-from-file-123',
          })
        ).status,
        200,
      );
    } finally {
      await t.close();
    }
  });

  it('answers auth-missing 503 in a runtime deployment without a key, and is permissive in local mode', async () => {
    const runtime = await startTestManager({ env: { SVC_DEPLOYMENT_MODE: 'runtime' } });
    try {
      const response = await runtime.api('GET', '/api/v1/backends');
      assert.equal(response.status, 503);
      assert.equal(response.body.failureKind, 'auth-missing');
      assert.equal((await runtime.api('GET', '/health/live')).status, 200);
    } finally {
      await runtime.close();
    }
    const local = await startTestManager();
    try {
      assert.equal((await local.api('GET', '/api/v1/backends')).status, 200);
    } finally {
      await local.close();
    }
  });
});

describe('health', () => {
  it('reports store, migrations, build and redaction status and never a secret', async () => {
    const t = await startTestManager({
      env: { SVC_API_KEY: 'health-canary-key-000', SVC_SOURCE_COMMIT: 'abc1234' },
    });
    try {
      const health = await t.api('GET', '/health');
      assert.equal(health.status, 200);
      assert.equal(health.body.ready, true);
      assert.equal(health.body.store.reachable, true);
      assert.equal(health.body.migrations.upToDate, true);
      assert.ok(health.body.migrations.applied >= 1);
      assert.equal(health.body.build.commit, 'abc1234');
      assert.equal(health.body.redaction.valuesPrinted, false);
      assert.equal(health.body.auth.apiKeyConfigured, true);
      const git = health.body.extra.workReady.tools.find((tool: any) => tool.name === 'git');
      assert.deepEqual([git.present, git.required], [true, true]);
      assert.match(git.version, /^\d+\.\d+/);
      assert.equal(health.body.extra.workReady.valuesPrinted, false);
      assert.equal(health.body.extra.launcher, 'local');
      assert.ok(!health.raw.includes('health-canary-key-000'));
      if (t.store.kind === 'postgres')
        assert.ok(!health.raw.includes(t.store.url), 'no connection string');
      const ready = await t.api('GET', '/health/readiness');
      assert.equal(ready.status, 200);
      assert.equal(ready.body.ready, true);
    } finally {
      await t.close();
    }
  });
});

describe('configuration', () => {
  it('lists every problem at once, without echoing secret values', () => {
    assert.throws(
      () =>
        loadConfig({
          PORT: 'eighty',
          DATABASE_URL: 'not a url with secret-pw',
          SVC_DEPLOYMENT_MODE: 'prod',
          SVC_API_KEY: 'a',
          SVC_API_KEY_FILE: '/nonexistent',
          SVC_POLICY_DEFAULT_TIMEOUT_MS: '99999999',
          SVC_POLICY_MAX_TIMEOUT_MS: '1000',
        }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        const text = error.message;
        assert.match(text, /PORT/);
        assert.match(text, /DATABASE_URL is not a valid URL/);
        assert.match(text, /SVC_DEPLOYMENT_MODE/);
        assert.match(text, /SVC_API_KEY_FILE \/nonexistent cannot be read/);
        assert.match(text, /SVC_POLICY_DEFAULT_TIMEOUT_MS/);
        assert.ok(!text.includes('secret-pw'));
        return true;
      },
    );
  });

  it('defaults to 127.0.0.1:8080, the embedded store under ./.data and the two default tenants', () => {
    const config = loadConfig({});
    assert.equal(config.host, '127.0.0.1');
    assert.equal(config.port, 8080);
    assert.equal(config.store.kind, 'pglite');
    assert.match(config.dataDir, /\.data$/);
    assert.deepEqual(config.tenants, ['tenant-a', 'tenant-b']);
    assert.equal(config.deploymentMode, 'local');
  });
});
