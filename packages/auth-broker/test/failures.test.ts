import assert from 'node:assert/strict';
import { networkInterfaces } from 'node:os';
import { after, before, beforeEach, describe, it } from 'node:test';
import { BROKER_FAILURE_KINDS, type BrokerFailureKind } from '../src/index.js';
import {
  assertFailure,
  REPO,
  startTestBroker,
  upstreamLines,
  type Reply,
  type TestBroker,
} from './helpers.js';

type BrokerKind = {
  [K in BrokerFailureKind]: (typeof BROKER_FAILURE_KINDS)[K]['origin'] extends 'broker' ? K : never;
}[BrokerFailureKind];

/** A non-loopback IPv4 address of this machine, to call the broker from outside loopback. */
export function externalAddress(): string | null {
  for (const list of Object.values(networkInterfaces()))
    for (const entry of list ?? [])
      if (entry.family === 'IPv4' && !entry.internal) return entry.address;
  return null;
}

describe('every failure kind of the error table, through the real broker', () => {
  let t: TestBroker;
  const read = (number = 1) =>
    t.cli({ repo: REPO, operation: 'codehost.issue.read', params: { number } });

  before(async () => {
    t = await startTestBroker({ env: { AUTH_BROKER_UPSTREAM_TIMEOUT_MS: '800' } });
  });
  after(() => t.close());
  beforeEach(() => {
    t.fake.clearFaults();
    t.fake.resetLog();
  });

  async function lastAudit() {
    return (await t.audit()).at(-1)!;
  }

  // Typed as a complete map: adding a broker failure kind without a scenario fails to compile.
  const scenarios: Record<BrokerKind, () => Promise<void>> = {
    'auth-not-configured': async () => {
      const bare = await startTestBroker({
        fake: t.fake,
        token: t.token,
        env: { AUTH_BROKER_CODEHOST_CREDENTIAL_REF: '' },
      });
      try {
        const res = await bare.cli({
          repo: REPO,
          operation: 'codehost.issue.read',
          params: { number: 1 },
        });
        assertFailure(res, 'auth-not-configured', 'credential-ref-missing');
        const health = await bare.get('/health');
        assert.equal(health.body.codehost.configured, false);
        assert.equal(health.body.codehost.credentialRef, 'none');
      } finally {
        await bare.close();
      }
      // A reference whose variable is empty is configured but unusable: same kind, own reason.
      const empty = await startTestBroker({
        fake: t.fake,
        token: t.token,
        env: { AUTH_BROKER_CODEHOST_CREDENTIAL_REF: 'env:BROKER_GH_TOKEN' },
      });
      try {
        assertFailure(
          await empty.cli({ repo: REPO, operation: 'codehost.issue.read', params: { number: 1 } }),
          'auth-not-configured',
          'credential-unreadable',
        );
      } finally {
        await empty.close();
      }
      assert.deepEqual(upstreamLines(t.fake), []);
    },

    'broker-unavailable': async () => {
      // /dev/full accepts the open at start and refuses every write: the audit sink is broken.
      const blind = await startTestBroker({
        fake: t.fake,
        token: t.token,
        env: { AUTH_BROKER_AUDIT_LOG: '/dev/full' },
      });
      try {
        const res = await blind.cli({
          repo: REPO,
          operation: 'codehost.issue.read',
          params: { number: 1 },
        });
        assertFailure(res, 'broker-unavailable', 'audit-log-unwritable');
        assert.ok(!res.raw.includes('Crash on start'), 'no upstream result leaves unaudited');
        assert.ok(blind.logs.some((l) => l.includes('audit write failed')));
      } finally {
        await blind.close();
      }
    },

    'unauthorized-caller': async (ctx?: { skip(reason: string): void }) => {
      const address = externalAddress();
      if (!address) return ctx?.skip('no non-loopback interface on this machine');
      const open = await startTestBroker({
        fake: t.fake,
        token: t.token,
        env: { AUTH_BROKER_HOST: '0.0.0.0' },
      });
      try {
        const url = `http://${address}:${open.broker.port}/v1/codehost/cli`;
        const res = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-forwarded-for': '127.0.0.1' },
          body: JSON.stringify({
            repo: REPO,
            operation: 'codehost.issue.read',
            params: { number: 1 },
          }),
        });
        const raw = await res.text();
        assertFailure(
          { status: res.status, raw, body: JSON.parse(raw), headers: res.headers },
          'unauthorized-caller',
        );
        const audit = (await open.audit()).at(-1)!;
        assert.equal(audit.failureKind, 'unauthorized-caller');
        assert.equal(audit.caller.address, address);
      } finally {
        await open.close();
      }
      assert.deepEqual(upstreamLines(t.fake), []);
    },

    'repo-not-allowed': async () => {
      for (const repo of [
        'acme/secret',
        '../widgets',
        'acme/widgets/issues',
        'https://github.com/acme/widgets',
      ]) {
        assertFailure(
          await t.cli({ repo, operation: 'codehost.issue.read', params: { number: 1 } }),
          'repo-not-allowed',
        );
      }
      assert.equal((await lastAudit()).repo, null, 'a refused repository is not recorded as one');
      assert.deepEqual(upstreamLines(t.fake), []);
    },

    'operation-not-allowed': async () => {
      for (const operation of [
        'codehost.pr.merge',
        'codehost.issue.delete',
        'GET /repos/acme/widgets',
        'shell',
      ]) {
        assertFailure(
          await t.cli({ repo: REPO, operation }),
          'operation-not-allowed',
          'unknown-operation',
        );
      }
      const route = await t.get('/repos/acme/widgets/issues');
      assertFailure(route, 'operation-not-allowed', 'unknown-endpoint');
      const merge = await t.cli({}, { method: 'PUT' });
      assertFailure(merge, 'operation-not-allowed', 'unknown-endpoint');
      assert.deepEqual(upstreamLines(t.fake), []);
    },

    'dry-run-required': async () => {
      const res = await t.cli({
        repo: REPO,
        operation: 'codehost.pr.comment.create',
        dryRun: false,
        params: { number: 4, body: 'hi' },
      });
      assertFailure(res, 'dry-run-required', 'live-write-disabled');
      assert.equal((await lastAudit()).requestedDryRun, false);
      assert.deepEqual(upstreamLines(t.fake), []);
    },

    'validation-failed': async () => {
      assertFailure(
        await t.cli({ repo: REPO, operation: 'codehost.issue.read' }),
        'validation-failed',
      );
      assertFailure(
        await t.cli({ repo: REPO, operation: 'codehost.issue.read', params: { number: '1' } }),
        'validation-failed',
      );
      assertFailure(
        await t.cli({ repo: REPO, operation: 'codehost.issue.list', params: { path: '/user' } }),
        'validation-failed',
      );
      assertFailure(await t.cli('{"repo": '), 'validation-failed', 'invalid-json');
      assertFailure(
        await t.cli('{"__proto__": {"admin": true}}'),
        'validation-failed',
        'forbidden-key',
      );
      assertFailure(await t.cli([1, 2]), 'validation-failed', 'body-not-object');
      assertFailure(
        await t.cli({
          repo: REPO,
          operation: 'codehost.issue.list',
          params: { labels: ['x'.repeat(300_000)] },
        }),
        'validation-failed',
        'body-too-large',
      );
      assertFailure(
        await t.cli('operation=x', {
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
        }),
        'validation-failed',
        'unsupported-media-type',
      );
      assertFailure(
        await t.cli({ requestId: 'not-a-uuid', repo: REPO, operation: 'codehost.auth.status' }),
        'validation-failed',
      );
      assert.deepEqual(upstreamLines(t.fake), []);
    },

    'codehost-egress-failed': async () => {
      t.fake.fault('reset', /issues\/1$/);
      assertFailure(await read(), 'codehost-egress-failed', 'codehost-unreachable');
      t.fake.clearFaults();
      t.fake.fault('server-error', /issues\/1$/);
      const five = await read();
      assertFailure(five, 'codehost-egress-failed', 'codehost-server-error');
      assert.ok(!five.raw.includes('<html'), 'the upstream error page is not passed through');
      t.fake.clearFaults();
      t.fake.slowMs = 3000;
      t.fake.fault('slow', /issues\/1$/);
      assertFailure(await read(), 'codehost-egress-failed', 'codehost-timeout');
      const audit = await lastAudit();
      assert.deepEqual(audit.upstream.calls, [
        { method: 'GET', path: `/repos/${REPO}/issues/1`, status: null, attempts: 1 },
      ]);
    },

    'codehost-rate-limited': async () => {
      t.fake.fault('rate-limit-primary', /issues\/1$/, 1);
      const primary = await read();
      assertFailure(primary, 'codehost-rate-limited', 'rate-limit-primary');
      assert.ok(primary.body.retryAfterSeconds >= 100 && primary.body.retryAfterSeconds <= 121);
      assert.equal(primary.headers.get('retry-after'), String(primary.body.retryAfterSeconds));

      t.fake.fault('rate-limit-429', /issues\/1$/, 1);
      const tooMany = await read();
      assertFailure(tooMany, 'codehost-rate-limited', 'rate-limit-secondary');
      assert.equal(tooMany.body.retryAfterSeconds, 7);

      t.fake.fault('secondary-rate-limit', /issues\/1$/, 1);
      const secondary = await read();
      assertFailure(secondary, 'codehost-rate-limited', 'rate-limit-secondary');
      assert.equal(secondary.body.retryAfterSeconds, 42);
      // Returned at once with the hint: exactly one upstream request per broker request.
      assert.equal(t.fake.requests.length, 3);
    },

    'codehost-permission-denied': async () => {
      t.fake.fault('bad-credentials', /issues\/1$/, 1);
      assertFailure(await read(), 'codehost-permission-denied', 'credential-rejected');
      t.fake.fault('forbidden', /issues\/1$/, 1);
      assertFailure(await read(), 'codehost-permission-denied', 'access-denied');
    },

    'scope-insufficient': async () => {
      t.fake.fault('scope-missing', /issues\/1$/, 1);
      const scope = await read();
      assertFailure(scope, 'scope-insufficient', 'oauth-scope-missing');
      assert.deepEqual(scope.body.details.acceptedScopes, ['repo']);
      t.fake.fault('permission-missing', /issues\/1$/, 1);
      assertFailure(await read(), 'scope-insufficient', 'permission-missing');
    },

    'repo-not-found': async () => {
      assertFailure(await read(999), 'repo-not-found', 'not-found');
      t.fake.fault('moved', /issues\/1$/, 1);
      assertFailure(await read(), 'repo-not-found', 'repo-moved');
      assert.deepEqual(upstreamLines(t.fake), [
        `GET /repos/${REPO}/issues/999`,
        `GET /repos/${REPO}/issues/1`,
      ]);
    },

    'upstream-invalid-response': async () => {
      t.fake.fault('malformed-json', /issues\/1$/, 1);
      assertFailure(await read(), 'upstream-invalid-response', 'unexpected-shape');
      t.fake.fault('wrong-shape', /issues\/1$/, 1);
      assertFailure(await read(), 'upstream-invalid-response', 'unexpected-shape');
    },
  };

  for (const [kind, scenario] of Object.entries(scenarios)) {
    it(kind, async (ctx) => {
      await (scenario as (c: typeof ctx) => Promise<void>)(ctx);
      // Scenarios on this file's broker end with a refused request; its audit line names the kind.
      const ownBroker = ![
        'auth-not-configured',
        'broker-unavailable',
        'unauthorized-caller',
      ].includes(kind);
      if (ownBroker)
        assert.equal(
          (await t.audit()).at(-1)?.failureKind,
          kind,
          'the audit line carries the failure kind',
        );
    });
  }

  it('covers every broker failure kind of the registry', () => {
    const brokerKinds = Object.entries(BROKER_FAILURE_KINDS)
      .filter(([, spec]) => spec.origin === 'broker')
      .map(([kind]) => kind)
      .sort();
    assert.deepEqual(Object.keys(scenarios).sort(), brokerKinds);
  });

  it('retries one transient network failure on a read before failing', async () => {
    const retrying = await startTestBroker({
      fake: t.fake,
      token: t.token,
      env: { AUTH_BROKER_UPSTREAM_RETRIES: '1' },
    });
    try {
      t.fake.fault('reset', /issues\/1$/, 1);
      const res: Reply = await retrying.cli({
        repo: REPO,
        operation: 'codehost.issue.read',
        params: { number: 1 },
      });
      assert.equal(res.status, 200, res.raw);
      assert.equal(t.fake.requests.length, 2);
      const audit = (await retrying.audit()).at(-1)!;
      assert.deepEqual(audit.upstream.calls, [
        { method: 'GET', path: `/repos/${REPO}/issues/1`, status: 200, attempts: 2 },
      ]);
      t.fake.fault('rate-limit-429', /issues\/1$/, 1);
      t.fake.resetLog();
      assertFailure(
        await retrying.cli({ repo: REPO, operation: 'codehost.issue.read', params: { number: 1 } }),
        'codehost-rate-limited',
      );
      assert.equal(t.fake.requests.length, 1, 'rate limits are not retried inside the broker');
    } finally {
      await retrying.close();
    }
  });
});
