import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { BROKER_FAILURE_KINDS, isBrokerFailureKind, OPERATION_NAMES } from '../src/index.js';
import { REPO, OTHER_REPO, startTestBroker, type Reply, type TestBroker } from './helpers.js';

/** Upstream requests the allowlist can produce, and nothing else. */
const ALLOWED_UPSTREAM = [
  /^GET \/rate_limit$/,
  /^GET \/repos\/acme\/(widgets|gadgets)(\/(issues|pulls)(\/\d+)?)?$/,
];

const HOSTILE_REPOS = [
  '../x',
  'a/b/c',
  '..',
  'acme/..',
  'acme/widgets/../gadgets',
  '/acme/widgets',
  'acme%2Fwidgets',
  'acme/widgets?per_page=100',
  'acme/widgets#frag',
  'https://evil.example/acme/widgets',
  '//evil.example/acme/widgets',
  'acme\\widgets',
  'acme/ widgets',
  'ACME/WIDGETS',
  REPO,
  OTHER_REPO,
];

const HOSTILE_OPERATIONS = [
  ...OPERATION_NAMES,
  'codehost.pr.merge',
  'codehost.issue.delete',
  'codehost.repo.delete',
  'registry.login',
  'deploy.apply',
  'GET /user',
  'gh api /user',
  'codehost.issue.read ',
  'CODEHOST.ISSUE.READ',
  '__proto__',
  'constructor',
  'toString',
  'hasOwnProperty',
];

const DANGEROUS_KEYS = [
  'url',
  'path',
  'argv',
  'command',
  'shell',
  'method',
  'headers',
  'endpoint',
  '__proto__',
  'constructor',
  'prototype',
];

const json = fc.jsonValue({ maxDepth: 3 });
const number = fc.oneof(fc.integer(), fc.double(), fc.constant(2 ** 53), fc.string(), json);
const branch = fc.oneof(
  fc.constantFrom('main', 'feature/x', '../main', '-x', 'a..b', 'x.lock', 'a b', 'refs/heads/main'),
  fc.string(),
);
const params = fc.oneof(
  fc.record(
    {
      number,
      jsonFields: fc.oneof(
        fc.array(fc.constantFrom('number', 'title', 'body', 'secret', '__proto__')),
        json,
      ),
      state: fc.oneof(fc.constantFrom('open', 'closed', 'all', 'merged'), json),
      limit: number,
      labels: fc.oneof(fc.array(fc.string()), json),
      base: branch,
      head: branch,
      title: fc.oneof(fc.string(), json),
      body: fc.oneof(fc.string(), json),
      draft: json,
    },
    { requiredKeys: [] },
  ),
  fc.dictionary(fc.oneof(fc.constantFrom(...DANGEROUS_KEYS), fc.string()), json),
  json,
);

const envelope = fc.record(
  {
    requestId: fc.oneof(fc.uuid(), fc.string(), json),
    caller: fc.oneof(
      fc.record(
        {
          plane: fc.oneof(fc.constantFrom('code-queue', 'ci', 'root'), json),
          taskId: json,
          queueId: json,
        },
        { requiredKeys: [] },
      ),
      json,
    ),
    repo: fc.oneof(fc.constantFrom(...HOSTILE_REPOS), fc.string(), json),
    operation: fc.oneof(fc.constantFrom(...HOSTILE_OPERATIONS), fc.string(), json),
    dryRun: fc.oneof(fc.boolean(), json),
    params,
  },
  { requiredKeys: [] },
);

