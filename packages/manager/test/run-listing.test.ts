import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { createSession, runBody, startTestManager, type TestManager } from './helpers.js';

let t: TestManager;
before(async () => {
  t = await startTestManager();
  await t.configureProfile('builtin-a');
  await t.configureProfile('builtin-c');
});
after(() => t.close());

async function createRun(overrides: Record<string, unknown> = {}): Promise<any> {
  const created = await t.api('POST', '/api/v1/runs', runBody(overrides));
  assert.equal(created.status, 201, created.raw);
  return created.body;
}

async function list(query: string): Promise<any> {
  const response = await t.api('GET', `/api/v1/runs${query ? `?${query}` : ''}`);
  assert.equal(response.status, 200, response.raw);
  return response.body;
}

/** Every run a filter selects, following the cursor page after page. */
async function listAll(query: string, limit: number): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 100; pages++) {
    const params = new URLSearchParams(query);
    params.set('limit', String(limit));
    if (cursor) params.set('cursor', cursor);
    const page = await list(params.toString());
    assert.ok(page.runs.length <= limit);
    ids.push(...page.runs.map((r: any) => r.runId));
    cursor = page.nextCursor;
    if (!cursor) return ids;
  }
  throw new Error('paging did not end');
}

describe('GET /api/v1/runs', () => {
  const made: any[] = [];
  before(async () => {
    // Sequential creates: created_at order is the creation order.
    made.push(await createRun({ tenantId: 'tenant-a', projectId: 'alpha' }));
    made.push(await createRun({ tenantId: 'tenant-b', projectId: 'alpha' }));
    made.push(
      await createRun({ tenantId: 'tenant-b', projectId: 'beta', backendProfile: 'builtin-c' }),
    );
    made.push(await createRun({ tenantId: 'tenant-a', projectId: 'beta' }));
    const cancelled = await t.api('POST', `/api/v1/runs/${made[1].runId}/cancel`, {});
    assert.equal(cancelled.status, 200, cancelled.raw);
  });

  it('lists runs newest first as full run records', async () => {
    const page = await list('');
    const ids = page.runs.map((r: any) => r.runId);
    assert.deepEqual(
      ids.filter((id: string) => made.some((m) => m.runId === id)),
      made.map((m) => m.runId).reverse(),
    );
    const one = page.runs.find((r: any) => r.runId === made[2].runId);
    assert.equal(one.backendProfile, 'builtin-c');
    assert.equal(one.state, 'pending');
    assert.equal(typeof one.lease.expired, 'boolean');
    assert.equal(page.nextCursor, null);
  });

  it('filters by tenant, project, state, profile and their combination', async () => {
    const ids = async (q: string) => (await list(q)).runs.map((r: any) => r.runId).sort();
    const expect = (...i: number[]) => i.map((n) => made[n].runId).sort();
    assert.deepEqual(await ids('tenantId=tenant-b'), expect(1, 2));
    assert.deepEqual(await ids('tenantId=tenant-a&projectId=beta'), expect(3));
    assert.deepEqual(await ids('projectId=alpha'), expect(0, 1));
    assert.deepEqual(await ids('state=cancelled'), expect(1));
    assert.deepEqual(await ids('state=cancelled,pending&tenantId=tenant-b'), expect(1, 2));
    assert.deepEqual(await ids('backendProfile=builtin-c'), expect(2));
    assert.deepEqual(await ids('tenantId=tenant-c'), []);
    assert.deepEqual(await ids('backendProfile=builtin-c&state=cancelled'), []);
  });

  it('filters by creation time, both bounds exclusive', async () => {
    const ids = async (q: string) => (await list(q)).runs.map((r: any) => r.runId).sort();
    const createdAt = (n: number) => encodeURIComponent(made[n].createdAt);
    const inWindow = await ids(`createdAfter=${createdAt(0)}&createdBefore=${createdAt(3)}`);
    assert.ok(!inWindow.includes(made[3].runId));
    assert.ok(inWindow.includes(made[2].runId) || made[2].createdAt === made[3].createdAt);
    const future = new Date(Date.now() + 3_600_000).toISOString();
    assert.deepEqual(await ids(`createdAfter=${encodeURIComponent(future)}`), []);
    assert.deepEqual(
      (await ids(`createdBefore=${encodeURIComponent(future)}`)).length >= made.length,
      true,
    );
  });

  it('filters by session', async () => {
    const session = await createSession(t);
    const run = await createRun({ sessionRef: { sessionId: session.sessionId } });
    const page = await list(`sessionId=${session.sessionId}`);
    assert.deepEqual(
      page.runs.map((r: any) => r.runId),
      [run.runId],
    );
    assert.equal(page.runs[0].sessionRef.sessionId, session.sessionId);
  });

  it('refuses bad filters, bounds and cursors as schema-invalid', async () => {
    for (const query of [
      'limit=0',
      'limit=201',
      'limit=ten',
      'state=done',
      'state=pending,',
      'createdAfter=yesterday',
      'createdBefore=2026-13-40T00:00:00Z',
      'sessionId=..%2F..',
      'colour=red',
      'cursor=not-a-cursor',
      `cursor=${Buffer.from('["r","1e99","x"]').toString('base64url')}`,
      `cursor=${Buffer.from('{"a":1}').toString('base64url')}`,
      `cursor=${Buffer.from('["r","9999999999999999999","run-x"]').toString('base64url')}`,
      'cursor=%27%3B%20DROP%20TABLE%20runs',
    ]) {
      const response = await t.api('GET', `/api/v1/runs?${query}`);
      assert.equal(response.status, 400, `${query}: ${response.raw}`);
      assert.equal(response.body.failureKind, 'schema-invalid', query);
      assert.equal(typeof response.body.traceId, 'string');
    }
  });
});

