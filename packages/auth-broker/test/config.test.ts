import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ConfigError } from '@svc/contracts';
import { DEFAULT_CODEHOST_API_URL, loadConfig } from '../src/index.js';
import { assertFailure, REPO, startTestBroker, upstreamLines, type TestBroker } from './helpers.js';

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return [...error.problems];
    throw error;
  }
  return [];
}

describe('broker configuration', () => {
  it('has private, read-only defaults', () => {
    const config = loadConfig({});
    assert.equal(config.host, '127.0.0.1');
    assert.equal(config.port, 8081);
    assert.equal(config.codehost.apiUrl, DEFAULT_CODEHOST_API_URL);
    assert.equal(config.codehost.enabled, false);
    assert.equal(config.codehost.credential, null);
    assert.deepEqual(config.allowedRepos, []);
    assert.deepEqual(config.trustedCidrs, []);
    assert.equal(config.auditLog, null, 'audit lines go to standard output');
    assert.deepEqual(config.features, {});
  });

  it('lists every problem at once', () => {
    const problems = problemsOf({
      AUTH_BROKER_PORT: '70000',
      AUTH_BROKER_CODEHOST_CREDENTIAL_REF: 'vault:codehost',
      AUTH_BROKER_ALLOWED_REPOS: 'acme/widgets, ../etc, a/b/c',
      AUTH_BROKER_TRUSTED_CIDRS: '10.0.0.0/8, 300.1.1.1/8, fd00::/129',
      AUTH_BROKER_CODEHOST_API_URL: 'ftp://example.com',
      AUTH_BROKER_UPSTREAM_RETRIES: '9',
      AUTH_BROKER_AUDIT_LOG: '/nonexistent-dir/audit.jsonl',
    });
    const text = problems.join('\n');
    for (const needle of [
      'AUTH_BROKER_PORT',
      'AUTH_BROKER_CODEHOST_CREDENTIAL_REF must be file:<path> or env:<NAME>',
      '"../etc" is not <owner>/<repo>',
      '"a/b/c" is not <owner>/<repo>',
      '"300.1.1.1/8" is not a CIDR',
      '"fd00::/129" has a prefix outside 0-128',
      'AUTH_BROKER_CODEHOST_API_URL must be an http(s) URL',
      'AUTH_BROKER_UPSTREAM_RETRIES',
      'AUTH_BROKER_AUDIT_LOG /nonexistent-dir/audit.jsonl cannot be opened for append (ENOENT)',
    ])
      assert.ok(text.includes(needle), `missing: ${needle}\n${text}`);
    assert.equal(problems.length, 9);
  });

  it('refuses the runner token variables as the broker credential', () => {
    for (const name of ['CODEHOST_TOKEN', 'CODEHOST_CLI_TOKEN'])
      assert.match(
        problemsOf({ AUTH_BROKER_CODEHOST_CREDENTIAL_REF: `env:${name}` }).join(),
        new RegExp(`must not name the runner token variable ${name}`),
      );
  });

  it('refuses an API URL with credentials without echoing them', () => {
    const problems = problemsOf({
      AUTH_BROKER_CODEHOST_API_URL: 'https://bot:hunter2secret@ghe.example/api/v3',
    });
    assert.match(problems.join(), /must not carry credentials/);
    assert.ok(!problems.join().includes('hunter2secret'));
  });

  it('prints a credential reference as scheme, name and a hash of the reference', () => {
    const file = loadConfig({
      AUTH_BROKER_CODEHOST_CREDENTIAL_REF: 'file:/run/secrets/codehost/token',
    });
    const hash = createHash('sha256')
      .update('file:/run/secrets/codehost/token')
      .digest('hex')
      .slice(0, 12);
    assert.equal(file.codehost.credential!.display, `file:token#${hash}`);
    assert.equal(file.codehost.enabled, true);
    const env = loadConfig({ AUTH_BROKER_CODEHOST_CREDENTIAL_REF: 'env:BROKER_TOKEN' });
    const envHash = createHash('sha256').update('env:BROKER_TOKEN').digest('hex').slice(0, 12);
    assert.equal(env.codehost.credential!.display, `env:BROKER_TOKEN#${envHash}`);
  });

  it('keeps an API base path for enterprise servers', () => {
    assert.equal(
      loadConfig({ AUTH_BROKER_CODEHOST_API_URL: 'https://ghe.example/api/v3/' }).codehost.apiUrl,
      'https://ghe.example/api/v3',
    );
  });

  it('needs a reference when AUTH_BROKER_CODEHOST_CONFIGURED=true', () => {
    assert.match(
      problemsOf({ AUTH_BROKER_CODEHOST_CONFIGURED: 'true' }).join(),
      /needs AUTH_BROKER_CODEHOST_CREDENTIAL_REF/,
    );
  });
});

