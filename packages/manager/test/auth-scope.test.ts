import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Fastify from 'fastify';
import { registerApiScope, type RouteEntry } from '../src/http/api-scope.js';
import { CONSOLE_ROUTES } from '../src/http/console.js';
import { registerErrorHandling } from '../src/http/errors.js';
import type { App } from '../src/routes/common.js';
import { startTestManager, type TestManager } from './helpers.js';

const KEY = 'scope-test-key-0123456789';

/** Paths anyone may read: health, and the console's pages, static files and API docs (no data). */
const PUBLIC = [
  /^\/health(\/live|\/readiness)?$/,
  ...CONSOLE_ROUTES.map((path) => new RegExp(`^${path.replace('.', '\\.')}$`)),
  /^\/assets\//,
  /^\/docs(\/|$)/,
  /^\/openapi\.json$/,
];
const DATA_FREE_FAILURES = new Set(['auth-failed', 'auth-missing', 'not-found', 'schema-invalid']);

interface RawResponse {
  status: number;
  body: string;
}

/** One request exactly as written (request target, headers), over a fresh socket. */
function raw(
  port: number,
  method: string,
  target: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      resolve({ status, body: text.slice(text.indexOf('\r\n\r\n') + 4) });
    });
    const lines = [
      `${method} ${target} HTTP/1.1`,
      'host: 127.0.0.1',
      'connection: close',
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    ];
    if (body !== undefined)
      lines.push('content-type: application/json', `content-length: ${Buffer.byteLength(body)}`);
    // Not end(): a half-closed socket may be dropped before the answer is written.
    socket.write(`${lines.join('\r\n')}\r\n\r\n${body ?? ''}`);
  });
}

/** A concrete path for a route pattern (auth runs before validation: any id will do). */
const concrete = (url: string) =>
  url
    .replace(':runId', 'run-0000000000001')
    .replace(':commandId', 'cmd-0000000000001')
    .replace(':profile', 'builtin-a')
    .replace(/:[A-Za-z]+/g, 'x-00000001')
    .replace('*', 'anything');

/** Other spellings of the same path that a router, proxy or client might treat alike. */
function spellings(path: string, port: number): string[] {
  const rest = path.slice('/api/v1'.length);
  const encodeAll = (s: string) =>
    s
      .split('/')
      .map((seg) => [...seg].map((c) => `%${c.charCodeAt(0).toString(16)}`).join(''))
      .join('/');
  return [
    path,
    `/%61pi/v1${rest}`,
    `/api/%76%31${rest}`,
    encodeAll(path),
    `/api%2Fv1${rest}`,
    `/api/v1${rest.replaceAll('/', '%2F')}`,
    `//api/v1${rest}`,
    `/api//v1${rest}`,
    `/api/v1/${rest}`,
    `/x/../api/v1${rest}`,
    `/api/v1/./${rest.slice(1)}`,
    `/api/x/../v1${rest}`,
    `/API/v1${rest}`,
    `/Api/V1${rest}`,
    `${path}/`,
    `${path}?x=1`,
    `${path};x=1`,
    `http://127.0.0.1:${port}${path}`,
    `http://other.example${path}`,
    `HTTP://127.0.0.1:${port}/%61pi/v1${rest}`,
  ];
}

/** A refusal that gives nothing away: a known failure kind and no fields beyond the error body. */
function assertRefused(response: RawResponse, what: string, exact?: number): void {
  if (exact !== undefined) assert.equal(response.status, exact, `${what}: ${response.body}`);
  assert.ok(
    response.status >= 400 && response.status < 500,
    `${what} answered ${response.status}: ${response.body.slice(0, 300)}`,
  );
  if (response.body === '') return; // HEAD
  const body = JSON.parse(response.body) as Record<string, unknown>;
  assert.ok(DATA_FREE_FAILURES.has(String(body['failureKind'])), `${what}: ${response.body}`);
  assert.deepEqual(
    Object.keys(body)
      .filter((k) => !['failureKind', 'message', 'traceId', 'details'].includes(k))
      .sort(),
    [],
    `${what}: ${response.body}`,
  );
}

