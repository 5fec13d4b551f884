import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  createSession,
  SESSION_RUN_BASE,
  runBody,
  startTestManager,
  TestRunner,
  type TestManager,
} from './helpers.js';
import { requestNumberFields, type NumberField } from './schema-bounds.js';

/**
 * Every number a client may send has a maximum in its route schema, and no value of any such
 * field, however large, small or odd, is answered with a 5xx: past the bounds it is a 400
 * `schema-invalid`, within them the route answers as usual. The fields are found by walking
 * the OpenAPI document, so a field added later is covered (or fails here) without a change.
 */
let t: TestManager;
let doc: any;
const ids: Record<string, string> = {};

before(async () => {
  t = await startTestManager({
    // Waits end at once: a probe with the largest waitMs must not hold the test.
    env: { SVC_CLIENT_WAIT_MAX_MS: '0', SVC_POLL_WAIT_MAX_MS: '0' },
  });
  await t.configureProfile('builtin-a');
  doc = (await t.api('GET', '/openapi.json')).body;
  const run = await t.api('POST', '/api/v1/runs', runBody());
  ids['runId'] = run.body.runId;
  const runner = new TestRunner(t, 'rnr-bounds01', run.body.runId);
  assert.equal((await runner.claim()).status, 200);
  await runner.append([{ key: 'one', category: 'system', data: {} }]);
  const command = await t.api('POST', `/api/v1/runs/${run.body.runId}/commands`, {
    type: 'turn',
    payload: { prompt: 'hi' },
  });
  ids['commandId'] = command.body.commandId;
  ids['sessionId'] = (await createSession(t)).sessionId;
  ids['taskId'] = 'tsk-bounds-unknown';
  ids['queue'] = 'bounds';
  ids['runnerJobId'] = 'job-bounds-unknown';
  // A stream of an open run lasts: the stream's probes read a run that ended.
  const ended = await t.api('POST', '/api/v1/runs', runBody());
  await t.api('POST', `/api/v1/runs/${ended.body.runId}/cancel`, {});
  ids['endedRunId'] = ended.body.runId;
});
after(() => t.close());

/** A valid request of each route that takes numbers in its body; the probes replace one field. */
/** A task body with every number a client may send: submitted, and a schedule's template. */
const taskSample = () => ({
  tenantId: 'tenant-a',
  projectId: 'proj-1',
  queue: 'bounds',
  title: 'bounds',
  payload: { prompt: 'hi' },
  priority: 0,
  maxAttempts: 1,
  executionPolicy: { timeoutMs: 60_000 },
  retryPolicy: { backoffMs: 1000, maxBackoffMs: 2000 },
  concurrencyKey: 'bounds',
  concurrencyLimit: 1,
});

const BODIES: Record<string, () => Record<string, unknown>> = {
  'POST /api/v1/runs': () => runBody({ executionPolicy: { timeoutMs: 60_000 } }),
  'POST /api/v1/runners/register': () => ({ runId: ids['runId'], pid: 1 }),
  'PATCH /api/v1/commands/{commandId}/status': () => ({
    runnerId: 'rnr-bounds01',
    state: 'failed',
    failureKind: 'backend-failed',
    details: { n: 1 },
  }),
  'POST /api/v1/runs/{runId}/runner-jobs': () => ({
    commandId: ids['commandId'],
    ttlSecondsAfterFinished: 60,
  }),
  'POST /api/v1/sessions': () => ({
    backendProfile: 'builtin-a',
    runBase: { ...SESSION_RUN_BASE, executionPolicy: { timeoutMs: 60_000 } },
    expiresInSeconds: 3600,
  }),
  'POST /api/v1/sessions/{sessionId}/send': () => ({
    prompt: 'hi',
    dryRun: true,
    runBase: {
      tenantId: 'tenant-a',
      projectId: 'proj-1',
      workspaceRef: { kind: 'opaque' },
      providerId: 'openai',
      executionPolicy: { timeoutMs: 60_000 },
    },
    runnerJob: { ttlSecondsAfterFinished: 60 },
  }),
  'POST /api/v1/sessions/{sessionId}/storage/refresh': () => ({
    runnerId: 'rnr-bounds01',
    sizeBytes: 1,
    filesCount: 1,
    sha256: 'a'.repeat(64),
  }),
  'POST /api/v1/queue/tasks': () => ({ ...taskSample(), dryRun: true }),
  'POST /api/v1/queue/tasks/{taskId}/dispatch': () => ({
    runnerJob: { ttlSecondsAfterFinished: 60 },
    dryRun: true,
  }),
  'POST /api/v1/queue/tasks/retry': () => ({ queue: 'bounds', limit: 1, dryRun: true }),
  'PUT /api/v1/queue/queues/{queue}/settings': () => ({ maxRunning: 1 }),
  'POST /api/v1/queue/schedules': () => ({
    cron: '0 9 * * *',
    task: taskSample(),
  }),
  'PUT /api/v1/queue/limits': () => ({
    global: 5,
    tenants: { n: 1 },
    profiles: { n: 1 },
    profileRates: { n: 1 },
  }),
};