describe('credential sources at run time', () => {
  let t: TestBroker;
  before(async () => {
    t = await startTestBroker();
  });
  after(() => t.close());

  it('AUTH_BROKER_CODEHOST_CONFIGURED=false switches the code host off, reference still shown', async () => {
    const off = await startTestBroker({
      fake: t.fake,
      token: t.token,
      env: { AUTH_BROKER_CODEHOST_CONFIGURED: 'false' },
    });
    try {
      const health = await off.get('/health');
      assert.equal(health.body.codehost.configured, false);
      assert.match(health.body.codehost.credentialRef, /^file:codehost-token#[0-9a-f]{12}$/);
      t.fake.resetLog();
      assertFailure(
        await off.cli({ repo: REPO, operation: 'codehost.auth.status' }),
        'auth-not-configured',
      );
      assert.deepEqual(upstreamLines(t.fake), []);
    } finally {
      await off.close();
    }
  });

  it('never falls back to the runner token variables', async () => {
    const bare = await startTestBroker({
      fake: t.fake,
      token: t.token,
      env: {
        AUTH_BROKER_CODEHOST_CREDENTIAL_REF: '',
        CODEHOST_TOKEN: t.token,
        CODEHOST_CLI_TOKEN: t.token,
      },
    });
    try {
      t.fake.resetLog();
      assertFailure(
        await bare.cli({ repo: REPO, operation: 'codehost.auth.status' }),
        'auth-not-configured',
      );
      assert.deepEqual(upstreamLines(t.fake), []);
    } finally {
      await bare.close();
    }
  });

  it('reads an env reference and shows readiness without the value', async () => {
    const viaEnv = await startTestBroker({
      fake: t.fake,
      token: t.token,
      env: { AUTH_BROKER_CODEHOST_CREDENTIAL_REF: 'env:BROKER_GH_TOKEN', BROKER_GH_TOKEN: t.token },
    });
    try {
      const health = await viaEnv.get('/health');
      assert.deepEqual(
        {
          configured: health.body.codehost.configured,
          ready: health.body.codehost.ready,
          kind: health.body.codehost.credentialKind,
          valuesPrinted: health.body.codehost.valuesPrinted,
        },
        { configured: true, ready: true, kind: 'static-token', valuesPrinted: false },
      );
      const res = await viaEnv.cli({ repo: REPO, operation: 'codehost.auth.status' });
      assert.equal(res.status, 200, res.raw);
    } finally {
      await viaEnv.close();
    }
  });

  it('picks up a rotated credential file without a restart', async () => {
    const path = join(t.dir, 'codehost-token');
    await writeFile(path, 'ghp_rotatedwrongvalue000');
    assertFailure(
      await t.cli({ repo: REPO, operation: 'codehost.auth.status' }),
      'codehost-permission-denied',
    );
    await writeFile(path, t.token);
    assert.equal((await t.cli({ repo: REPO, operation: 'codehost.auth.status' })).status, 200);
    await writeFile(path, '');
    assertFailure(
      await t.cli({ repo: REPO, operation: 'codehost.auth.status' }),
      'auth-not-configured',
      'credential-unreadable',
    );
    assert.equal((await t.get('/health')).body.codehost.ready, false);
    await writeFile(path, t.token);
  });
});
