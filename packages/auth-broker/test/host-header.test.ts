import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../src/index.js';
import { assertFailure, REPO, startTestBroker, type Reply, type TestBroker } from './helpers.js';

/** One raw HTTP/1.1 exchange, so the request line and Host are exactly what a caller wrote. */
async function raw(port: number, head: string, body = ''): Promise<Reply> {
  const text = await new Promise<string>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c) => chunks.push(c));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.on('error', reject);
    socket.write(
      `${head}\r\nconnection: close\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
  });
  const [headText = '', rawBody = ''] = text.split('\r\n\r\n');
  const [statusLine = '', ...headerLines] = headText.split('\r\n');
  const headers = new Headers();
  for (const line of headerLines) {
    const i = line.indexOf(':');
    headers.append(line.slice(0, i).trim(), line.slice(i + 1).trim());
  }
  // Chunked bodies: keep the JSON between the chunk sizes.
  const json = rawBody.slice(rawBody.indexOf('{'), rawBody.lastIndexOf('}') + 1);
  let parsed: unknown = rawBody;
  try {
    parsed = JSON.parse(json);
  } catch {
    // not JSON
  }
  return { status: Number(statusLine.split(' ')[1]), body: parsed, raw: text, headers };
}

const READ = JSON.stringify({
  repo: REPO,
  operation: 'codehost.issue.read',
  params: { number: 1 },
});
const post = (target: string, hostLines: string) =>
  `POST ${target} HTTP/1.1\r\n${hostLines}content-type: application/json`;

describe('the broker answers only its own Host', () => {
  let t: TestBroker;
  before(async () => {
    t = await startTestBroker({
      env: { AUTH_BROKER_ALLOWED_HOSTS: 'svc-auth-broker.svc-v01-auth-broker.svc,Broker.Internal' },
    });
  });
  after(() => t.close());

  it('serves loopback literals and configured names, with or without a port', async () => {
    const port = t.broker.port;
    for (const host of [
      '127.0.0.1',
      `127.0.0.1:${port}`,
      '127.1.2.3',
      'localhost',
      `LOCALHOST:${port}`,
      '[::1]',
      `[::1]:${port}`,
      '[0:0:0:0:0:0:0:1]',
      '[::ffff:127.0.0.1]:80',
      'svc-auth-broker.svc-v01-auth-broker.svc',
      `svc-auth-broker.svc-v01-auth-broker.svc:${port}`,
      'broker.internal',
      'BROKER.INTERNAL:8081',
    ]) {
      const res = await raw(port, post('/v1/codehost/cli', `host: ${host}\r\n`), READ);
      assert.equal(res.status, 200, `${host}: ${res.raw}`);
    }
  });

  it('refuses every other Host as unauthorized-caller, before any upstream call, and audits it', async () => {
    const port = t.broker.port;
    const upstreamBefore = t.fake.requests.length;
    const auditBefore = (await t.audit()).length;
    const refused = [
      'evil.com',
      `evil.com:${port}`,
      '127.0.0.1.evil.com',
      `127.0.0.1.nip.io:${port}`,
      'localhost.evil.com',
      'localhost.',
      'evil-localhost',
      'svc-auth-broker.svc-v01-auth-broker.svc.evil.com',
      'broker.internal.',
      '0x7f.0.0.1',
      '2130706433',
      '0177.0.0.1',
      '127.0.0.1:0',
      '127.0.0.1:99999',
      '127.0.0.1:80:80',
      '127.0.0.1:http',
      'user@127.0.0.1',
      '127.0.0.1@evil.com',
      '10.0.0.1',
      '0.0.0.0',
      '::1',
      '[::2]',
      '[::ffff:10.0.0.1]',
      '[fe80::1]',
      '[::1',
      '[::1]evil.com',
      'local host',
      '',
    ];
    for (const host of refused) {
      const res = await raw(port, post('/v1/codehost/cli', `host: ${host}\r\n`), READ);
      assertFailure(res, 'unauthorized-caller', 'host-not-allowed');
    }
    // No Host at all, in HTTP/1.0 and 1.1; two Host headers; absolute-form targets elsewhere.
    for (const head of [
      'POST /v1/codehost/cli HTTP/1.1\r\ncontent-type: application/json',
      'POST /v1/codehost/cli HTTP/1.0\r\ncontent-type: application/json',
      post('/v1/codehost/cli', 'host: 127.0.0.1\r\nhost: evil.com\r\n'),
      post('http://evil.com/v1/codehost/cli', 'host: 127.0.0.1\r\n'),
      post('http://127.0.0.1.evil.com/v1/codehost/cli', 'host: localhost\r\n'),
      post('http://user@127.0.0.1/v1/codehost/cli', 'host: localhost\r\n'),
      'GET http://evil.com/health HTTP/1.1\r\nhost: 127.0.0.1',
    ]) {
      const res = await raw(port, head, head.startsWith('GET') ? '' : READ);
      assertFailure(res, 'unauthorized-caller', 'host-not-allowed');
    }
    // The health page is no exception: a rebinding page must not read it either.
    assertFailure(
      await raw(port, `GET /health HTTP/1.1\r\nhost: attacker.example`),
      'unauthorized-caller',
      'host-not-allowed',
    );
    assert.equal(t.fake.requests.length, upstreamBefore, 'nothing reached the code host');
    const audit = (await t.audit()).slice(auditBefore);
    assert.equal(audit.length, refused.length + 8, 'one audit line per refusal');
    for (const record of audit) {
      assert.equal(record.failureKind, 'unauthorized-caller');
      assert.equal(record.degradedReason, 'host-not-allowed');
      assert.equal(record.status, 403);
      assert.equal(record.upstream.sent, false);
    }
    // An absolute-form target naming the broker itself is served.
    const ok = await raw(
      port,
      post(`http://localhost:${port}/v1/codehost/cli`, 'host: localhost\r\n'),
      READ,
    );
    assert.equal(ok.status, 200, ok.raw);
  });

  it('takes its listen name as its own and refuses malformed names at start', () => {
    const base = { AUTH_BROKER_CODEHOST_CREDENTIAL_REF: 'env:BROKER_TEST_TOKEN' };
    assert.deepEqual(loadConfig({ ...base, AUTH_BROKER_HOST: 'Broker.Local' }).allowedHosts, [
      'broker.local',
    ]);
    assert.deepEqual(loadConfig({ ...base, AUTH_BROKER_HOST: '0.0.0.0' }).allowedHosts, []);
    for (const bad of ['evil.com:80', '*.evil.com', 'http://x', 'a..b', '-x.com'])
      assert.throws(
        () => loadConfig({ ...base, AUTH_BROKER_ALLOWED_HOSTS: bad }),
        /AUTH_BROKER_ALLOWED_HOSTS/,
        bad,
      );
  });
});