async function inBatches<T>(items: T[], size: number, fn: (item: T) => Promise<void>) {
  for (let i = 0; i < items.length; i += size) await Promise.all(items.slice(i, i + size).map(fn));
}

describe('deny by default, by structure', () => {
  let t: TestManager;
  let port: number;
  let routes: RouteEntry[];

  before(async () => {
    t = await startTestManager({ env: { SVC_API_KEY: KEY }, listen: true });
    port = Number(new URL(t.manager.url).port);
    routes = t.manager.routes();
  });
  after(() => t.close());

  it('holds every /api/v1 route in the authenticated scope; outside it, only public paths', () => {
    const api = routes.filter((r) => r.url.startsWith('/api/'));
    assert.ok(api.length >= 40, `enumerated ${api.length} API routes`);
    for (const route of routes) {
      if (route.authenticated) continue;
      assert.ok(
        PUBLIC.some((p) => p.test(route.url)),
        `${route.method} ${route.url} is outside the authenticated scope`,
      );
    }
    const publicData = routes.filter((r) => !r.authenticated && /^\/health/.test(r.url));
    assert.deepEqual([...new Set(publicData.map((r) => r.url))].sort(), [
      '/health',
      '/health/live',
      '/health/readiness',
    ]);
  });

  it('refuses every API route without a credential or with a wrong one, whatever the path spelling', async () => {
    const cases: Array<{ route: RouteEntry; target: string; canonical: boolean; auth?: string }> =
      [];
    for (const route of routes.filter((r) => r.authenticated)) {
      const path = concrete(route.url);
      for (const [i, target] of spellings(path, port).entries()) {
        const credentials =
          i === 0
            ? [undefined, `Bearer ${KEY}x`, 'Bearer svcr_forged', `Basic ${KEY}`, `Bearer  ${KEY}`]
            : [undefined, `Bearer ${KEY.slice(0, -1)}`];
        for (const auth of credentials)
          cases.push({ route, target, canonical: i === 0, ...(auth ? { auth } : {}) });
      }
    }
    let count = 0;
    await inBatches(cases, 16, async ({ route, target, canonical, auth }) => {
      const body = ['POST', 'PUT', 'PATCH'].includes(route.method) ? '{}' : undefined;
      const response = await raw(
        port,
        route.method,
        target,
        auth ? { authorization: auth } : {},
        body,
      );
      count++;
      assertRefused(
        response,
        `${route.method} ${target} (${auth ?? 'no credential'})`,
        canonical ? 401 : undefined,
      );
    });
    assert.equal(count, cases.length);
  });

  it("answers an unknown API path 401 without a key, 404 with one; elsewhere the console's not-found page", async () => {
    assertRefused(await raw(port, 'GET', '/api/v1/no-such-thing'), 'unknown API path', 401);
    const known = await raw(port, 'GET', '/api/v1/no-such-thing', {
      authorization: `Bearer ${KEY}`,
    });
    assert.equal(known.status, 404);
    for (const target of ['/api', '/api/v2/runs', '/health/../api/v1/runs', '/health/nope']) {
      const response = await raw(port, 'GET', target);
      assertRefused(response, target);
      assert.ok(!/run-|"runs"/.test(response.body), response.body);
    }
    // Any other path is a console address: 404 with the console page, which holds no data.
    for (const target of ['/nothing', '/healthz', '/runs/run-0000000000001/x']) {
      const response = await raw(port, 'GET', target);
      assert.equal(response.status, 404, target);
      assert.match(response.body, /<div id="app"><\/div>/, target);
      assert.ok(!response.body.includes(KEY) && !/"runs"/.test(response.body), target);
    }
  });

  it('serves health without a credential and the API with any configured key', async () => {
    for (const path of ['/health', '/health/live', '/health/readiness']) {
      const response = await raw(port, 'GET', path);
      assert.equal(response.status, 200, path);
      assert.ok(!response.body.includes(KEY));
    }
    const ok = await raw(port, 'GET', '/api/v1/backends', { authorization: `Bearer ${KEY}` });
    assert.equal(ok.status, 200);
    const lower = await raw(port, 'GET', '/api/v1/backends', { authorization: `bearer ${KEY}` });
    assert.equal(lower.status, 200, 'the scheme is case-insensitive');
  });
});

