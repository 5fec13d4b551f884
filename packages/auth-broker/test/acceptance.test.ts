import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { findCanaries } from '@svc/testkit';
import { BROKER_FAILURE_KINDS, CAPABILITIES } from '../src/index.js';
import { buildCli, runCli } from './cli.js';
import {
  assertFailure,
  PREFLIGHT_ARGS,
  REPO,
  startTestBroker,
  type TestBroker,
} from './helpers.js';

/** spec/1 "Acceptance conditions for the development cluster", one test each. */
describe('acceptance conditions for the development cluster', () => {
  let t: TestBroker;

  before(async () => {
    await buildCli();
    t = await startTestBroker();
  });
  after(() => t.close());

  it('1: with the broker configured, PR preflight succeeds with no code-host token variable', async () => {
    // The runner environment holds the broker address and nothing code-host related.
    const run = await runCli([...PREFLIGHT_ARGS], { SVC_AUTH_BROKER_URL: t.url });
    assert.equal(run.code, 0, run.stdout + run.stderr);
    assert.equal(run.json.ok, true);
    assert.equal(run.json.runnerDisposition, 'ready');
    assert.equal(run.json.response.runnerDisposition, 'ready');
    assert.deepEqual(run.json.migration.runnerEnvTokens, {
      CODEHOST_CLI_TOKEN: { present: false },
      CODEHOST_TOKEN: { present: false },
    });
    // Without the address the same command is blocked, never served by a token fallback.
    const blocked = await runCli([...PREFLIGHT_ARGS], { CODEHOST_TOKEN: t.token });
    assert.equal(blocked.code, 1);
    assert.equal(blocked.json.failureKind, 'auth-missing');
  });

  it('2: the remote pr-preflight reports broker token coverage', async () => {
    const run = await runCli([...PREFLIGHT_ARGS], { SVC_AUTH_BROKER_URL: t.url });
    for (const coverage of [run.json.tokenCoverage, run.json.response.tokenCoverage]) {
      assert.equal(coverage.source, 'auth-broker');
      assert.equal(coverage.runnerEnvTokenRequired, false);
      assert.equal(coverage.valuesPrinted, false);
    }
  });

  it('3: a broker-backed issue or PR read returns structured data for an allowed repository', async () => {
    const issue = await t.cli({
      repo: REPO,
      operation: 'codehost.issue.read',
      params: { number: 1 },
    });
    assert.equal(issue.status, 200, issue.raw);
    assert.equal(issue.body.data.number, 1);
    assert.equal(issue.body.data.state, 'OPEN');
    assert.deepEqual(issue.body.data.author, { login: 'octocat' });
    assert.deepEqual(issue.body.data.labels, [{ name: 'bug' }]);
    const pr = await t.cli({ repo: REPO, operation: 'codehost.pr.read', params: { number: 4 } });
    assert.equal(pr.status, 200, pr.raw);
    assert.equal(pr.body.data.headRefName, 'fix/crash');
    assert.equal(pr.body.data.baseRefName, 'main');
    assert.match(pr.body.data.headRefOid, /^[0-9a-f]{40}$/);
  });

  it('4: a broker-backed PR create dry run returns a planned operation with writesRemote=false', async () => {
    t.fake.resetLog();
    const res = await t.cli({
      repo: REPO,
      operation: 'codehost.pr.create',
      dryRun: true,
      params: { title: 'Fix crash', base: 'main', head: 'fix/crash', body: 'Closes #1' },
    });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.planned.writesRemote, false);
    assert.equal(res.body.planned.method, 'POST');
    assert.equal(t.fake.requests.length, 0, 'nothing was sent');
  });

  it('5: includePushDryRun is a runner-local check that fails on its own as git-remote-gap', async () => {
    const res = await t.preflight({
      requestId: randomUUID(),
      repo: REPO,
      base: 'main',
      head: 'fix/crash',
      issueNumber: 1,
      includePushDryRun: true,
    });
    assert.equal(res.status, 200, res.raw);
    assert.equal(
      res.body.runnerDisposition,
      'ready',
      'the broker part is ready regardless of the push',
    );
    assert.equal(res.body.pushDryRun.checkedBy, 'runner');
    assert.equal(res.body.pushDryRun.performedByBroker, false);
    assert.equal(res.body.pushDryRun.failureKind, 'git-remote-gap');
    const gap = BROKER_FAILURE_KINDS['git-remote-gap'];
    assert.deepEqual([gap.origin, gap.httpStatus], ['runner', null], 'never a broker HTTP failure');
  });

  it('6: logs and audit records carry request ids, operations and failure semantics, no token', async () => {
    const ok = await t.cli({
      requestId: randomUUID(),
      repo: REPO,
      operation: 'codehost.issue.list',
    });
    const failed = await t.cli({
      requestId: randomUUID(),
      repo: REPO,
      operation: 'codehost.pr.read',
      params: { number: 77 },
    });
    const audit = await t.audit();
    for (const [reply, kind] of [
      [ok, null],
      [failed, 'repo-not-found'],
    ] as const) {
      const id = reply.body.requestId;
      const record = audit.find((a) => a.requestId === id)!;
      assert.ok(record, 'audited under the request id');
      assert.equal(record.operation, reply === ok ? 'codehost.issue.list' : 'codehost.pr.read');
      assert.equal(record.failureKind, kind);
      assert.equal(record.runnerDisposition, kind ? 'business-failed' : 'ready');
      const log = t.logs.map((l) => JSON.parse(l)).find((l) => l.requestId === id);
      assert.ok(log, 'logged under the request id');
      assert.equal(log.operation, record.operation);
      assert.equal(log.failureKind, kind);
    }
    assert.deepEqual(findCanaries(t.logs.join('') + (await t.auditText()), [t.token]), []);
  });

  it('7: no deploy, restart, production mutation, registry proxy or lasting control plane', async () => {
    for (const path of [
      '/v1/registry/login',
      '/v1/deploy',
      '/v1/codehost/merge',
      '/v1/codehost/raw',
      '/v2/codehost/cli',
    ]) {
      const probe = await fetch(`${t.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      const body = (await probe.json()) as { failureKind: string };
      assert.equal(probe.status, 403, path);
      assert.equal(body.failureKind, 'operation-not-allowed');
    }
    assert.ok(CAPABILITIES.every((c) => c.startsWith('codehost.')));
    // Everything any test in this file sent upstream was a read.
    assert.ok(t.fake.requests.every((r) => r.method === 'GET'));
    // A separate broker leaves nothing listening once closed.
    const extra = await startTestBroker({ fake: t.fake, token: t.token });
    const url = extra.url;
    await extra.close();
    await assert.rejects(fetch(`${url}/health`));
    assertFailure(
      await t.cli({ repo: REPO, operation: 'codehost.pr.merge' }),
      'operation-not-allowed',
    );
  });
});
