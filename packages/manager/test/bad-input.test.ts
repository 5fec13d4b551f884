import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { runBody, startTestManager, TestRunner, type TestManager } from './helpers.js';

/**
 * Property: whatever arrives — wrong types, unknown and legacy fields, U+0000, lone surrogates,
 * deep nesting, broken JSON, odd ids and queries — the answer is a structured 4xx, never a
 * 5xx, and nothing is written.
 */
let t: TestManager;
let runId: string;
let commandId: string;
before(async () => {
  t = await startTestManager({ env: { LOG_LEVEL: 'warn' } });
  await t.configureProfile('builtin-a');
  runId = (await t.api('POST', '/api/v1/runs', runBody())).body.runId;
  commandId = (
    await t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'x' },
    })
  ).body.commandId;
  await new TestRunner(t, 'rnr-fixture1', runId).claim();
});
after(() => t.close());

async function rowCounts(): Promise<Record<string, number>> {
  const db = t.manager.store.db;
  const count = async (table: 'runs' | 'commands' | 'events' | 'runners') =>
    Number(
      (
        await db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
  return {
    runs: await count('runs'),
    commands: await count('commands'),
    events: await count('events'),
    runners: await count('runners'),
  };
}

const nasty = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.constantFrom(
    '\u0000',
    'a\u0000b',
    '\ud800',
    'x\udfffy',
    '../../etc/passwd',
    '%00',
    'run-../../x',
    ' ',
    '',
    '__proto__',
    'constructor',
    '🙂'.repeat(50),
  ),
);
// undefined is left out: JSON.stringify would drop the field and leave a valid body.
const junkValue = fc
  .oneof(
    fc.anything({ maxDepth: 4 }),
    nasty,
    fc.integer(),
    fc.double(),
    fc.constant(null),
    fc.array(nasty),
  )
  .filter((v) => v !== undefined);

/** A valid body with one required field broken or one forbidden field added: always invalid. */
function broken(valid: Record<string, unknown>, required: string[], extra: string[]) {
  return fc.oneof(
    // Numbers, booleans and arrays are wrong for every required field here (strings or objects).
    fc
      .tuple(
        fc.constantFrom(...required),
        fc.oneof(fc.integer(), fc.boolean(), fc.double(), fc.array(junkValue, { maxLength: 3 })),
      )
      .map(([field, v]) => ({ ...valid, [field]: v })),
    fc.constantFrom(...required).map((field) => {
      const copy = { ...valid };
      delete copy[field];
      return copy;
    }),
    fc.tuple(fc.constantFrom(...extra), junkValue).map(([field, v]) => ({ ...valid, [field]: v })),
  );
}

const LEGACY = [
  'gitMirror',
  'toolAliases',
  'skillRefs',
  'workspaceFiles',
  'subdir',
  'sparsePaths',
  'apiKey',
  'unknownField',
];
const bodies = fc.oneof(
  junkValue,
  broken(runBody(), ['tenantId', 'projectId', 'workspaceRef', 'providerId', 'traceSink'], LEGACY),
  broken({ kind: 'gitbundle', repoUrl: 'https://h/r.git' }, ['kind', 'repoUrl'], LEGACY).map(
    (bundle) => runBody({ resourceBundleRef: bundle }),
  ),
  broken({ type: 'turn', payload: { prompt: 'x' } }, ['type', 'payload'], ['cookies', 'extra']),
  broken(
    { runnerId: 'rnr-fuzzer01', events: [{ key: 'k', category: 'system', data: {} }] },
    ['runnerId', 'events'],
    ['extra'],
  ),
);

interface Endpoint {
  method: 'POST' | 'PATCH' | 'GET';
  path: () => string;
}
const id = fc.oneof(nasty, fc.constant('run-0000000000000'), fc.constant('cmd-0000000000000'));
const endpoints = (rid: string, cid: string): Endpoint[] => [
  { method: 'POST', path: () => '/api/v1/runs' },
  { method: 'POST', path: () => `/api/v1/runs/${rid}/commands` },
  { method: 'POST', path: () => `/api/v1/runs/${rid}/cancel` },
  { method: 'POST', path: () => `/api/v1/runs/${rid}/claim` },
  { method: 'PATCH', path: () => `/api/v1/runs/${rid}/lease` },
  { method: 'POST', path: () => `/api/v1/runs/${rid}/events` },
  { method: 'PATCH', path: () => `/api/v1/runs/${rid}/status` },
  { method: 'POST', path: () => '/api/v1/runners/register' },
  { method: 'POST', path: () => `/api/v1/commands/${cid}/ack` },
  { method: 'PATCH', path: () => `/api/v1/commands/${cid}/status` },
  { method: 'POST', path: () => `/api/v1/commands/${cid}/cancel` },
];

function isValidCancel(body: unknown): boolean {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return false;
  const keys = Object.keys(body);
  const reason = (body as { reason?: unknown }).reason;
  return (
    keys.every((k) => k === 'reason') &&
    (reason === undefined ||
      (typeof reason === 'string' && reason.length <= 1000 && !reason.includes('\u0000')))
  );
}

function assertStructured4xx(response: { status: number; body: any; raw: string }, what: string) {
  assert.ok(
    response.status >= 400 && response.status < 500,
    `${what} -> ${response.status} ${response.raw.slice(0, 300)}`,
  );
  assert.equal(
    typeof response.body?.failureKind,
    'string',
    `${what}: ${response.raw.slice(0, 200)}`,
  );
  assert.equal(typeof response.body?.message, 'string');
  assert.equal(typeof response.body?.traceId, 'string');
}

/** Percent-encode, keeping a lone surrogate as the invalid UTF-8 bytes a client might send. */
const enc = (value: string) => {
  try {
    return encodeURIComponent(value);
  } catch {
    return '%ED%A0%80';
  }
};

describe('bad input', () => {
  it('answers thousands of malformed bodies on every write endpoint with a structured 4xx and writes nothing', async () => {
    const before = await rowCounts();
    for (const endpoint of endpoints(runId, commandId)) {
      // A cancel takes only an optional reason: bodies that are valid cancels are left out.
      const candidates = endpoint.path().endsWith('/cancel')
        ? bodies.filter((b) => !isValidCancel(b))
        : bodies;
      await fc.assert(
        fc.asyncProperty(candidates, async (body) => {
          const response = await t.api(
            endpoint.method,
            endpoint.path(),
            body === undefined ? 'null' : (JSON.stringify(body) ?? 'null'),
          );
          assertStructured4xx(
            response,
            `${endpoint.method} ${endpoint.path()} ${JSON.stringify(body)?.slice(0, 120)}`,
          );
        }),
        { numRuns: 250 },
      );
    }
    assert.deepEqual(await rowCounts(), before);
  });

  it('answers broken JSON, wrong content types, deep nesting and oversized bodies with a 4xx', async () => {
    const before = await rowCounts();
    const raw = [
      '{',
      '{"tenantId": }',
      'undefined',
      '[1,2,',
      '"just a string"',
      `${'['.repeat(5000)}${']'.repeat(5000)}`,
      JSON.stringify({ a: JSON.parse(`${'{"a":'.repeat(100)}1${'}'.repeat(100)}`) }),
      JSON.stringify({ ...runBody(), metadata: { note: 'x'.repeat(1_100_000) } }),
    ];
    for (const endpoint of endpoints(runId, commandId)) {
      for (const text of raw)
        assertStructured4xx(
          await t.api(endpoint.method, endpoint.path(), text),
          `${endpoint.path()} raw ${text.slice(0, 30)}`,
        );
      const wrongType = await t.api(endpoint.method, endpoint.path(), 'a=b', {
        'content-type': 'application/x-www-form-urlencoded',
      });
      assertStructured4xx(wrongType, `${endpoint.path()} form body`);
    }
    assert.deepEqual(await rowCounts(), before);
  });

  it('answers odd ids and queries on every read endpoint without a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(
        id,
        id,
        fc.dictionary(
          fc.constantFrom('afterSeq', 'limit', 'commandId', 'runnerId', 'waitMs', 'x'),
          nasty,
        ),
        async (rid, cid, query) => {
          const qs = new URLSearchParams(query).toString();
          for (const path of [
            `/api/v1/runs/${enc(rid)}`,
            `/api/v1/runs/${enc(rid)}/events?${qs}`,
            `/api/v1/runs/${enc(rid)}/result?${qs}`,
            `/api/v1/runs/${runId}/commands?${qs}`,
            `/api/v1/runs/${runId}/events?${qs}`,
            `/api/v1/runs/${runId}/result?${qs}`,
            `/api/v1/runs/${enc(rid)}/commands/${enc(cid)}`,
            `/api/v1/runs/${runId}/commands/${enc(cid)}/result`,
          ]) {
            const response = await t.api('GET', path);
            assert.ok(
              response.status < 500,
              `GET ${path} -> ${response.status} ${response.raw.slice(0, 200)}`,
            );
            assert.ok(response.body && typeof response.body === 'object', 'always a JSON body');
            if (response.status >= 400) assert.equal(typeof response.body.failureKind, 'string');
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