describe('run listing pages', () => {
  it('pages through every run exactly once, even when many share one creation instant', async () => {
    const tenantId = 'tenant-b';
    const projectId = 'paging';
    const ids: string[] = [];
    for (let i = 0; i < 23; i++) ids.push((await createRun({ tenantId, projectId })).runId);
    // Ten runs created in the same microsecond: only the run id orders them.
    await sql`UPDATE runs SET created_at = '2026-01-01T00:00:00.123456Z'
      WHERE run_id IN (${sql.join(ids.slice(5, 15))})`.execute(t.manager.store.db);
    const seen = await listAll(`projectId=${projectId}`, 4);
    assert.equal(seen.length, ids.length);
    assert.deepEqual([...seen].sort(), [...ids].sort());
    const again = await listAll(`projectId=${projectId}`, 7);
    assert.deepEqual(again, seen, 'the order is stable whatever the page size');
  });

  it('uses 50 by default and a run created meanwhile does not shift later pages', async () => {
    for (let i = 0; i < 55; i++) await createRun({ projectId: 'default-size' });
    const first = await list('projectId=default-size');
    assert.equal(first.runs.length, 50);
    assert.ok(first.nextCursor);
    await createRun({ projectId: 'default-size' });
    const second = await list(`projectId=default-size&cursor=${first.nextCursor}`);
    assert.equal(second.runs.length, 5);
    assert.equal(second.nextCursor, null);
    const firstIds = new Set(first.runs.map((r: any) => r.runId));
    assert.ok(second.runs.every((r: any) => !firstIds.has(r.runId)));
  });
});

describe('GET /api/v1/runs names what each run was asked first', () => {
  it("carries the first turn's prompt, cut at 200 characters, and null before any turn", async () => {
    const empty = await createRun({ projectId: 'prompts' });
    const asked = await createRun({ projectId: 'prompts' });
    const long = 'é'.repeat(150) + 'x'.repeat(150);
    const first = await t.api('POST', `/api/v1/runs/${asked.runId}/commands`, {
      type: 'turn',
      payload: { prompt: long },
    });
    assert.equal(first.status, 201, first.raw);
    // Later commands (a steer, another turn) leave it as it was.
    await t.api('POST', `/api/v1/runs/${asked.runId}/commands`, {
      type: 'steer',
      payload: { prompt: 'steer text' },
    });
    await t.api('POST', `/api/v1/runs/${asked.runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'second turn' },
    });
    const page = await list('projectId=prompts');
    const byId = new Map(page.runs.map((r: any) => [r.runId, r]));
    assert.equal((byId.get(empty.runId) as any).firstPrompt, null);
    assert.equal((byId.get(asked.runId) as any).firstPrompt, long.slice(0, 200));
  });
});
