import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { findCanaries } from '@svc/testkit';
import { BROKER_FAILURE_KINDS } from '../src/index.js';
import { buildCli, runCli, serve, type CliRun } from './cli.js';
import {
  PREFLIGHT_ARGS,
  plantedToken,
  REPO,
  startTestBroker,
  upstreamLines,
  type TestBroker,
} from './helpers.js';

const SUBCOMMANDS: string[][] = [
  ['contract'],
  ['health'],
  ['health', '--dry-run'],
  ['credential-request', '--operation', 'codehost.issue.list', '--repo', REPO],
  ['credential-request', '--operation', 'codehost.issue.list', '--repo', REPO, '--dry-run'],
  [...PREFLIGHT_ARGS],
  [...PREFLIGHT_ARGS, '--dry-run'],
];

function assertReady(run: CliRun): void {
  assert.equal(run.code, 0, run.stdout + run.stderr);
  const o = run.json;
  assert.equal(o.ok, true);
  assert.equal(o.runnerDisposition, 'ready');
  assert.equal(o.brokerNeeded, false);
  assert.equal(o.tokenCoverage.source, 'auth-broker');
  assert.equal(o.tokenCoverage.runnerEnvTokenRequired, false);
  assert.equal(o.tokenCoverage.valuesPrinted, false);
  assert.equal(o.prCapabilityContract.preflightCreatesPr, false);
  assert.equal(o.prCapabilityContract.preflightMergesPr, false);
  assert.equal(o.prCapabilityContract.brokerProxy.writesRemote, false);
}