/** An envelope plus dangerous extra keys, serialized by hand so `__proto__` stays a real key. */
const withExtras = fc
  .tuple(envelope, fc.dictionary(fc.constantFrom(...DANGEROUS_KEYS), json))
  .map(([body, extras]) => {
    const parts = [...Object.entries(body), ...Object.entries(extras)].map(
      ([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v) ?? 'null'}`,
    );
    return `{${parts.join(',')}}`;
  });

/** Close to valid, so the upstream path is exercised too and its calls can be checked. */
const nearValid = fc
  .record(
    {
      repo: fc.constantFrom(REPO, OTHER_REPO, 'ACME/Widgets', 'acme/widgets '),
      operation: fc.constantFrom(...OPERATION_NAMES),
      dryRun: fc.boolean(),
      params: fc.record(
        {
          number: fc.integer({ min: -2, max: 12 }),
          state: fc.constantFrom('open', 'closed', 'all', 'merged'),
          limit: fc.integer({ min: 0, max: 250 }),
          jsonFields: fc.subarray(['number', 'title', 'state', 'body', 'headRefName', 'bogus']),
          labels: fc.subarray(['bug', 'docs', 'a,b']),
          head: fc.constantFrom('fix/crash', 'refactor', 'acme:refactor', 'evil:x/../y'),
          title: fc.constantFrom('t', ''),
          base: fc.constantFrom('main', 'fix/crash'),
        },
        { requiredKeys: [] },
      ),
    },
    { requiredKeys: ['repo', 'operation'] },
  )
  .map((v) => JSON.stringify(v));

const rawBodies = fc.oneof(
  fc.string(),
  json.map((v) => JSON.stringify(v)),
  fc.constantFrom(
    '',
    '{',
    '[]',
    'null',
    '{"a":1}{',
    '\u0000',
    '{"operation":"codehost.issue.read"',
  ),
);

describe('bad input: thousands of generated requests', () => {
  let t: TestBroker;
  let sent = 0;

  before(async () => {
    t = await startTestBroker({ env: { AUTH_BROKER_LOG_LEVEL: 'warn' } });
  });
  after(() => t.close());

  function assertStructured(res: Reply): void {
    assert.ok(res.status < 500, `5xx for generated input: ${res.raw.slice(0, 300)}`);
    assert.equal(typeof res.body, 'object', `not JSON: ${res.raw.slice(0, 200)}`);
    if (res.status >= 400) {
      assert.equal(res.body.ok, false);
      assert.ok(isBrokerFailureKind(res.body.failureKind), res.raw.slice(0, 200));
      assert.equal(
        BROKER_FAILURE_KINDS[res.body.failureKind as keyof typeof BROKER_FAILURE_KINDS].httpStatus,
        res.status,
      );
      assert.equal(typeof res.body.message, 'string');
      assert.ok(Array.isArray(res.body.next));
    } else {
      assert.equal(res.body.ok, true);
    }
  }

  async function post(path: string, text: string, contentType = 'application/json'): Promise<void> {
    sent++;
    const res = await fetch(`${t.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': contentType },
      body: text,
    });
    const raw = await res.text();
    let body: unknown;
    try {
      body = JSON.parse(raw);
    } catch {
      body = raw;
    }
    assertStructured({ status: res.status, raw, body, headers: res.headers });
  }

  it('answers generated operation envelopes with structured results', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(withExtras, nearValid), (text) => post('/v1/codehost/cli', text)),
      { numRuns: 2500 },
    );
  });

  it('answers generated preflight bodies with structured results', async () => {
    const preflight = fc
      .record(
        {
          requestId: fc.oneof(fc.uuid(), json),
          repo: fc.oneof(fc.constantFrom(...HOSTILE_REPOS), json),
          base: branch,
          head: branch,
          issueNumber: number,
          includePrCreateDryRun: json,
          includePushDryRun: json,
        },
        { requiredKeys: [] },
      )
      .map((v) => JSON.stringify(v));
    await fc.assert(
      fc.asyncProperty(preflight, (text) => post('/v1/codehost/pr-preflight', text)),
      { numRuns: 600 },
    );
  });

  it('answers malformed bodies, wrong media types and huge bodies with structured failures', async () => {
    await fc.assert(
      fc.asyncProperty(
        rawBodies,
        fc.constantFrom(
          'application/json',
          'text/plain',
          'application/x-www-form-urlencoded',
          'application/json; charset=utf-8',
        ),
        (text, type) => post('/v1/codehost/cli', text, type),
      ),
      { numRuns: 600 },
    );
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 200_000, max: 400_000 }), async (size) => {
        const body = JSON.stringify({
          repo: REPO,
          operation: 'codehost.pr.create',
          dryRun: true,
          params: { title: 't', base: 'main', head: 'x', body: 'x'.repeat(size) },
        });
        await post('/v1/codehost/cli', body);
      }),
      { numRuns: 25 },
    );
  });

  it('made no upstream call outside the allowlist, and audited every request', async () => {
    const outside = t.fake.requests
      .map((r) => `${r.method} ${r.path}`)
      .filter((line) => !ALLOWED_UPSTREAM.some((re) => re.test(line)));
    assert.deepEqual(outside, []);
    assert.ok(t.fake.requests.length > 0, 'some generated requests were valid reads');
    assert.ok(
      t.fake.requests.every((r) =>
        Object.keys(r.query).every((k) =>
          ['state', 'per_page', 'page', 'labels', 'base', 'head'].includes(k),
        ),
      ),
    );
    assert.equal((await t.audit()).length, sent);
  });
});
