import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { findCanaries } from '@svc/testkit';
import type { Fault } from './fake-github.js';
import { FakeGithub } from './fake-github.js';
import {
  plantedToken,
  REPO,
  seedRepo,
  startTestBroker,
  type Reply,
  type TestBroker,
} from './helpers.js';

const FAULTS: Fault[] = [
  'rate-limit-primary',
  'rate-limit-429',
  'secondary-rate-limit',
  'not-found',
  'bad-credentials',
  'forbidden',
  'scope-missing',
  'permission-missing',
  'malformed-json',
  'wrong-shape',
  'reset',
  'server-error',
  'moved',
  'echo-secrets',
];

/**
 * A planted token must not appear, in any encoding, in any response, header, log line or audit
 * line, whatever path a request takes, including an upstream that reflects it back.
 */
describe('canary: the broker-held token never leaves the broker', () => {
  const token = plantedToken();
  let fake: FakeGithub;
  let fileBroker: TestBroker;
  let envBroker: TestBroker;
  const replies: Reply[] = [];

  before(async () => {
    fake = await FakeGithub.start({ token });
    seedRepo(fake);
    // Upstream content that happens to hold the token (pasted into an issue by someone).
    fake.addIssue(REPO, {
      title: `leaked ${token}`,
      body: `see ${Buffer.from(token).toString('base64')}`,
    });
    fileBroker = await startTestBroker({ fake, token, env: { AUTH_BROKER_LOG_LEVEL: 'trace' } });
    envBroker = await startTestBroker({
      fake,
      token,
      env: {
        AUTH_BROKER_LOG_LEVEL: 'trace',
        AUTH_BROKER_CODEHOST_CREDENTIAL_REF: 'env:BROKER_GH_TOKEN',
        BROKER_GH_TOKEN: token,
        AUTH_BROKER_UPSTREAM_RETRIES: '1',
      },
    });
  });
  after(async () => {
    await fileBroker.close();
    await envBroker.close();
    await fake.close();
  });

  async function exercise(t: TestBroker): Promise<void> {
    const reads = [
      { repo: REPO, operation: 'codehost.auth.status' },
      { repo: REPO, operation: 'codehost.issue.read', params: { number: 1 } },
      { repo: REPO, operation: 'codehost.issue.list', params: { state: 'all' } },
      { repo: REPO, operation: 'codehost.pr.list' },
      { repo: REPO, operation: 'codehost.pr.read', params: { number: 4 } },
    ];
    const preflight = {
      repo: REPO,
      base: 'main',
      head: 'fix/crash',
      issueNumber: 1,
      includePushDryRun: true,
    };
    for (const fault of [null, ...FAULTS]) {
      fake.clearFaults();
      if (fault) fake.fault(fault);
      for (const body of reads) replies.push(await t.cli(body));
      replies.push(await t.preflight(preflight));
    }
    fake.clearFaults();
    replies.push(
      await t.cli({
        repo: REPO,
        operation: 'codehost.pr.create',
        dryRun: true,
        params: { title: 't', base: 'main', head: 'x' },
      }),
      await t.cli({ repo: REPO, operation: 'codehost.pr.create', dryRun: false, params: {} }),
      await t.cli({ repo: 'acme/other', operation: 'codehost.issue.read', params: { number: 1 } }),
      await t.cli({ repo: REPO, operation: 'codehost.repo.delete' }),
      await t.cli('{"broken'),
      await t.get('/health'),
      await t.get('/v1/raw?url=https://api.github.com/user'),
    );
  }

  it('is absent from every response, header, log line and audit line', async () => {
    await exercise(fileBroker);
    await exercise(envBroker);
    // The requests did carry it upstream: the canary is live, so its absence below means something.
    assert.ok(fake.requests.some((r) => r.authorization === `token ${token}`));
    assert.ok(replies.some((r) => r.status === 200) && replies.some((r) => r.status >= 400));

    const surfaces: Record<string, string> = {
      responses: replies.map((r) => `${r.raw}\n${JSON.stringify([...r.headers])}`).join('\n'),
      fileBrokerLogs: fileBroker.logs.join(''),
      envBrokerLogs: envBroker.logs.join(''),
      fileBrokerAudit: await fileBroker.auditText(),
      envBrokerAudit: await envBroker.auditText(),
    };
    for (const [name, text] of Object.entries(surfaces)) {
      assert.ok(text.length > 0, `${name} captured something`);
      assert.deepEqual(findCanaries(text, [token]), [], `${name} leaks the token`);
    }
    // Upstream headers (the reflected cookie among them) are never passed through.
    assert.ok(!surfaces.responses!.includes('session='));
  });

  it('redacts the token where code-host content itself carries it', async () => {
    const res = await fileBroker.cli({
      repo: REPO,
      operation: 'codehost.issue.read',
      params: { number: 6, jsonFields: ['title', 'body'] },
    });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.data.title, 'leaked [redacted]');
    assert.equal(res.body.data.body, 'see [redacted]');
  });

  it('prints only the reference, hashed from the reference and not from the value', async () => {
    const health = await envBroker.get('/health');
    assert.match(health.body.codehost.credentialRef, /^env:BROKER_GH_TOKEN#[0-9a-f]{12}$/);
    const other = await startTestBroker({
      fake,
      token,
      env: {
        AUTH_BROKER_CODEHOST_CREDENTIAL_REF: 'env:BROKER_GH_TOKEN',
        BROKER_GH_TOKEN: plantedToken(),
      },
    });
    try {
      const again = await other.get('/health');
      assert.equal(again.body.codehost.credentialRef, health.body.codehost.credentialRef);
    } finally {
      await other.close();
    }
  });
});
