import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, beforeEach, describe, it } from 'node:test';
import { assertFailure, REPO, startTestBroker, upstreamLines, type TestBroker } from './helpers.js';

describe('PR preflight', () => {
  let t: TestBroker;
  before(async () => {
    t = await startTestBroker();
  });
  after(() => t.close());
  beforeEach(() => {
    t.fake.clearFaults();
    t.fake.resetLog();
  });

  const request = (extra: Record<string, unknown> = {}) => ({
    requestId: randomUUID(),
    repo: REPO,
    base: 'main',
    head: 'fix/crash',
    issueNumber: 1,
    includePrCreateDryRun: true,
    includePushDryRun: false,
    ...extra,
  });

  it('proves auth, visibility, issue read, PR read and the create shape, and says ready', async () => {
    const body = request();
    const res = await t.preflight(body);
    assert.equal(res.status, 200, res.raw);
    const r = res.body;
    assert.equal(r.requestId, body.requestId, 'the caller id is kept');
    assert.equal(r.ok, true);
    assert.equal(r.runnerDisposition, 'ready');
    assert.equal(r.failureKind, null);
    assert.equal(r.degradedReason, null);
    assert.deepEqual(r.tokenCoverage, {
      ok: true,
      source: 'auth-broker',
      scope: 'broker-held-codehost-credential',
      runnerEnvTokenRequired: false,
      valuesPrinted: false,
    });
    assert.equal(r.prCapabilityContract.targetBranch, 'main');
    assert.equal(r.prCapabilityContract.systemCliBinaryRequiredForWrites, false);
    assert.equal(r.prCapabilityContract.preflightCreatesPr, false);
    assert.equal(r.prCapabilityContract.preflightMergesPr, false);
    assert.equal(r.prCapabilityContract.brokerProxy.ok, true);
    assert.equal(r.prCapabilityContract.brokerProxy.writesRemote, false);
    assert.ok(r.prCapabilityContract.brokerProxy.operations.includes('codehost.auth.status'));
    assert.ok(r.prCapabilityContract.brokerProxy.operations.includes('codehost.pr.create'));
    assert.deepEqual(
      r.checks.map((c: { name: string }) => c.name),
      ['auth', 'repo-visibility', 'issue-read', 'pr-read', 'pr-create-shape'],
    );
    const pr = r.checks.find((c: { name: string }) => c.name === 'pr-read');
    assert.deepEqual(pr.detail.openPullRequestsForHead, [4], 'the open PR for the head is found');
    const plan = r.checks.at(-1).detail.planned;
    assert.equal(plan.writesRemote, false);
    assert.equal(plan.params.title, 'Crash on start');
    // Only reads reached the code host.
    assert.deepEqual(upstreamLines(t.fake), [
      'GET /rate_limit',
      `GET /repos/${REPO}`,
      `GET /repos/${REPO}/issues/1`,
      `GET /repos/${REPO}/pulls`,
    ]);
  });

  it('reports includePushDryRun as a runner-local check with its own failure kind', async () => {
    const res = await t.preflight(request({ includePushDryRun: true }));
    assert.equal(res.status, 200, res.raw);
    assert.deepEqual(res.body.pushDryRun, {
      requested: true,
      checkedBy: 'runner',
      performedByBroker: false,
      failureKind: 'git-remote-gap',
      command: 'git push --dry-run origin fix/crash',
    });
    assert.ok(t.fake.requests.every((r) => r.method === 'GET'));
  });

  it('skips the create shape when not asked for it', async () => {
    const res = await t.preflight(request({ includePrCreateDryRun: false }));
    assert.equal(res.status, 200, res.raw);
    assert.ok(!res.body.checks.some((c: { name: string }) => c.name === 'pr-create-shape'));
  });

  it('fails at the check that failed, with the passed checks named', async () => {
    const pr = await t.preflight(request({ issueNumber: 4 }));
    assertFailure(pr, 'repo-not-found', 'number-is-pull-request');
    assert.equal(pr.body.details.failedCheck, 'issue-read');
    assert.deepEqual(pr.body.details.passedChecks, ['auth', 'repo-visibility']);

    t.fake.fault('bad-credentials', /rate_limit/);
    const auth = await t.preflight(request());
    assertFailure(auth, 'codehost-permission-denied', 'credential-rejected');
    assert.equal(auth.body.details.failedCheck, 'auth');
    t.fake.clearFaults();

    t.fake.fault('rate-limit-429', /pulls$/);
    const limited = await t.preflight(request());
    assertFailure(limited, 'codehost-rate-limited');
    assert.equal(limited.body.details.failedCheck, 'pr-read');
    assert.equal(limited.body.retryAfterSeconds, 7);
  });

  it('treats a disabled rate-limit endpoint (enterprise servers) as no rate limit', async () => {
    t.fake.fault('not-found', /^\/rate_limit$/);
    const res = await t.preflight(request());
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.checks[0].detail.rateLimit, null);
  });

  it('validates the request before any upstream call', async () => {
    for (const bad of [
      request({ base: 'main', head: 'main' }),
      request({ head: '../../etc' }),
      request({ issueNumber: 0 }),
      request({ includePushDryRun: 'yes' }),
      request({ command: 'git push' }),
    ]) {
      assertFailure(await t.preflight(bad), 'validation-failed');
    }
    assertFailure(await t.preflight(request({ repo: 'acme/other' })), 'repo-not-allowed');
    assert.deepEqual(upstreamLines(t.fake), []);
  });

  it('writes one audit record naming branches and issue, never the planned body', async () => {
    const body = request({ includePushDryRun: true });
    await t.preflight(body);
    const record = (await t.audit()).find((a) => a.requestId === body.requestId)!;
    assert.equal(record.operation, 'codehost.pr.preflight');
    assert.deepEqual(record.resource, {
      issueNumber: 1,
      base: 'main',
      head: 'fix/crash',
      includePushDryRun: true,
    });
    assert.equal(record.upstream.calls.length, 5, 'four reads and the planned create');
    assert.deepEqual(record.upstream.calls.at(-1), {
      method: 'POST',
      path: `/repos/${REPO}/pulls`,
      status: null,
      attempts: 0,
    });
    assert.equal(record.upstream.sent, true);
    assert.equal(record.body!.length, 'Closes #1'.length);
  });
});
