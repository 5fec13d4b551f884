import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { runBody, startTestManager, type TestManager } from './helpers.js';

/**
 * One body parser for every route: deep or huge bodies are structured 4xx answers that the
 * client can read, strings are made storable, prototype keys are dropped, and repository
 * addresses never carry credentials.
 */

let t: TestManager;
let port: number;
const CREDENTIAL = '/api/v1/provider-profiles/builtin-a/credential';

before(async () => {
  t = await startTestManager({ listen: true, env: { SVC_BODY_LIMIT_BYTES: String(64 * 1024) } });
  port = Number(new URL(t.manager.url).port);
  await t.configureProfile('builtin-a');
});
after(() => t?.close());

interface RawAnswer {
  status: number;
  body: string;
  closed: boolean;
}

/**
 * Send a request over a plain socket, the body written in chunks as a slow client would, and
 * read the first answer; then, when the connection stays open, a second request on it.
 */
function rawRequest(head: string, chunks: Buffer[], second?: string): Promise<RawAnswer[]> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    let closed = false;
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
    socket.on('error', () => (closed = true));
    socket.on('close', () => {
      closed = true;
      resolve(parseAnswers(received, closed));
    });
    socket.setTimeout(20_000, () => reject(new Error(`no answer: ${received.slice(0, 200)}`)));
    socket.write(head);
    const writeNext = (i: number) => {
      if (i >= chunks.length) {
        if (second) setTimeout(() => socket.write(second), 200);
        setTimeout(() => socket.end(), second ? 1500 : 500);
        return;
      }
      if (socket.destroyed) return;
      socket.write(chunks[i]!, () => writeNext(i + 1));
    };
    writeNext(0);
  });
}

function parseAnswers(text: string, closed: boolean): RawAnswer[] {
  const answers: RawAnswer[] = [];
  let rest = text;
  while (rest.startsWith('HTTP/1.1')) {
    const headEnd = rest.indexOf('\r\n\r\n');
    const head = rest.slice(0, headEnd);
    const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
    const body = rest.slice(headEnd + 4, headEnd + 4 + length);
    answers.push({ status: Number(head.split(' ')[1]), body, closed });
    rest = rest.slice(headEnd + 4 + length);
  }
  return answers;
}

const jsonHead = (path: string, extra: string) =>
  `PUT ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n${extra}\r\n`;

describe('body limits', () => {
  it('answers a body over the limit with a readable 413, then serves the same connection', async () => {
    const size = 2 * 1024 * 1024;
    const chunks = Array.from({ length: 32 }, () => Buffer.alloc(size / 32, 0x61));
    const second = 'GET /health HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n';
    const [first, next] = await rawRequest(
      jsonHead(CREDENTIAL, `content-length: ${size}\r\n`),
      chunks,
      second,
    );
    assert.equal(first?.status, 413);
    assert.equal(JSON.parse(first.body).failureKind, 'body-too-large');
    assert.equal(next?.status, 200, 'the connection was drained and kept');
  });

  it('answers an oversized chunked body with a readable 413', async () => {
    const piece = Buffer.alloc(16 * 1024, 0x61);
    const chunks = [
      ...Array.from({ length: 16 }, () =>
        Buffer.concat([
          Buffer.from(`${piece.length.toString(16)}\r\n`),
          piece,
          Buffer.from('\r\n'),
        ]),
      ),
      Buffer.from('0\r\n\r\n'),
    ];
    const [first] = await rawRequest(
      jsonHead('/api/v1/runs', 'transfer-encoding: chunked\r\n'),
      chunks,
    );
    assert.equal(first?.status, 413);
    assert.equal(JSON.parse(first.body).failureKind, 'body-too-large');
  });

  it('refuses deep nesting on every kind of route, the credential route included', async () => {
    for (const depth of [65, 10_000, 60_000]) {
      const text = `{"apiKey":"sk-${'x'.repeat(30)}","config":${'['.repeat(depth)}${']'.repeat(depth)}}`;
      for (const [method, path] of [
        ['PUT', CREDENTIAL],
        ['POST', '/api/v1/runs'],
        ['POST', '/api/v1/queue/tasks'],
      ] as const) {
        const res = await t.api(method, path, text);
        assert.equal(res.status, depth * 2 + 60 > 64 * 1024 ? 413 : 400, `${path} ${depth}`);
        assert.equal(typeof res.body.failureKind, 'string');
      }
    }
    // 64 levels are accepted by the parser (the schema then judges the shape).
    const ok = await t.api(
      'POST',
      '/api/v1/runs',
      runBody({ metadata: { deep: JSON.parse(`${'['.repeat(60)}1${']'.repeat(60)}`) } }),
    );
    assert.equal(ok.status, 201, ok.raw);
  });
});

