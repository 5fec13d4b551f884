import assert from 'node:assert/strict';
import { createHash, randomUUID } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { assertFailure, REPO, startTestBroker, UUID_PATTERN, type TestBroker } from './helpers.js';

const PLANES = ['code-queue', 'ci', 'commander', 'manual-cli', 'unknown'];

describe('audit records', () => {
  let t: TestBroker;
  before(async () => {
    t = await startTestBroker();
  });
  after(() => t.close());

  it('writes exactly one line per request, success or failure, with every field', async () => {
    const before = (await t.audit()).length;
    const taskId = 'task-42';
    const replies = [
      await t.cli({
        requestId: randomUUID(),
        caller: { plane: 'code-queue', taskId, queueId: 'q-1' },
        repo: REPO,
        operation: 'codehost.issue.read',
        params: { number: 2 },
      }),
      await t.cli({ repo: REPO, operation: 'codehost.issue.read', params: { number: 404 } }),
      await t.cli({ repo: 'acme/nope', operation: 'codehost.issue.list' }),
      await t.cli('not json'),
      await t.get('/health'),
      await t.get('/v1/codehost/anything?access_token=abc'),
    ];
    const records = (await t.audit()).slice(before);
    assert.equal(records.length, replies.length);
    records.forEach((record, i) => {
      const reply = replies[i]!;
      assert.equal(record.requestId, reply.headers.get('x-request-id'));
      assert.match(record.requestId, UUID_PATTERN);
      assert.ok(!Number.isNaN(Date.parse(record.observedAt)));
      assert.ok(PLANES.includes(record.caller.plane));
      assert.ok('taskId' in record.caller && 'queueId' in record.caller);
      assert.ok('operation' in record && 'repo' in record && 'resource' in record);
      assert.equal(record.dryRun, true, 'no request can mutate the code host in p0');
      assert.match(record.credentialRef, /^file:codehost-token#[0-9a-f]{12}$/);
      assert.equal(record.credentialValuePrinted, false);
      assert.ok('method' in record.upstream && 'path' in record.upstream);
      assert.equal(record.status, reply.status);
      assert.equal(record.ok, reply.status < 400);
      assert.equal(record.failureKind, reply.body.failureKind ?? null);
      assert.equal(record.degradedReason, reply.body.degradedReason ?? null);
      assert.ok(['ready', 'infra-blocked', 'business-failed'].includes(record.runnerDisposition));
      assert.equal(typeof record.retryable, 'boolean');
      assert.ok(record.durationMs >= 0);
      assert.deepEqual(record.redaction, { valuesPrinted: false });
    });
    const [ok, missing, refused, garbage, , unknown] = records;
    assert.deepEqual(ok!.caller, {
      plane: 'code-queue',
      taskId,
      queueId: 'q-1',
      address: '127.0.0.1',
    });
    assert.equal(ok!.operation, 'codehost.issue.read');
    assert.equal(ok!.repo, REPO);
    assert.deepEqual(ok!.resource, { number: 2 });
    assert.equal(ok!.upstream.path, `/repos/${REPO}/issues/2`);
    assert.equal(ok!.runnerDisposition, 'ready');
    assert.equal(missing!.failureKind, 'repo-not-found');
    assert.equal(missing!.runnerDisposition, 'business-failed');
    assert.equal(refused!.failureKind, 'repo-not-allowed');
    assert.equal(refused!.repo, null);
    assert.equal(garbage!.failureKind, 'validation-failed');
    assert.equal(unknown!.endpoint.path, '/v1/codehost/anything', 'the query is not recorded');
  });

  it('keeps planned bodies as length and SHA-256 only', async () => {
    const markdown = `# Plan\n\n${'lorem ipsum '.repeat(200)}\n\nCloses #1`;
    const res = await t.cli({
      repo: REPO,
      operation: 'codehost.pr.create',
      dryRun: true,
      params: { title: 'Plan', base: 'main', head: 'feature/plan', body: markdown },
    });
    assert.equal(res.status, 200, res.raw);
    const record = (await t.audit()).at(-1)!;
    assert.deepEqual(record.body, {
      length: Buffer.byteLength(markdown),
      sha256: createHash('sha256').update(markdown).digest('hex'),
    });
    assert.deepEqual(record.resource, { base: 'main', head: 'feature/plan', draft: false });
    assert.equal(record.upstream.sent, false);
    assert.equal(record.upstream.method, 'POST');
    assert.ok(!(await t.auditText()).includes('lorem ipsum'));
  });

  it('fails closed while the audit file cannot be written, and recovers after', async () => {
    await rm(t.auditPath);
    await mkdir(t.auditPath); // a directory where the file was: every append fails
    try {
      const res = await t.cli({
        repo: REPO,
        operation: 'codehost.issue.read',
        params: { number: 1 },
      });
      assertFailure(res, 'broker-unavailable', 'audit-log-unwritable');
      assert.ok(!res.raw.includes('Crash on start'));
      const health = await t.get('/health');
      assert.equal(health.status, 503, 'health fails too: the broker cannot serve');
    } finally {
      await rm(t.auditPath, { recursive: true });
    }
    const again = await t.cli({
      repo: REPO,
      operation: 'codehost.issue.read',
      params: { number: 1 },
    });
    assert.equal(again.status, 200, again.raw);
    assert.equal((await t.audit()).length, 1, 'a fresh file is started');
  });

  it('logs request ids, operations and failure semantics', async () => {
    const res = await t.cli({ repo: REPO, operation: 'codehost.pr.read', params: { number: 99 } });
    const line = t.logs.map((l) => JSON.parse(l)).find((l) => l.requestId === res.body.requestId);
    assert.ok(line, 'a log line carries the request id');
    assert.equal(line.operation, 'codehost.pr.read');
    assert.equal(line.failureKind, 'repo-not-found');
    assert.equal(line.status, 404);
  });
});
