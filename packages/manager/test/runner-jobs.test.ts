import assert from 'node:assert/strict';
import { readFile, stat, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { canary, findCanaries } from '@svc/testkit';
import { runBody, startTestManager, type TestManager } from './helpers.js';
import { jsonFileOnceWhole, waitFor } from './e2e-helpers.js';

/**
 * The runner-jobs API and the local launcher. The launcher and its per-job files are real; the
 * job's program is a stand-in that writes down the environment it was given (so the test can
 * see what a runner would see) and stays up until stopped.
 */
const STAND_IN = `
import { writeFileSync } from 'node:fs';
writeFileSync(process.env.SVC_JOB_DIR + '/seen-env.json', JSON.stringify(process.env));
process.on('SIGTERM', () => process.exit(0));
setInterval(() => {}, 1000);
`;
const DIGEST = (c: string) => `registry.internal/svc-runner@sha256:${c.repeat(64)}`;
const catalogSource = {
  kind: 'env-image-dockerfile',
  repoUrl: 'https://git.example/env.git',
  commitId: 'a'.repeat(40),
  dockerfilePath: 'images/runner/Dockerfile',
};

let t: TestManager;
let dir: string;
const secretValue = canary('transient');
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'svc-jobs-'));
  await writeFile(join(dir, 'runner.mjs'), STAND_IN);
  await writeFile(
    join(dir, 'catalog.json'),
    JSON.stringify({ images: [{ source: catalogSource, image: DIGEST('c') }] }),
  );
  t = await startTestManager({
    listen: true,
    env: {
      SVC_RUNNER_ENTRY: join(dir, 'runner.mjs'),
      SVC_RUNNER_IMAGE_ALLOWLIST: DIGEST('b'),
      SVC_IMAGE_CATALOG: join(dir, 'catalog.json'),
      SVC_API_KEY: 'manager-key-for-runner-jobs-test',
    },
  });
  await t.configureProfile('builtin-a');
});
after(async () => {
  await t?.close();
  await rm(dir, { recursive: true, force: true });
});

async function runAndCommand(overrides: Record<string, unknown> = {}) {
  const run = await t.api('POST', '/api/v1/runs', runBody(overrides));
  assert.equal(run.status, 201, run.raw);
  const command = await t.api('POST', `/api/v1/runs/${run.body.runId}/commands`, {
    type: 'turn',
    payload: { prompt: 'x' },
  });
  return { runId: run.body.runId as string, commandId: command.body.commandId as string };
}
const job = (runId: string, body: Record<string, unknown>) =>
  t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, body);
const jobCount = async () =>
  Number(
    (
      await sql<{ n: number }>`SELECT count(*)::int AS n FROM runner_jobs`.execute(
        t.manager.store.db,
      )
    ).rows[0]!.n,
  );