describe('client adapter (built CLI, child process)', () => {
  let t: TestBroker;
  // Runner-environment tokens: the adapter may say they exist, never what they are.
  const runnerTokens = { CODEHOST_TOKEN: plantedToken(), CODEHOST_CLI_TOKEN: plantedToken() };

  before(async () => {
    await buildCli();
    t = await startTestBroker();
  });
  after(() => t.close());

  describe('without a broker address', () => {
    it('every subcommand returns the auth-missing failure and contacts nothing', async () => {
      t.fake.resetLog();
      const env = {
        ...runnerTokens,
        // Everything a direct code-host call would need is present; none of it may be used.
        CODEHOST_API_URL: t.fake.url,
        CODEHOST_CLI_HOST: t.fake.url,
        CODEHOST_CLI_REPO: REPO,
      };
      const audited = (await t.audit()).length;
      for (const args of SUBCOMMANDS) {
        const run = await runCli(args, env);
        assert.equal(run.code, 1, `${args.join(' ')}: ${run.stdout}`);
        const o = run.json;
        assert.equal(o.ok, false);
        assert.equal(o.failureKind, 'auth-missing');
        assert.equal(o.degradedReason, 'broker-needed');
        assert.equal(o.runnerDisposition, 'infra-blocked');
        assert.equal(o.brokerNeeded, true);
        assert.deepEqual(o.tokenCoverage, {
          ok: false,
          presenceOnly: true,
          valuesRead: false,
          valuesPrinted: false,
        });
        assert.deepEqual(o.migration.runnerEnvTokens, {
          CODEHOST_CLI_TOKEN: { present: true },
          CODEHOST_TOKEN: { present: true },
        });
        assert.deepEqual(findCanaries(run.stdout + run.stderr, Object.values(runnerTokens)), []);
      }
      assert.deepEqual(upstreamLines(t.fake), [], 'no call reached the code host');
      assert.equal((await t.audit()).length, audited, 'nor the broker');
    });

    it('reports absent runner tokens as absent', async () => {
      const run = await runCli(['health']);
      assert.equal(run.json.failureKind, 'auth-missing');
      assert.equal(run.json.migration.runnerEnvTokens.CODEHOST_TOKEN.present, false);
    });

    it('still prints the contract next to the failure', async () => {
      const run = await runCli(['contract']);
      assert.equal(run.json.failureKind, 'auth-missing');
      assert.deepEqual(
        run.json.contract.failureKinds.map((k: { failureKind: string }) => k.failureKind).sort(),
        Object.keys(BROKER_FAILURE_KINDS).sort(),
      );
      assert.ok(
        run.json.contract.operations.every(
          (o: { writesRemote: boolean }) => o.writesRemote === false,
        ),
      );
    });
  });

  describe('with a broker address', () => {
    const env = () => ({ SVC_AUTH_BROKER_URL: t.url, ...runnerTokens });

    it('health returns the ready shape with the broker health', async () => {
      const run = await runCli(['health'], env());
      assertReady(run);
      assert.equal(run.json.health.service, 'auth-broker');
      assert.equal(run.json.health.codehost.configured, true);
      assert.equal(
        run.json.migration.runnerEnvTokens.CODEHOST_TOKEN.present,
        true,
        'diagnostic only',
      );
    });

    it('--dry-run prints the planned request and contacts nothing', async () => {
      const audited = (await t.audit()).length;
      const health = await runCli(['health', '--dry-run'], env());
      assertReady(health);
      assert.deepEqual(health.json.planned, { method: 'GET', url: `${t.url}/health`, sent: false });
      const request = await runCli(
        ['credential-request', '--operation', 'codehost.pr.create', '--repo', REPO, '--dry-run'],
        env(),
      );
      assertReady(request);
      assert.equal(request.json.planned.body.dryRun, true);
      assert.equal(request.json.planned.body.operation, 'codehost.pr.create');
      const preflight = await runCli([...PREFLIGHT_ARGS, '--dry-run'], env());
      assertReady(preflight);
      assert.equal(preflight.json.prCapabilityContract.targetBranch, 'main');
      assert.equal((await t.audit()).length, audited);
    });

    it('credential-request performs an allowlisted read through the broker', async () => {
      const run = await runCli(
        [
          'credential-request',
          '--operation',
          'codehost.issue.read',
          '--repo',
          REPO,
          '--number',
          '1',
        ],
        env(),
      );
      assertReady(run);
      assert.equal(run.json.response.data.title, 'Crash on start');
      const audit = (await t.audit()).at(-1)!;
      assert.equal(audit.requestId, run.json.requestId);
      assert.equal(audit.caller.plane, 'manual-cli');
    });

    it('pr-preflight reports broker token coverage and no env token requirement', async () => {
      const run = await runCli([...PREFLIGHT_ARGS], { SVC_AUTH_BROKER_URL: t.url });
      assertReady(run);
      assert.equal(run.json.response.tokenCoverage.source, 'auth-broker');
      assert.equal(run.json.response.runnerDisposition, 'ready');
      assert.equal(run.json.response.pushDryRun.checkedBy, 'runner');
    });

    it('passes broker failures through as structured failures with a non-zero exit', async () => {
      const refused = await runCli(
        [
          'credential-request',
          '--operation',
          'codehost.issue.read',
          '--repo',
          'acme/unlisted',
          '--number',
          '1',
        ],
        env(),
      );
      assert.equal(refused.code, 1);
      assert.equal(refused.json.failureKind, 'repo-not-allowed');
      assert.equal(refused.json.brokerStatus, 403);

      const local = await runCli(
        ['credential-request', '--operation', 'codehost.pr.merge', '--repo', REPO],
        env(),
      );
      assert.equal(local.code, 1);
      assert.equal(local.json.failureKind, 'operation-not-allowed');

      const usage = await runCli(['pr-preflight', '--repo', REPO], env());
      assert.equal(usage.code, 2);
      assert.equal(usage.json.failureKind, 'validation-failed');
      assert.match(usage.json.message, /--base/);
    });

    it('reports an unreachable broker as broker-unavailable', async () => {
      const run = await runCli(['health'], { AUTH_BROKER_URL: 'http://127.0.0.1:9' });
      assert.equal(run.code, 1);
      assert.equal(run.json.failureKind, 'broker-unavailable');
      assert.equal(run.json.retryable, true);
      assert.equal(run.json.broker.source, 'AUTH_BROKER_URL');
    });

    it('sanitizes the address before printing and never sends its user info', async () => {
      const secret = plantedToken();
      const address = new URL(t.url);
      address.username = 'runner';
      address.password = secret;
      address.searchParams.set('access_token', secret);
      const run = await runCli(['health'], {
        SVC_AUTH_BROKER_URL: address.href,
        AUTH_BROKER_URL: 'http://127.0.0.1:9',
      });
      assertReady(run);
      assert.equal(run.json.broker.source, 'SVC_AUTH_BROKER_URL', 'SVC_AUTH_BROKER_URL wins');
      assert.deepEqual(findCanaries(run.stdout + run.stderr, [secret]), []);
      assert.match(
        run.json.broker.url,
        /^http:\/\/%5Bredacted%5D@127\.0\.0\.1:\d+\/\?access_token=%5Bredacted%5D$/,
      );
    });
  });

  describe('auth-broker serve', () => {
    it('serves, writes audit lines to standard output and logs to standard error', async () => {
      const dir = await mkdtemp(join(tmpdir(), 'auth-broker-serve-'));
      const tokenFile = join(dir, 'token');
      await writeFile(tokenFile, t.token);
      const broker = await serve({
        AUTH_BROKER_CODEHOST_CREDENTIAL_REF: `file:${tokenFile}`,
        AUTH_BROKER_ALLOWED_REPOS: REPO,
        AUTH_BROKER_CODEHOST_API_URL: t.fake.url,
      });
      try {
        const res = await fetch(`${broker.url}/v1/codehost/cli`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            repo: REPO,
            operation: 'codehost.issue.read',
            params: { number: 1 },
          }),
        });
        assert.equal(res.status, 200);
        const requestId = res.headers.get('x-request-id');
        const code = await broker.stop();
        assert.equal(code, 0, 'SIGTERM shuts down cleanly');
        const lines = broker.stdout().split('\n').filter(Boolean);
        assert.equal(lines.length, 1, 'standard output carries only audit lines');
        assert.equal(JSON.parse(lines[0]!).requestId, requestId);
        assert.match(broker.stderr(), /auth broker listening/);
        assert.deepEqual(findCanaries(broker.stdout() + broker.stderr(), [t.token]), []);
      } finally {
        await broker.stop();
        await rm(dir, { recursive: true, force: true });
      }
    });

    it('refuses to start on bad configuration, listing every problem', async () => {
      const run = await runCli(['serve'], {
        AUTH_BROKER_PORT: 'eighty',
        AUTH_BROKER_CODEHOST_CREDENTIAL_REF: 'env:CODEHOST_TOKEN',
        AUTH_BROKER_ALLOWED_REPOS: 'acme/widgets,not a repo',
        AUTH_BROKER_TRUSTED_CIDRS: '10.0.0.0/33',
      });
      assert.equal(run.code, 2);
      for (const name of [
        'AUTH_BROKER_PORT',
        'AUTH_BROKER_CODEHOST_CREDENTIAL_REF',
        'AUTH_BROKER_ALLOWED_REPOS',
        'AUTH_BROKER_TRUSTED_CIDRS',
      ])
        assert.match(run.stderr, new RegExp(name));
    });
  });
});
