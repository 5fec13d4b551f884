import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { FAILURE_KINDS } from '@svc/contracts';
import { startTestManager, type TestManager } from './helpers.js';
import { CONSOLE_ROUTES } from '../src/http/console.js';

const KEY = 'openapi-test-key-0123456789';
let t: TestManager;
let doc: any;
before(async () => {
  t = await startTestManager({ env: { SVC_API_KEY: KEY } });
  const response = await t.api('GET', '/openapi.json', undefined, { authorization: '' });
  assert.equal(response.status, 200, response.raw);
  doc = response.body;
});
after(() => t.close());

/** Fastify's `/runs/:runId` is OpenAPI's `/runs/{runId}`. */
const openApiPath = (url: string) => url.replace(/:(\w+)/g, '{$1}');

describe('/openapi.json', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    assert.equal(doc.openapi, '3.1.0');
    const validator = new Validator();
    const result = await validator.validate(doc);
    assert.ok(result.valid, JSON.stringify(result.errors, null, 2)?.slice(0, 4000));
  });

  it('covers every registered route, with its failure responses and auth', () => {
    const missing: string[] = [];
    let checked = 0;
    for (const route of t.manager.routes()) {
      if (
        route.method === 'HEAD' ||
        /^\/(docs|openapi\.json|assets|index\.html|$)/.test(route.url) ||
        (CONSOLE_ROUTES as readonly string[]).includes(route.url)
      )
        continue;
      checked += 1;
      const operation = doc.paths?.[openApiPath(route.url)]?.[route.method.toLowerCase()];
      if (!operation) {
        missing.push(`${route.method} ${route.url}`);
        continue;
      }
      const publicRoute = route.url.startsWith('/health');
      assert.deepEqual(
        operation.security ?? doc.security,
        publicRoute ? [] : [{ bearer: [] }],
        `${route.method} ${route.url} security`,
      );
      if (route.url.startsWith('/api/v1')) {
        // Each error status is listed (openapi-operations.test.ts checks them all).
        const failure = operation.responses?.['400'];
        assert.ok(failure, `${route.method} ${route.url} documents its failures`);
        const schema = failure.content?.['application/json']?.schema;
        assert.deepEqual(
          [...(schema?.required ?? [])].sort(),
          ['failureKind', 'message', 'traceId'],
          `${route.method} ${route.url} failure schema`,
        );
      }
    }
    assert.deepEqual(missing, []);
    assert.ok(checked > 40, `only ${checked} routes checked`);
    for (const path of ['/api/v1/runs', '/api/v1/runs/{runId}/events/stream', '/metrics'])
      assert.ok(doc.paths[path], path);
    assert.equal(doc.components.securitySchemes.bearer.scheme, 'bearer');
    assert.ok(Object.keys(FAILURE_KINDS).length > 0);
  });

  it('documents the listing filters and the waits', () => {
    const params = (path: string) =>
      (doc.paths[path].get.parameters as any[]).map((p) => `${p.in}:${p.name}`).sort();
    for (const name of [
      'tenantId',
      'projectId',
      'state',
      'backendProfile',
      'sessionId',
      'createdAfter',
      'createdBefore',
      'cursor',
      'limit',
    ])
      assert.ok(params('/api/v1/runs').includes(`query:${name}`), name);
    for (const name of ['activity', 'lastOutcome'])
      assert.ok(params('/api/v1/runs').includes(`query:${name}`), name);
    assert.ok(params('/api/v1/runs/{runId}/events').includes('query:waitMs'));
    assert.ok(params('/api/v1/runs/{runId}/result').includes('query:waitMs'));
  });
});

describe('the run and task records it describes', () => {
  const resolve = (schema: any): any => {
    const ref = schema?.$ref as string | undefined;
    return ref ? resolve(doc.components.schemas[ref.split('/').at(-1)!]) : schema;
  };
  const response = (path: string, method = 'get', status = '200') =>
    resolve(doc.paths[path][method].responses[status].content['application/json'].schema);

  it('a run carries activity and lastCommand', () => {
    const run = response('/api/v1/runs/{runId}');
    assert.ok(run.required.includes('activity') && run.required.includes('lastCommand'));
    assert.deepEqual(run.properties.activity.enum, [
      'waiting-runner',
      'turn-active',
      'idle',
      'closed',
    ]);
    const last = resolve(run.properties.lastCommand.anyOf.find((s: any) => s.type !== 'null'));
    assert.deepEqual(Object.keys(last.properties).sort(), [
      'commandId',
      'endedAt',
      'failureKind',
      'message',
      'state',
      'type',
    ]);
    const listed = resolve(response('/api/v1/runs').properties.runs.items);
    assert.ok(listed.required.includes('activity'));
  });

  it('a task carries waiting, with its reason, message, until and limit', () => {
    const task = response('/api/v1/queue/tasks/{taskId}');
    assert.ok(task.required.includes('waiting'));
    const waiting = resolve(task.properties.waiting.anyOf.find((s: any) => s.type !== 'null'));
    assert.deepEqual(Object.keys(waiting.properties).sort(), [
      'limit',
      'message',
      'reason',
      'until',
    ]);
    const summary = resolve(response('/api/v1/queue/tasks').properties.tasks.items);
    assert.ok(summary.required.includes('waiting'));
  });
});

describe('/docs', () => {
  it('serves the API reference from local assets, without a key', async () => {
    const page = await t.api('GET', '/docs/', undefined, { authorization: '' });
    assert.equal(page.status, 200, page.raw.slice(0, 300));
    assert.match(String(page.headers['content-type']), /text\/html/);
    // Every script and stylesheet is served by the manager itself: no CDN.
    const refs = [...page.raw.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    assert.ok(refs.length > 0);
    for (const ref of refs) assert.ok(!/^(https?:)?\/\//.test(ref), `external asset ${ref}`);
    const script = refs.find((r) => r.endsWith('.js'))!;
    const asset = await t.api('GET', new URL(script, 'http://x/docs/').pathname, undefined, {
      authorization: '',
    });
    assert.equal(asset.status, 200);
  });
});