describe('runner jobs', () => {
  it('creates a job with a generated attempt, starts it, and answers without waiting for a turn', async () => {
    const { runId, commandId } = await runAndCommand();
    const started = Date.now();
    const created = await job(runId, {
      commandId,
      transientEnv: [
        { name: 'LAB_API_KEY', value: secretValue },
        { name: 'LAB_RUNTIME_API_URL', value: 'http://lab.internal' },
      ],
    });
    assert.equal(created.status, 201, created.raw);
    assert.ok(Date.now() - started < 10_000);
    const body = created.body;
    assert.match(body.attemptId, /^att-/);
    assert.match(body.jobName, /^svc-v01-runner-/);
    assert.equal(body.phase, 'running');
    assert.match(body.podIdentity, /^local:/);
    assert.deepEqual(body.transientEnv.names, ['LAB_API_KEY', 'LAB_RUNTIME_API_URL']);
    assert.equal(body.transientEnv.count, 2);
    assert.match(body.transientEnv.hash, /^[0-9a-f]{64}$/);
    assert.equal(body.transientEnv.valuesPrinted, false);
    assert.equal(body.valuesPrinted, false);
    assert.equal(body.image.resolvedFrom, 'default');
    assert.equal(body.workReady.dependencyPolicy, 'preinstalled-image-only');
    assert.equal(body.polling.command, `/api/v1/runs/${runId}/commands/${commandId}`);
    assert.deepEqual(findCanaries(created.raw, [secretValue]), []);

    const one = await t.api('GET', `/api/v1/runs/${runId}/runner-jobs/${body.runnerJobId}`);
    assert.equal(one.body.attemptId, body.attemptId, 'the attempt is queryable');
    const list = await t.api('GET', `/api/v1/runs/${runId}/runner-jobs?commandId=${commandId}`);
    assert.deepEqual(
      list.body.runnerJobs.map((j: any) => j.runnerJobId),
      [body.runnerJobId],
    );

    // What the job received: names in its environment, values only in its 0600 secret file.
    const jobDir = join(t.dataDir, 'jobs', body.jobName);
    const seen = await waitFor('the job to start', async () =>
      jsonFileOnceWhole(join(jobDir, 'seen-env.json')),
    );
    assert.deepEqual(
      findCanaries(JSON.stringify(seen), [secretValue, 'manager-key-for-runner-jobs-test']),
      [],
      'no value as plain environment',
    );
    assert.equal(seen.SVC_ATTEMPT_ID, body.attemptId);
    const file = join(seen.SVC_SECRET_DIR, 'transient-env.json');
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    assert.ok((await readFile(file, 'utf8')).includes(secretValue));
    const rows = JSON.stringify(
      (await sql`SELECT * FROM runner_jobs`.execute(t.manager.store.db)).rows,
    );
    assert.deepEqual(
      findCanaries(rows + t.logs.join(''), [secretValue]),
      [],
      'no value in the job record or logs',
    );
  });

  it('is idempotent by key: same payload returns the job, another payload conflicts and adds no attempt', async () => {
    const { runId, commandId } = await runAndCommand();
    const body = {
      commandId,
      idempotencyKey: 'trace-77',
      transientEnv: [{ name: 'LAB_TOKEN_HINT', value: 'one' }],
    };
    const first = await job(runId, body);
    const again = await job(runId, body);
    assert.equal(again.status, 200);
    assert.equal(again.body.attemptId, first.body.attemptId);
    const before = await jobCount();
    const conflict = await job(runId, {
      ...body,
      transientEnv: [{ name: 'LAB_TOKEN_HINT', value: 'two' }],
    });
    assert.equal(conflict.status, 409);
    assert.equal(conflict.body.failureKind, 'idempotency-conflict');
    assert.ok(!conflict.raw.includes('"two"'));
    assert.equal(await jobCount(), before);
  });

  it('validates transientEnv and refuses credentials without echoing values', async () => {
    const { runId, commandId } = await runAndCommand();
    const refused = [
      [
        { name: 'A', value: '1' },
        { name: 'A', value: '2' },
      ],
      [{ name: 'lower_case', value: 'x' }],
      [{ name: 'EMPTY', value: '' }],
      [{ name: 'BIG', value: 'x'.repeat(4097) }],
      [{ name: 'OPENAI_API_KEY', value: 'whatever-value' }],
      [{ name: 'GITHUB_TOKEN', value: 'whatever-value' }],
      [{ name: 'PLATFORM_SSH_CLIENT_TOKEN', value: 'whatever-value' }],
      [{ name: 'INNOCENT', value: `ghp_${'a'.repeat(36)}` }],
      [{ name: 'DEPLOY_KEY', value: '-----BEGIN OPENSSH PRIVATE KEY-----\nabc' }],
      { not: 'an array' },
    ];
    const before = await jobCount();
    for (const transientEnv of refused) {
      const response = await job(runId, { commandId, transientEnv });
      assert.equal(
        response.status,
        400,
        `${JSON.stringify(transientEnv).slice(0, 60)} -> ${response.raw}`,
      );
      assert.equal(response.body.failureKind, 'schema-invalid');
      assert.ok(
        !response.raw.includes('whatever-value') && !response.raw.includes('ghp_'),
        'no value in the error',
      );
    }
    assert.equal(await jobCount(), before);
  });

  it('needs a platform endpoint when the run uses platform-ssh: from transientEnv or a manager default', async () => {
    const tool = {
      tool: 'platform-ssh',
      purpose: 'ssh-passthrough',
      secretRef: { name: 'svc-v01-tool-ssh', keys: ['PLATFORM_SSH_CLIENT_TOKEN'] },
      projection: { kind: 'env', envName: 'PLATFORM_SSH_CLIENT_TOKEN' },
    };
    const { runId, commandId } = await runAndCommand({
      executionPolicy: { secretScope: { toolCredentials: [tool] } },
    });
    const missing = await job(runId, { commandId, dryRun: true });
    assert.equal(missing.status, 400);
    assert.match(missing.body.message, /PLATFORM_FRONTEND_URL/);
    const given = await job(runId, {
      commandId,
      dryRun: true,
      transientEnv: [{ name: 'PLATFORM_FRONTEND_URL', value: 'https://frontend.internal' }],
    });
    assert.equal(given.status, 200, given.raw);
    const withDefaults = await startTestManager({
      env: { SVC_PLATFORM_DEFAULTS: 'PLATFORM_MAIN_SERVER_HOST=main.internal' },
    });
    try {
      await withDefaults.configureProfile('builtin-a');
      const run = await withDefaults.api(
        'POST',
        '/api/v1/runs',
        runBody({ executionPolicy: { secretScope: { toolCredentials: [tool] } } }),
      );
      const command = await withDefaults.api('POST', `/api/v1/runs/${run.body.runId}/commands`, {
        type: 'turn',
        payload: { prompt: 'x' },
      });
      const planned = await withDefaults.api('POST', `/api/v1/runs/${run.body.runId}/runner-jobs`, {
        commandId: command.body.commandId,
        dryRun: true,
      });
      assert.equal(planned.status, 200, planned.raw);
      assert.deepEqual(planned.body.transientEnv.defaultsAdded, ['PLATFORM_MAIN_SERVER_HOST']);
    } finally {
      await withDefaults.close();
    }
  });

  it('takes images only from the default, the allowlist or the catalog, pinned by digest', async () => {
    const { runId, commandId } = await runAndCommand();
    const dry = (extra: Record<string, unknown>) =>
      job(runId, { commandId, dryRun: true, ...extra });
    assert.equal(
      (await dry({ image: 'registry.internal/svc-runner:latest' })).body.failureKind,
      'schema-invalid',
    );
    assert.equal((await dry({ image: DIGEST('d') })).body.failureKind, 'tenant-policy-denied');
    assert.equal((await dry({ image: DIGEST('b') })).body.image.resolvedFrom, 'allowlist');
    const catalogued = (await dry({ backendImageRef: { source: catalogSource } })).body;
    assert.equal(catalogued.image.resolvedFrom, 'catalog');
    assert.equal(catalogued.image.ref, DIGEST('c'));
    const miss = await dry({
      backendImageRef: { source: { ...catalogSource, commitId: 'e'.repeat(40) } },
    });
    assert.equal(miss.status, 409);
    assert.equal(miss.body.failureKind, 'build-required');
  });

  it('renders a dry run with names, keys and hashes only, and writes nothing', async () => {
    const { runId, commandId } = await runAndCommand();
    const before = await jobCount();
    const planned = await job(runId, {
      commandId,
      dryRun: true,
      transientEnv: [{ name: 'LAB_API_KEY', value: secretValue }],
    });
    assert.equal(planned.status, 200, planned.raw);
    assert.equal(planned.body.dryRun, true);
    assert.ok(
      planned.body.workReady.tools.some((tool: any) => tool.name === 'git' && tool.present),
      'the work-ready summary is in the dry run',
    );
    assert.ok(planned.body.manifest.env.SVC_RUN_ID);
    assert.deepEqual(planned.body.manifest.secretFiles.files, [
      'transient-env.json',
      'manager-token',
    ]);
    assert.deepEqual(
      findCanaries(planned.raw, [secretValue, 'manager-key-for-runner-jobs-test']),
      [],
    );
    assert.equal(await jobCount(), before);
  });

  it('refuses commands of other runs, cancelled commands, terminal runs and reused attempt ids', async () => {
    const a = await runAndCommand();
    const b = await runAndCommand();
    assert.equal(
      (await job(a.runId, { commandId: b.commandId })).body.failureKind,
      'schema-invalid',
    );
    await t.api('POST', `/api/v1/commands/${a.commandId}/cancel`, {});
    const cancelled = await job(a.runId, { commandId: a.commandId });
    assert.equal(cancelled.status, 409);
    assert.equal(cancelled.body.failureKind, 'state-conflict');
    const first = await job(b.runId, {
      commandId: b.commandId,
      attemptId: 'att-chosen-by-dispatcher',
    });
    assert.equal(first.body.attemptId, 'att-chosen-by-dispatcher');
    const reused = await job(b.runId, {
      commandId: b.commandId,
      attemptId: 'att-chosen-by-dispatcher',
    });
    assert.equal(reused.status, 409);
    await t.api('POST', `/api/v1/runs/${b.runId}/cancel`, {});
    assert.equal((await job(b.runId, { commandId: b.commandId })).body.failureKind, 'run-terminal');
    assert.equal((await job('run-00000000000000', { commandId: b.commandId })).status, 404);
  });
});
