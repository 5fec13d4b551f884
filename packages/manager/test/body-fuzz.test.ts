import assert from 'node:assert/strict';
import { Agent, request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { runBody, startTestManager, type TestManager } from './helpers.js';

/**
 * Property: every POST, PUT and PATCH route the app registers (read from the app's own route
 * table, so a new route is covered the day it is added) answers any body — deep nesting, huge
 * strings, U+0000, lone surrogates, invalid UTF-8, prototype keys, wrong shapes — with a
 * complete answer below 500, over a real connection that is never cut before the answer.
 */

let t: TestManager;
let base: URL;
let runId: string;
const agent = new Agent({ keepAlive: true, maxSockets: 2 });

before(async () => {
  t = await startTestManager({ listen: true, env: { LOG_LEVEL: 'warn' } });
  base = new URL(t.manager.url);
  await t.configureProfile('builtin-a');
  const run = await t.api('POST', '/api/v1/runs', runBody());
  assert.equal(run.status, 201, run.raw);
  runId = run.body.runId as string;
});
after(async () => {
  agent.destroy();
  await t?.close();
});

interface Answer {
  status: number;
  body: string;
}

/** One request over the shared keep-alive agent; a cut connection rejects. */
function send(method: string, path: string, body: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        agent,
        host: base.hostname,
        port: base.port,
        method,
        path,
        headers: { 'content-type': 'application/json', 'content-length': body.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Route parameters: the fixture run, ids that exist nowhere, a profile nobody configured. */
function fill(url: string): string {
  return url.replace(/:(\w+)/g, (_m, name: string) => {
    if (name === 'runId') return runId;
    if (name === 'profile') return 'fuzz-unconfigured';
    return `${name.replace(/Id$/, '').toLowerCase().slice(0, 8)}-fuzz0000000000`;
  });
}

const nastyString = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary', maxLength: 64 }),
  fc.constantFrom(
    '\u0000',
    'a\u0000b',
    '\ud800',
    'x\udfffy',
    '__proto__',
    'constructor',
    'https://user:pass@host/x',
    'Bearer abcdefghijklmnopqrstuvwxyz',
  ),
  fc.integer({ min: 1, max: 300_000 }).map((n) => 'x'.repeat(n)),
);
const nastyKey = fc.oneof(
  nastyString.filter((s) => s.length < 200),
  fc.constantFrom('__proto__', 'constructor', 'prototype', 'apiKey', 'runnerId', 'events', 'type'),
);
const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  node: fc.oneof(
    { depthSize: 'small' },
    nastyString,
    fc.integer(),
    fc.double(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('node'), { maxLength: 4 }),
    fc.dictionary(nastyKey, tie('node'), { maxKeys: 4 }),
  ),
})).node;

/** Bodies as bytes: JSON of odd values, and hand-made texts JSON.stringify cannot produce. */
const bodies = fc.oneof(
  { weight: 6, arbitrary: value.map((v) => Buffer.from(JSON.stringify(v) ?? 'null')) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.integer({ min: 60, max: 200_000 }), fc.constantFrom('[', '{"a":'))
      .map(([depth, open]) =>
        Buffer.from(
          `${open.repeat(depth)}1${(open === '[' ? ']' : '}').repeat(depth)}`.slice(0, 900_000),
        ),
      ),
  },
  {
    weight: 2,
    arbitrary: fc
      .constantFrom(
        '{"__proto__":{"polluted":1},"constructor":{"prototype":{"polluted":1}}}',
        '{"a":"\\u0000"}',
        '{"\\u0000":1}',
        '{"a":"\\ud800\\udc00\\udc00"}',
        '{"a":"\\udfff"}',
        `{"a":"${'y'.repeat(1_200_000)}"}`,
        '{',
        '',
        '"just a string"',
        '[]',
      )
      .map((s) => Buffer.from(s)),
  },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 256 }).map((a) => Buffer.from(a)) },
);

describe('body fuzz', () => {
  it('answers every write route with a complete answer below 500', async () => {
    const routes = t.manager
      .routes()
      .filter((r) => ['POST', 'PUT', 'PATCH'].includes(r.method))
      // The validate route starts a real canary run; with a profile nobody configured it is
      // refused like any other, so it stays in.
      .map((r) => ({ method: r.method, path: fill(r.url) }));
    assert.ok(routes.length >= 20, `routes found: ${routes.length}`);
    assert.ok(
      routes.some((r) => r.path.endsWith('/credential')),
      'the credential route is covered',
    );
    for (const route of routes) {
      await fc.assert(
        fc.asyncProperty(bodies, async (body) => {
          const answer = await send(route.method, route.path, body);
          const what = `${route.method} ${route.path} ${body.toString('latin1').slice(0, 80)}`;
          assert.ok(
            answer.status > 0 && answer.status < 500,
            `${what} -> ${answer.status} ${answer.body.slice(0, 300)}`,
          );
          if (answer.status >= 400) {
            const parsed = JSON.parse(answer.body) as { failureKind?: unknown };
            assert.equal(typeof parsed.failureKind, 'string', what);
          }
        }),
        { numRuns: 40 },
      );
    }
    assert.equal(
      ({} as Record<string, unknown>)['polluted'],
      undefined,
      'no prototype was touched',
    );
  });
});