describe('API keys', () => {
  it('accepts each key of a rotation list (SVC_API_KEY comma-separated plus SVC_API_KEY_FILE lines)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'svc-keys-'));
    const file = join(dir, 'keys');
    await writeFile(file, '# current and next\nkey-from-file-one\n\nkey-from-file-two\n');
    const t = await startTestManager({
      env: { SVC_API_KEY: 'inline-key-old, inline-key-new', SVC_API_KEY_FILE: file },
    });
    try {
      for (const key of [
        'inline-key-old',
        'inline-key-new',
        'key-from-file-one',
        'key-from-file-two',
      ]) {
        const response = await t.api('GET', '/api/v1/backends', undefined, {
          authorization: `Bearer ${key}`,
        });
        assert.equal(response.status, 200, key);
      }
      for (const wrong of [
        'inline-key-old,inline-key-new',
        'inline-key',
        'key-from-file-one\nkey-from-file-two',
        '# current and next',
        'key-from-file-ONE',
      ]) {
        const response = await t.api('GET', '/api/v1/backends', undefined, {
          authorization: `Bearer ${wrong}`,
        });
        assert.equal(response.status, 401, JSON.stringify(wrong));
        assert.equal(response.body.failureKind, 'auth-failed');
      }
      const logs = t.logs.join('');
      for (const key of ['inline-key-old', 'inline-key-new', 'key-from-file-one'])
        assert.ok(!logs.includes(key), 'no key in the logs');
    } finally {
      await t.close();
    }
  });

  it('answers auth-missing 503 on every spelling in a runtime deployment without a key', async () => {
    const t = await startTestManager({ env: { SVC_DEPLOYMENT_MODE: 'runtime' }, listen: true });
    const port = Number(new URL(t.manager.url).port);
    try {
      for (const target of [
        '/api/v1/provider-profiles',
        '/%61pi/v1/provider-profiles',
        `http://x/api/v1/provider-profiles`,
      ]) {
        const response = await raw(port, 'GET', target);
        assert.equal(response.status, 503, target);
        assert.equal(JSON.parse(response.body).failureKind, 'auth-missing');
      }
      const put = await raw(
        port,
        'PUT',
        '/%61pi/v1/provider-profiles/builtin-a/credential',
        {},
        JSON.stringify({ apiKey: 'sk-attacker-0000000000000000' }),
      );
      assert.equal(put.status, 503);
      assert.equal((await raw(port, 'GET', '/health/live')).status, 200);
    } finally {
      await t.close();
    }
  });
});

describe('the scope guard', () => {
  it('refuses to start when an /api route is registered outside the authenticated scope', async () => {
    for (const stray of ['/api/v1/leak', '/API/v1/leak', '/api/v2/leak', '//api/v1/leak']) {
      const app = Fastify() as unknown as App;
      registerErrorHandling(app);
      await registerApiScope(
        app,
        { apiKeys: [KEY], deploymentMode: 'local', db: undefined as never },
        (api) => {
          api.get('/api/v1/fine', () => ({ ok: true }));
        },
      );
      app.get(stray, () => ({ secret: true }));
      await assert.rejects(
        async () => {
          await app.ready();
        },
        /authenticated API scope/,
        stray,
      );
      await app.close().catch(() => undefined);
    }
    const ok = Fastify() as unknown as App;
    registerErrorHandling(ok);
    await registerApiScope(
      ok,
      { apiKeys: [KEY], deploymentMode: 'local', db: undefined as never },
      (api) => {
        api.get('/api/v1/fine', () => ({ ok: true }));
      },
    );
    ok.get('/health', () => ({ status: 'ok' }));
    await ok.ready();
    const refused = await ok.inject({ method: 'GET', url: '/%61pi/v1/fine' });
    assert.equal(refused.statusCode, 401);
    const allowed = await ok.inject({
      method: 'GET',
      url: '/api/v1/fine',
      headers: { authorization: `Bearer ${KEY}` },
    });
    assert.equal(allowed.statusCode, 200);
    await ok.close();
  });
});
