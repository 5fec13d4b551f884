import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runBody, startTestManager, type TestManager } from './helpers.js';

let t: TestManager;
before(async () => {
  t = await startTestManager();
  await t.configureProfile('builtin-a');
  await t.configureProfile('team-x');
});
after(() => t.close());

const expectFailure = async (
  body: Record<string, unknown>,
  status: number,
  kind: string,
  fragment?: RegExp,
) => {
  const response = await t.api('POST', '/api/v1/runs', body);
  assert.equal(response.status, status, response.raw);
  assert.equal(response.body.failureKind, kind, response.raw);
  assert.equal(typeof response.body.traceId, 'string');
  if (fragment) assert.match(response.body.message, fragment);
  return response;
};

describe('POST /api/v1/runs', () => {
  it('persists a pending run with the execution policy completed by explicit defaults', async () => {
    const created = await t.api(
      'POST',
      '/api/v1/runs',
      runBody({ metadata: { labProjectId: 'lab-7', labWorkspaceId: 'ws-2' } }),
    );
    assert.equal(created.status, 201, created.raw);
    const run = created.body;
    assert.match(run.runId, /^run-/);
    assert.equal(run.state, 'pending');
    assert.equal(run.backendProfile, 'builtin-a');
    assert.deepEqual(
      {
        sandbox: run.executionPolicy.sandbox,
        approval: run.executionPolicy.approval,
        network: run.executionPolicy.network,
        timeoutMs: run.executionPolicy.timeoutMs,
      },
      { sandbox: 'workspace-write', approval: 'never', network: 'disabled', timeoutMs: 600000 },
    );
    assert.equal(run.executionPolicy.timeoutKind, 'idle');
    assert.ok(run.executionPolicy.defaultsApplied.includes('sandbox'));
    assert.deepEqual(run.executionPolicy.secretScope.providerCredentials, [
      {
        profile: 'builtin-a',
        secretRef: {
          namespace: 'svc-v01',
          name: 'svc-v01-provider-builtin-a',
          keys: ['auth.json', 'config.toml'],
          valuesPrinted: false,
        },
      },
    ]);
    assert.deepEqual(run.metadata, { labProjectId: 'lab-7', labWorkspaceId: 'ws-2' });

    const fetched = await t.api('GET', `/api/v1/runs/${run.runId}`);
    assert.equal(fetched.status, 200);
    assert.deepEqual(fetched.body.executionPolicy, run.executionPolicy);
    assert.equal(fetched.body.lastSeq, 0);
  });

  it('keeps explicit policy values within the ceiling and names only the defaulted ones', async () => {
    const created = await t.api(
      'POST',
      '/api/v1/runs',
      runBody({ executionPolicy: { sandbox: 'read-only', timeoutMs: 5000 } }),
    );
    assert.equal(created.status, 201, created.raw);
    assert.equal(created.body.executionPolicy.sandbox, 'read-only');
    assert.equal(created.body.executionPolicy.timeoutMs, 5000);
    assert.ok(!created.body.executionPolicy.defaultsApplied.includes('sandbox'));
    assert.ok(created.body.executionPolicy.defaultsApplied.includes('network'));
  });

  it('maps the business alias providerProfile to backendProfile', async () => {
    const body = runBody({ providerProfile: 'team-x' });
    delete body.backendProfile;
    const created = await t.api('POST', '/api/v1/runs', body);
    assert.equal(created.status, 201, created.raw);
    assert.equal(created.body.backendProfile, 'team-x');
    await expectFailure(
      runBody({ providerProfile: 'builtin-b' }),
      400,
      'schema-invalid',
      /disagree/,
    );
  });

  it('refuses tenants outside the allowlist and projectId overrides', async () => {
    await expectFailure(
      runBody({ tenantId: 'tenant-z' }),
      403,
      'tenant-policy-denied',
      /allowlist/,
    );
    await expectFailure(
      runBody({ metadata: { projectId: 'other' } }),
      403,
      'tenant-policy-denied',
      /override/,
    );
    await expectFailure(
      runBody({ metadata: { project_id: 'other' } }),
      403,
      'tenant-policy-denied',
    );
    await expectFailure(
      runBody({ metadata: { tenantId: 'tenant-b' } }),
      403,
      'tenant-policy-denied',
    );
    const same = await t.api(
      'POST',
      '/api/v1/runs',
      runBody({ metadata: { projectId: 'proj-1' } }),
    );
    assert.equal(same.status, 201, 'restating the same projectId is not an override');
  });

  it('checks the profile slug, reserved names and configuration without falling back', async () => {
    await expectFailure(
      runBody({ backendProfile: 'Bad_Slug' }),
      400,
      'schema-invalid',
      /backendProfile/,
    );
    await expectFailure(runBody({ backendProfile: '-leading' }), 400, 'schema-invalid');
    await expectFailure(
      runBody({ backendProfile: 'runtime-default' }),
      400,
      'schema-invalid',
      /reserved/,
    );
    await expectFailure(runBody({ backendProfile: 'x'.repeat(65) }), 400, 'schema-invalid');
    const missing = await expectFailure(
      runBody({ backendProfile: 'builtin-b' }),
      424,
      'secret-unavailable',
      /svc-v01-provider-builtin-b/,
    );
    assert.deepEqual(missing.body.details.missingKeys, ['auth.json', 'config.toml']);
    await expectFailure(
      runBody({ backendProfile: 'nobody-configured-this' }),
      424,
      'secret-unavailable',
    );
  });

  it('never widens the execution policy', async () => {
    await expectFailure(
      runBody({ executionPolicy: { timeoutMs: 10 * 3_600_000 } }),
      403,
      'tenant-policy-denied',
      /timeoutMs/,
    );
    await expectFailure(runBody({ executionPolicy: { sandbox: 'root' } }), 400, 'schema-invalid');
    await expectFailure(
      runBody({ executionPolicy: { sandbox: 'danger-full-access', network: 'disabled' } }),
      400,
      'schema-invalid',
    );
    await expectFailure(
      runBody({ executionPolicy: { unknownKnob: true } }),
      400,
      'schema-invalid',
      /unknownKnob/,
    );
    const narrow = await startTestManager({
      env: { SVC_POLICY_MAX_SANDBOX: 'workspace-write', SVC_POLICY_MAX_NETWORK: 'disabled' },
    });
    try {
      await narrow.configureProfile('builtin-a');
      const wide = await narrow.api(
        'POST',
        '/api/v1/runs',
        runBody({ executionPolicy: { sandbox: 'danger-full-access', network: 'enabled' } }),
      );
      assert.equal(wide.status, 403);
      assert.equal(wide.body.failureKind, 'tenant-policy-denied');
      assert.match(wide.body.message, /sandbox danger-full-access > workspace-write/);
      assert.match(wide.body.message, /network enabled > disabled/);
    } finally {
      await narrow.close();
    }
  });

  it('requires secretScope.providerCredentials to name exactly the run profile Secret', async () => {
    const scope = (providerCredentials: unknown[], toolCredentials?: unknown[]) =>
      runBody({
        executionPolicy: {
          secretScope: { providerCredentials, ...(toolCredentials ? { toolCredentials } : {}) },
        },
      });
    await expectFailure(
      scope([{ profile: 'builtin-b' }]),
      403,
      'tenant-policy-denied',
      /only name the run's profile/,
    );
    await expectFailure(scope([]), 400, 'schema-invalid', /exactly one/);
    await expectFailure(
      scope([{ profile: 'builtin-a', secretRef: { name: 'some-other-secret' } }]),
      403,
      'tenant-policy-denied',
    );
    await expectFailure(
      scope([
        {
          profile: 'builtin-a',
          secretRef: { name: 'svc-v01-provider-builtin-a', namespace: 'kube-system' },
        },
      ]),
      403,
      'tenant-policy-denied',
      /namespace/,
    );
    const ok = await t.api(
      'POST',
      '/api/v1/runs',
      scope([
        {
          profile: 'builtin-a',
          secretRef: {
            name: 'svc-v01-provider-builtin-a',
            namespace: 'svc-v01',
            keys: ['auth.json', 'config.toml'],
          },
        },
      ]),
    );
    assert.equal(ok.status, 201, ok.raw);
  });

  it('validates tool credentials: references only, allowed tools, platform-ssh shape, volume under the runner home', async () => {
    const tools = (toolCredentials: unknown[]) =>
      runBody({ executionPolicy: { secretScope: { toolCredentials } } });
    const good = {
      tool: 'codehost',
      purpose: 'pull-request',
      secretRef: { name: 'svc-v01-tool-codehost', keys: ['token'] },
      projection: { kind: 'env', envName: 'CODEHOST_TOKEN' },
    };
    const ok = await t.api('POST', '/api/v1/runs', tools([good]));
    assert.equal(ok.status, 201, ok.raw);
    assert.deepEqual(ok.body.executionPolicy.secretScope.toolCredentials[0].secretRef, {
      namespace: 'svc-v01',
      name: 'svc-v01-tool-codehost',
      keys: ['token'],
      valuesPrinted: false,
    });
    await expectFailure(
      tools([{ ...good, tool: 'deploy' }]),
      403,
      'tenant-policy-denied',
      /not allowed/,
    );
    await expectFailure(
      tools([{ ...good, secretRef: { name: 'random-secret', keys: ['token'] } }]),
      403,
      'tenant-policy-denied',
    );
    await expectFailure(
      tools([
        { ...good, secretRef: { name: 'svc-v01-tool-codehost', keys: ['token'], value: 'x' } },
      ]),
      400,
      'schema-invalid',
    );
    await expectFailure(
      tools([
        {
          tool: 'platform-ssh',
          purpose: 'ssh-passthrough',
          secretRef: { name: 'svc-v01-tool-ssh', keys: ['id_ed25519'] },
          projection: { kind: 'env', envName: 'PLATFORM_SSH_CLIENT_TOKEN' },
        },
      ]),
      400,
      'schema-invalid',
      /PLATFORM_SSH_CLIENT_TOKEN/,
    );
    await expectFailure(
      tools([{ ...good, projection: { kind: 'volume', mountPath: '/etc/ssh' } }]),
      400,
      'schema-invalid',
      /home\/runner/,
    );
    await expectFailure(
      tools([{ ...good, projection: { kind: 'volume', mountPath: '/home/runner/../root/.ssh' } }]),
      400,
      'schema-invalid',
    );
    const volume = await t.api(
      'POST',
      '/api/v1/runs',
      tools([{ ...good, projection: { kind: 'volume', mountPath: '/home/runner/.ssh' } }]),
    );
    assert.equal(volume.status, 201, volume.raw);
  });

  it('requires the traceSink key (null or an explicit sink)', async () => {
    const body = runBody();
    delete body.traceSink;
    await expectFailure(body, 400, 'schema-invalid', /traceSink/);
    const explicit = await t.api(
      'POST',
      '/api/v1/runs',
      runBody({ traceSink: { kind: 'run-events' } }),
    );
    assert.equal(explicit.status, 201);
    await expectFailure(
      runBody({ traceSink: { kind: 'webhook', url: 'http://x' } }),
      400,
      'schema-invalid',
    );
  });

  it('checks the resource bundle shape and rejects gitMirror and legacy fields', async () => {
    const bundle = (extra: Record<string, unknown>) =>
      runBody({
        resourceBundleRef: {
          kind: 'gitbundle',
          repoUrl: 'https://git.example/org/repo.git',
          ...extra,
        },
      });
    const ok = await t.api(
      'POST',
      '/api/v1/runs',
      bundle({
        ref: 'main',
        bundles: [
          { subpath: 'tools', target_path: 'tools' },
          { name: 'skills', subpath: 'skills', target_path: '.agents/skills' },
        ],
        promptRefs: [
          { name: 'entry', path: 'prompts/entry.md', inject: 'thread-start', required: true },
        ],
        requiredSkills: [{ name: 'review' }],
        credentialRef: { name: 'svc-v01-tool-git', keys: ['token'] },
      }),
    );
    assert.equal(ok.status, 201, ok.raw);
    await expectFailure(
      bundle({ gitMirror: 'https://mirror.internal' }),
      400,
      'schema-invalid',
      /gitMirror/,
    );
    for (const legacy of ['toolAliases', 'skillRefs', 'workspaceFiles', 'subdir', 'sparsePaths']) {
      await expectFailure(bundle({ [legacy]: ['x'] }), 400, 'schema-invalid', new RegExp(legacy));
    }
    await expectFailure(bundle({ kind: 'tarball' }), 400, 'schema-invalid');
    await expectFailure(
      bundle({ bundles: [{ subpath: '../etc', target_path: 'x' }] }),
      400,
      'schema-invalid',
      /\.\./,
    );
    await expectFailure(
      bundle({ bundles: [{ subpath: 'a', target_path: '/app' }] }),
      400,
      'schema-invalid',
    );
    await expectFailure(
      bundle({
        promptRefs: [{ name: 'p', path: '/etc/passwd', inject: 'thread-start', required: true }],
      }),
      400,
      'schema-invalid',
    );
    await expectFailure(
      bundle({ promptRefs: [{ name: 'p', path: 'p.md', inject: 'every-turn', required: true }] }),
      400,
      'schema-invalid',
    );
    await expectFailure(bundle({ commitId: 'abc' }), 400, 'schema-invalid');
    await expectFailure(
      runBody({
        resourceBundleRef: { kind: 'gitbundle', repoUrl: 'https://user:pw@git.example/r.git' },
      }),
      400,
      'schema-invalid',
      /credentials/,
    );
  });

  it('answers unknown runs with a structured 404 that carries the caller trace id', async () => {
    const missing = await t.api('GET', '/api/v1/runs/run-00000000000000000000', undefined, {
      'x-request-id': 'trace-abc-123',
    });
    assert.equal(missing.status, 404);
    assert.deepEqual(Object.keys(missing.body).sort(), ['failureKind', 'message', 'traceId']);
    assert.equal(missing.body.traceId, 'trace-abc-123');
    assert.equal(missing.headers['x-request-id'], 'trace-abc-123');
    const route = await t.api('GET', '/api/v1/nothing-here');
    assert.equal(route.status, 404);
    assert.equal(route.body.failureKind, 'not-found');
  });
});

describe('GET /api/v1/backends', () => {
  it('lists the stdio agent backend with every built-in profile and its configuration state', async () => {
    const response = await t.api('GET', '/api/v1/backends');
    assert.equal(response.status, 200);
    const [backend] = response.body.backends;
    assert.equal(backend.backendKind, 'codex-app-server');
    assert.equal(backend.transport, 'stdio');
    const byName = Object.fromEntries(backend.profiles.map((p: any) => [p.profile, p]));
    assert.deepEqual(Object.keys(byName).sort(), [
      'builtin-a',
      'builtin-b',
      'builtin-c',
      'builtin-d',
      'team-x',
    ]);
    assert.equal(byName['builtin-a'].configured, true);
    assert.equal(byName['builtin-b'].configured, false);
    assert.equal(byName['team-x'].builtin, false);
  });
});
