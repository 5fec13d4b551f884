import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTestManager, type TestManager } from './helpers.js';

const KEY = 'console-static-key-0123456789abcdef';
let t: TestManager;
before(async () => {
  t = await startTestManager({ env: { SVC_API_KEY: KEY } });
});
after(() => t.close());

const get = (url: string) => t.manager.app.inject({ method: 'GET', url });

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
    const missing = await t.api('GET', '/api/v1/no-such-route');
    assert.equal(missing.status, 404);
    assert.equal(missing.body.failureKind, 'not-found');
    const other = await get('/no-such-page');
    assert.equal(other.statusCode, 404);
  });
});