const fill = (path: string) =>
  (path.endsWith('/events/stream') ? path.replace('{runId}', '{endedRunId}') : path).replace(
    /\{(\w+)\}/g,
    (_, name: string) => {
      const id = ids[name];
      assert.ok(id, `no id for path parameter ${name}`);
      return encodeURIComponent(id);
    },
  );

const key = (f: NumberField) => `${f.method} ${f.path}`;

/** JSON text of `body` with the field at `pointer` set to the raw JSON number `raw`. */
function bodyWith(body: Record<string, unknown>, pointer: string[], raw: string): string {
  const MARK = '"\u2063probe\u2063"';
  let node: any = body;
  pointer.forEach((part, i) => {
    const last = i === pointer.length - 1;
    // A map's value (`*`) or a patterned property (`/…/`): a name every pattern here takes.
    const name = part === '*' || part.startsWith('/') ? 'n' : part;
    if (last) node[name] = '\u2063probe\u2063';
    else node = node[name] ??= {};
  });
  return JSON.stringify(body).replace(MARK, raw);
}

/** Values a careless or hostile client sends, as text; `Infinity` stands for 1e309. */
function probes(f: NumberField): string[] {
  const values = ['2147483648', '9007199254740992', '1e309', '-1e309', '1.5', '-1'];
  if (f.maximum !== undefined) values.push(String(f.maximum), String(f.maximum + 1));
  if (f.minimum !== undefined) values.push(String(f.minimum), String(f.minimum - 1));
  return [...new Set(values)];
}

function valid(f: NumberField, raw: string): boolean {
  const n = Number(raw);
  if (!Number.isFinite(n)) return false;
  if (f.type === 'integer' && !Number.isInteger(n)) return false;
  if (!Number.isSafeInteger(n) && f.type === 'integer') return false;
  return (f.minimum === undefined || n >= f.minimum) && (f.maximum === undefined || n <= f.maximum);
}

describe('bounds of every number a client sends', () => {
  it('every integer or number in a query, path or body schema has a maximum', () => {
    const fields = requestNumberFields(doc);
    assert.ok(fields.length > 25, `only ${fields.length} fields found`);
    const unbounded = fields
      .filter((f) => f.maximum === undefined || f.minimum === undefined)
      .map((f) => `${key(f)} ${f.in} ${f.pointer.join('.')}`);
    assert.deepEqual(unbounded, []);
  });

  it('a value past the bounds is a 400 schema-invalid, a value within them never a 5xx', async () => {
    let sent = 0;
    for (const field of requestNumberFields(doc)) {
      for (const raw of probes(field)) {
        let response;
        if (field.in === 'body') {
          const sample = BODIES[key(field)];
          assert.ok(sample, `${key(field)} takes numbers in its body: add a valid sample here`);
          response = await t.api(
            field.method,
            fill(field.path),
            bodyWith(sample(), field.pointer, raw),
          );
        } else {
          const url = `${fill(field.path)}?${field.pointer[0]}=${encodeURIComponent(raw)}`;
          response = await t.api(field.method, url);
        }
        sent += 1;
        const what = `${key(field)} ${field.in} ${field.pointer.join('.')}=${raw}: ${response.status} ${response.raw.slice(0, 300)}`;
        if (valid(field, raw)) {
          assert.ok(response.status < 500, what);
          assert.notEqual(response.body?.failureKind, 'schema-invalid', what);
        } else {
          assert.equal(response.status, 400, what);
          assert.equal(response.body.failureKind, 'schema-invalid', what);
        }
      }
    }
    assert.ok(sent > 200, `only ${sent} probes sent`);
  });

  it('the seq positions named in the issue: afterSeq=2147483648 on events, result, runner poll, trace and output', async () => {
    const run = ids['runId']!;
    const session = ids['sessionId']!;
    for (const url of [
      `/api/v1/runs/${run}/events?afterSeq=2147483648`,
      `/api/v1/runs/${run}/result?afterSeq=2147483648`,
      `/api/v1/runs/${run}/commands?afterSeq=2147483648&runnerId=rnr-bounds01`,
      `/api/v1/sessions/${session}/trace?afterSeq=2147483648`,
      `/api/v1/sessions/${session}/output?afterSeq=2147483648`,
      `/api/v1/runs/${run}/events/stream?afterSeq=2147483648`,
    ]) {
      const response = await t.api('GET', url);
      assert.equal(response.status, 400, `${url}: ${response.raw}`);
      assert.equal(response.body.failureKind, 'schema-invalid');
    }
    // The largest position is a valid, empty answer.
    const last = await t.api('GET', `/api/v1/runs/${run}/events?afterSeq=2147483647`);
    assert.equal(last.status, 200, last.raw);
    assert.deepEqual(last.body.events, []);
    const beyond = await t.api('GET', `/api/v1/runs/${run}/events/stream`, undefined, {
      'last-event-id': '2147483648',
    });
    assert.equal(beyond.status, 400, beyond.raw);
  });
});
