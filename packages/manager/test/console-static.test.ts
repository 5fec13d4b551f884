import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { loadConsoleSite, negotiate } from '../src/http/console-files.js';
import { startTestManager, type TestManager } from './helpers.js';

const KEY = 'console-static-key-0123456789abcdef';
let t: TestManager;
before(async () => {
  t = await startTestManager({ env: { SVC_API_KEY: KEY } });
});
after(() => t.close());

const get = (url: string, headers: Record<string, string> = {}) =>
  t.manager.app.inject({ method: 'GET', url, headers });
const bundleOf = async () => {
  const index = (await get('/')).body;
  const js = /src="(\/assets\/[^"]+\.js)"/.exec(index)?.[1];
  assert.ok(js, 'index.html names its script');
  return js;
};

describe('the web console is served at / without auth and holds no data', () => {
  it('answers index.html for / and every client route, with a same-origin-only policy', async () => {
    for (const url of ['/', '/index.html', '/runs', '/runs/run-abcd1234', '/sessions', '/queue']) {
      const response = await get(url);
      assert.equal(response.statusCode, 200, url);
      assert.match(String(response.headers['content-type']), /^text\/html/);
      assert.match(response.body, /<div id="app"><\/div>/);
      const csp = String(response.headers['content-security-policy']);
      assert.match(csp, /default-src 'none'/);
      assert.match(csp, /connect-src 'self'/);
      assert.equal(response.headers['x-content-type-options'], 'nosniff');
      assert.ok(!response.body.includes(KEY));
    }
  });

  it('serves the built assets by exact name, immutable, and nothing else', async () => {
    const index = (await get('/')).body;
    const assets = [...index.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    assert.ok(assets.some((a) => a.endsWith('.js')) && assets.some((a) => a.endsWith('.css')));
    for (const asset of assets) {
      const response = await get(asset);
      assert.equal(response.statusCode, 200, asset);
      assert.match(String(response.headers['cache-control']), /immutable/);
      // No third-party origin in the bundle (no CDN, no web fonts): only XML namespace names
      // and the Markdown library's bug-report text, neither of which is ever fetched.
      const urls = [...response.body.matchAll(/https?:\/\/[a-z0-9.-]+[^\s"'`)]*/gi)].map(
        (m) => m[0],
      );
      const foreign = urls.filter(
        (u) => !u.startsWith('http://www.w3.org/') && !u.startsWith('https://github.com/markedjs/'),
      );
      assert.deepEqual(foreign, [], asset);
    }
    for (const probe of [
      '/assets/missing.js',
      '/assets/..%2f..%2fpackage.json',
      '/assets/%2e%2e%2f%2e%2e%2fpackage.json',
      '/assets/..%5c..%5cpackage.json',
      '/assets/',
    ]) {
      const response = await get(probe);
      assert.ok([404, 400].includes(response.statusCode), `${probe}: ${response.statusCode}`);
      assert.doesNotMatch(response.body, /"name":|"dependencies"/);
    }
  });

  it('leaves the API authenticated and its unknown paths JSON failures', async () => {
    const unauth = await get('/api/v1/runs/run-abcd1234');
    assert.equal(unauth.statusCode, 401);
    assert.equal(JSON.parse(unauth.body).failureKind, 'auth-failed');
    const unknownUnauth = await get('/api/v1/no-such-route', { accept: 'text/html' });
    assert.equal(unknownUnauth.statusCode, 401);
    const missing = await t.api('GET', '/api/v1/no-such-route');
    assert.equal(missing.status, 404);
    assert.equal(missing.body.failureKind, 'not-found');
    for (const url of [
      '/health/nope',
      '/metrics/nope',
      '/docs/nope/x',
      '/api',
      '/api/v2/x',
      '/API/v1/runs',
      '/%61pi/v1/x',
      '//api/v1/x',
      '/x/../api/v1/x',
      '/api%2Fv1/x',
      '/%2561pi/v1/x',
      '/health/../api/v1/runs',
    ]) {
      const response = await get(url, { accept: 'text/html' });
      assert.ok([404, 401].includes(response.statusCode), url);
      assert.match(String(response.headers['content-type']), /json/, url);
    }
    // A client that asks for JSON only (a script) keeps the JSON answer.
    const script = await get('/no-such-page', { accept: 'application/json' });
    assert.equal(script.statusCode, 404);
    assert.equal(JSON.parse(script.body).failureKind, 'not-found');
    const post = await t.manager.app.inject({ method: 'POST', url: '/no-such-page' });
    assert.equal(post.statusCode, 404);
    assert.equal(JSON.parse(post.body).failureKind, 'not-found');
  });

  it("answers an unknown console path with the console's own not-found page, not JSON", async () => {
    const accepts = ['text/html,application/xhtml+xml,*/*;q=0.8', '*/*', undefined];
    for (const [i, url] of [
      '/no-such-page',
      '/runs/run-abc/extra',
      '/sessionz?x=1',
      '/tasks',
    ].entries()) {
      const accept = accepts[i % accepts.length];
      const response = await get(url, accept ? { accept } : {});
      assert.equal(response.statusCode, 404, url);
      assert.match(String(response.headers['content-type']), /^text\/html/, url);
      assert.match(response.body, /<div id="app"><\/div>/, url);
      assert.doesNotMatch(response.body, /failureKind/, url);
      assert.match(String(response.headers['content-security-policy']), /default-src 'none'/);
      assert.equal(response.headers['cache-control'], 'no-cache');
    }
    // The task page is a console route.
    assert.equal((await get('/tasks/tsk-abcd1234')).statusCode, 200);
  });

  it('sends the bundle compressed as the browser accepts (brotli, gzip), with caching kept', async () => {
    const js = await bundleOf();
    const plain = await get(js);
    assert.equal(plain.headers['content-encoding'], undefined);
    assert.equal(plain.headers['vary'], 'accept-encoding');
    const original = plain.rawPayload;
    const cases: [string, string | undefined][] = [
      ['gzip, deflate, br, zstd', 'br'],
      ['br', 'br'],
      ['gzip', 'gzip'],
      ['gzip;q=1, br;q=0.5', 'gzip'],
      ['br;q=0, gzip', 'gzip'],
      ['*', 'br'],
      ['*;q=0.5, br;q=0', 'gzip'],
      ['identity', undefined],
      ['br;q=0, gzip;q=0', undefined],
      ['deflate', undefined],
    ];
    for (const [accept, expected] of cases) {
      const response = await get(js, { 'accept-encoding': accept });
      assert.equal(response.statusCode, 200, accept);
      assert.equal(response.headers['content-encoding'], expected, accept);
      assert.equal(response.headers['vary'], 'accept-encoding', accept);
      assert.match(String(response.headers['cache-control']), /max-age=31536000, immutable/);
      assert.match(String(response.headers['content-type']), /^text\/javascript/);
      assert.equal(Number(response.headers['content-length']), response.rawPayload.length);
      const body =
        expected === 'br'
          ? brotliDecompressSync(response.rawPayload)
          : expected === 'gzip'
            ? gunzipSync(response.rawPayload)
            : response.rawPayload;
      assert.ok(body.equals(original), `${accept}: the same bytes once decoded`);
      if (expected) assert.ok(response.rawPayload.length < original.length / 2, accept);
    }
    // The compressed forms are no files of their own.
    assert.equal((await get(`${js}.br`)).statusCode, 404);
    assert.equal((await get(`${js}.gz`)).statusCode, 404);
  });
});

describe('a console built without compressed forms', () => {
  it('is compressed on first use and the result kept', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'svc-console-site-'));
    try {
      await mkdir(join(dir, 'assets'));
      const script = Buffer.from(
        'console.log("a console without .br or .gz files");\n'.repeat(200),
      );
      await writeFile(join(dir, 'index.html'), '<!doctype html><div id="app"></div>');
      await writeFile(join(dir, 'assets', 'app-1.js'), script);
      await writeFile(join(dir, 'assets', 'tiny-1.css'), 'a{}');
      await writeFile(join(dir, 'assets', 'notes.txt'), 'not a console file type');
      const site = loadConsoleSite(dir);
      assert.deepEqual([...site.assets.keys()].sort(), ['app-1.js', 'tiny-1.css']);
      const app = site.assets.get('app-1.js')!;
      assert.equal(negotiate('gzip, br', app), 'br');
      const br = app.variant('br')!;
      assert.ok(brotliDecompressSync(br).equals(script));
      assert.equal(app.variant('br'), br, 'kept, not compressed again');
      assert.ok(gunzipSync(app.variant('gzip')!).equals(script));
      // Too small to gain: sent as it is.
      assert.equal(negotiate('gzip, br', site.assets.get('tiny-1.css')!), null);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