describe('strings and keys', () => {
  it('replaces lone surrogates, refuses U+0000 and drops prototype keys', async () => {
    const text = `{"tenantId":"tenant-a","projectId":"proj-1","workspaceRef":{"kind":"opaque"},"providerId":"openai","backendProfile":"builtin-a","traceSink":null,"metadata":{"s":"a\\ud800b","\\udfffk":1,"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}}}}`;
    await t.configureProfile('builtin-a');
    const res = await t.api('POST', '/api/v1/runs', text);
    assert.equal(res.status, 201, res.raw);
    assert.equal(res.body.metadata.s, 'a\ufffdb');
    assert.equal(res.body.metadata['\ufffdk'], 1);
    assert.equal(Object.hasOwn(res.body.metadata, '__proto__'), false);
    assert.deepEqual(res.body.metadata.constructor, { prototype: { x: 1 } });
    assert.equal(({} as Record<string, unknown>)['polluted'], undefined);

    for (const nul of ['"prompt":"a\\u0000b"', '"pro\\u0000mpt":"x"']) {
      const refused = await t.api(
        'POST',
        `/api/v1/runs/${res.body.runId as string}/commands`,
        `{"type":"turn","payload":{${nul}}}`,
      );
      assert.equal(refused.status, 400, refused.raw);
      assert.match(refused.body.message, /U\+0000/);
    }
  });

  it('keeps the key of a credential write as sent, even once it is a registered secret', async () => {
    const key = `sk-proj-${'Ab1'.repeat(12)}`;
    const body = {
      apiKey: key,
      config: { model: 'm', baseUrl: 'https://provider.example/v1' },
      delegatedBy: { system: 'lab', requestId: 'r1' },
    };
    assert.equal((await t.api('PUT', CREDENTIAL, body)).status, 200);
    // Written again: the now-registered key is not masked on its way into the Secret.
    assert.equal((await t.api('PUT', CREDENTIAL, body)).status, 200);
    const secret = await t.manager.secrets.get('svc-v01-provider-builtin-a');
    assert.equal(JSON.parse(secret!.data['auth.json']!.toString()).OPENAI_API_KEY, key);
  });
});

describe('repository addresses', () => {
  it('refuses user info in every repoUrl a caller may send', async () => {
    await t.configureProfile('builtin-a');
    const bad = [
      'https://user:pass@github.com/o/r.git',
      'https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/o/r',
      'HTTPS://u:p@host/x',
      'https:\\\\u:p@host/x',
      'https:u:p@host/x',
      ' https://u:p@host/x',
      'https://u%3Ap@host/x',
      'user:pass@host:o/r.git',
    ];
    for (const repoUrl of bad) {
      for (const body of [
        runBody({ workspaceRef: { kind: 'git', repoUrl } }),
        runBody({ resourceBundleRef: { kind: 'gitbundle', repoUrl } }),
        runBody({
          resourceBundleRef: {
            kind: 'gitbundle',
            repoUrl: 'https://github.com/o/r.git',
            bundles: [{ repoUrl, subpath: '.', target_path: 'x' }],
          },
        }),
      ]) {
        const res = await t.api('POST', '/api/v1/runs', body);
        assert.equal(res.status, 400, `${repoUrl}: ${res.raw}`);
        assert.equal(res.body.failureKind, 'schema-invalid');
        assert.doesNotMatch(res.raw, /pass@|u:p@|ghp_/);
      }
    }
    for (const repoUrl of ['https://github.com/o/r.git', 'git@github.com:o/r.git']) {
      const res = await t.api(
        'POST',
        '/api/v1/runs',
        runBody({ workspaceRef: { kind: 'git', repoUrl } }),
      );
      assert.equal(res.status, 201, `${repoUrl}: ${res.raw}`);
    }
  });
});
