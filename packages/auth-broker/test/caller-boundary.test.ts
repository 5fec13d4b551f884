import assert from 'node:assert/strict';
import { networkInterfaces } from 'node:os';
import { describe, it } from 'node:test';
import { CallerBoundary, parseCidr, type Cidr } from '../src/http/caller-boundary.js';
import { assertFailure, REPO, startTestBroker, type Reply } from './helpers.js';

function externalAddress(): string | null {
  for (const list of Object.values(networkInterfaces()))
    for (const entry of list ?? [])
      if (entry.family === 'IPv4' && !entry.internal) return entry.address;
  return null;
}

async function call(url: string, init: RequestInit = {}): Promise<Reply> {
  const res = await fetch(url, init);
  const raw = await res.text();
  return { status: res.status, raw, body: JSON.parse(raw), headers: res.headers };
}

const cidr = (text: string) => parseCidr(text) as Cidr;

describe('caller boundary', () => {
  it('admits loopback always and listed networks only', () => {
    const boundary = new CallerBoundary([cidr('10.20.0.0/16'), cidr('fd00::/8')]);
    for (const ok of [
      '127.0.0.1',
      '127.8.9.10',
      '::1',
      '::ffff:127.0.0.1',
      '10.20.3.4',
      '::ffff:10.20.3.4',
      'fd00::5',
    ])
      assert.equal(boundary.allows(ok), true, ok);
    for (const no of [
      '10.21.0.1',
      '192.168.1.1',
      '::ffff:192.168.1.1',
      '2001:db8::1',
      '',
      undefined,
      'localhost',
    ])
      assert.equal(boundary.allows(no), false, String(no));
  });

  it('refuses a caller outside loopback over the network, whatever it claims', async (ctx) => {
    const address = externalAddress();
    if (!address) return ctx.skip('no non-loopback interface on this machine');
    const t = await startTestBroker({ env: { AUTH_BROKER_HOST: '0.0.0.0' } });
    try {
      const base = `http://${address}:${t.broker.port}`;
      assertFailure(
        await call(`${base}/health`, { headers: { 'x-forwarded-for': '127.0.0.1' } }),
        'unauthorized-caller',
      );
      const res = await call(`${base}/v1/codehost/pr-preflight`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', forwarded: 'for=127.0.0.1' },
        body: JSON.stringify({ repo: REPO, base: 'main', head: 'x', issueNumber: 1 }),
      });
      assertFailure(res, 'unauthorized-caller', 'caller-not-trusted');
      assert.equal(t.fake.requests.length, 0);
      // The same broker still serves loopback.
      assert.equal((await call(`${t.url}/health`)).status, 200);
    } finally {
      await t.close();
    }
  });

  it('admits a caller from AUTH_BROKER_TRUSTED_CIDRS', async (ctx) => {
    const address = externalAddress();
    if (!address) return ctx.skip('no non-loopback interface on this machine');
    const t = await startTestBroker({
      env: {
        AUTH_BROKER_HOST: '0.0.0.0',
        AUTH_BROKER_TRUSTED_CIDRS: `${address}/32`,
        AUTH_BROKER_ALLOWED_HOSTS: address,
      },
    });
    try {
      const res = await call(`http://${address}:${t.broker.port}/v1/codehost/cli`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          repo: REPO,
          operation: 'codehost.issue.read',
          params: { number: 1 },
        }),
      });
      assert.equal(res.status, 200, res.raw);
      assert.equal((await t.audit()).at(-1)!.caller.address, address);
      assert.deepEqual((await call(`${t.url}/health`)).body.callerBoundary, {
        loopback: true,
        trustedCidrs: [`${address}/32`],
      });
    } finally {
      await t.close();
    }
  });
});
