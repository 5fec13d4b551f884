import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runBody, startTestManager, type TestManager } from './helpers.js';

const KEY = 'http-methods-test-key-0123456789';
let t: TestManager;
before(async () => {
  t = await startTestManager({ env: { SVC_API_KEY: KEY } });
  await t.configureProfile('builtin-a');
});
after(() => t.close());

describe('a wrong method on a known path', () => {
  it('is 405 with an Allow header listing the methods the path takes', async () => {
    for (const [method, path, allow] of [
      ['DELETE', '/api/v1/runs', 'GET, HEAD, POST'],
      ['PATCH', '/api/v1/runs/run-unknown-0001', 'GET, HEAD'],
      ['PUT', '/api/v1/runs/run-x/commands', 'GET, HEAD, POST'],
      ['POST', '/health/live', 'GET, HEAD'],
      ['DELETE', '/metrics', 'GET, HEAD'],
    ] as const) {
      const answer = await t.api(method, path);
      assert.equal(answer.status, 405, `${method} ${path}: ${answer.raw}`);
      assert.equal(answer.headers['allow'], allow, `${method} ${path}`);
      assert.equal(answer.body.failureKind, 'method-not-allowed');
      assert.ok(answer.body.traceId);
    }
  });

  it('an unknown path stays 404, and the API tells nothing before the key is checked', async () => {
    assert.equal((await t.api('POST', '/api/v1/nothing-here')).status, 404);
    assert.equal((await t.api('GET', '/api/v1/runs/a/b/c/d')).status, 404);
    const anonymous = await t.api('DELETE', '/api/v1/runs', undefined, { authorization: '' });
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.headers['allow'], undefined);
  });
});

describe('a body that is not JSON', () => {
  it('is 415 unsupported-media-type, whatever the route', async () => {
    const body = JSON.stringify(runBody());
    for (const type of ['text/plain', 'application/xml', 'application/x-www-form-urlencoded']) {
      const answer = await t.api('POST', '/api/v1/runs', body, { 'content-type': type });
      assert.equal(answer.status, 415, `${type}: ${answer.raw}`);
      assert.equal(answer.body.failureKind, 'unsupported-media-type');
    }
    const command = await t.api('POST', '/api/v1/runs/run-x/commands', 'x', {
      'content-type': 'text/plain',
    });
    assert.equal(command.status, 415);
  });

  it('JSON with a charset is accepted', async () => {
    const answer = await t.api('POST', '/api/v1/runs', JSON.stringify(runBody()), {
      'content-type': 'application/json; charset=utf-8',
    });
    assert.equal(answer.status, 201, answer.raw);
  });
});
