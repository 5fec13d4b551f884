import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { createTestStore, type TestStore } from '@svc/testkit';
import { createLogger } from '../src/logging.js';
import { Redactor } from '@svc/contracts';
import { openStore, type Store } from '../src/store/db.js';
import { pageEvents } from '../src/store/events.js';
import { findRun } from '../src/store/runs.js';
import { managerTemplate } from './helpers.js';

/**
 * Hot statements are parsed once per connection and then only bound and executed. Checked on
 * one real connection (a pool of one), through the server's own list of its prepared statements.
 */
describe('statements prepared once per connection', () => {
  let test: TestStore;
  let store: Store;
  before(async () => {
    test = await createTestStore(managerTemplate);
    if (test.kind !== 'postgres') return;
    store = await openStore(
      { kind: 'postgres', url: test.url, poolSize: 1 },
      createLogger({ level: 'silent', redactor: new Redactor() }),
    );
  });
  after(async () => {
    await store?.close();
    await test.drop();
  });

  const prepared = async () =>
    (
      await sql<{ name: string; statement: string }>`
        SELECT name, statement FROM pg_prepared_statements ORDER BY name`.execute(store.db)
    ).rows;

  it('prepares a marked statement once, whatever its values', async (t) => {
    if (test.kind !== 'postgres') return t.skip('needs PostgreSQL');
    for (const runId of ['run-a', 'run-b', 'run-c'])
      assert.equal(await findRun(store.db, runId), undefined);
    await pageEvents(store.db, 'run-a', 0, 10);
    await pageEvents(store.db, 'run-b', 5, 100);
    const statements = await prepared();
    const runReads = statements.filter((s) => s.statement.includes('from "runs"'));
    const eventPages = statements.filter((s) => s.statement.includes('from "events"'));
    assert.equal(runReads.length, 1, JSON.stringify(statements));
    assert.equal(eventPages.length, 1, JSON.stringify(statements));
    assert.match(runReads[0]!.name, /^svc_[0-9a-f]{24}$/);
  });

  it('leaves statements whose text varies with their values unprepared', async (t) => {
    if (test.kind !== 'postgres') return t.skip('needs PostgreSQL');
    const before = (await prepared()).length;
    await pageEvents(store.db, 'run-a', 0, 10, { categories: ['system'] });
    await pageEvents(store.db, 'run-a', 0, 10, { categories: ['system', 'diff'] });
    await pageEvents(store.db, 'run-a', 0, 10, { commandIds: ['cmd-1', 'cmd-2', 'cmd-3'] });
    await sql`SELECT 1`.execute(store.db);
    assert.equal((await prepared()).length, before);
  });

  it('keeps answering after a column is added under a prepared SELECT *', async (t) => {
    if (test.kind !== 'postgres') return t.skip('needs PostgreSQL');
    await sql`
      INSERT INTO runs (run_id, tenant_id, project_id, provider_id, backend_profile,
        workspace_ref, execution_policy, state)
      VALUES ('run-schema', 't', 'p', 'x', 'builtin-a', '{}'::jsonb, '{}'::jsonb, 'pending')`.execute(
      store.db,
    );
    assert.equal((await findRun(store.db, 'run-schema'))?.state, 'pending');
    // Another replica's migration, while this process holds the statement prepared.
    await sql`ALTER TABLE runs ADD COLUMN added_later integer DEFAULT 7`.execute(store.db);
    const row = (await findRun(store.db, 'run-schema')) as Record<string, unknown> | undefined;
    assert.equal(row?.['state'], 'pending');
    assert.equal(row?.['added_later'], 7);
    // And inside a transaction of its own afterwards, as the new statement is now in place.
    await store.db.transaction().execute(async (trx) => {
      assert.equal((await findRun(trx, 'run-schema'))?.run_id, 'run-schema');
    });
  });

  it('prepares again on a new connection after the old one is lost', async (t) => {
    if (test.kind !== 'postgres') return t.skip('needs PostgreSQL');
    const pid = (await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(store.db))
      .rows[0]!.pid;
    const admin = await openStore(
      { kind: 'postgres', url: test.url, poolSize: 1 },
      createLogger({ level: 'silent', redactor: new Redactor() }),
    );
    try {
      await sql`SELECT pg_terminate_backend(${pid})`.execute(admin.db);
    } finally {
      await admin.close();
    }
    // Calls fail while the pool still hands out the lost connection; it then opens a new one.
    let row;
    for (let tries = 0; !row && tries < 40; tries++) {
      row = await findRun(store.db, 'run-schema').catch(() => undefined);
      if (!row) await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(row?.run_id, 'run-schema');
    assert.ok((await prepared()).some((s) => s.statement.includes('from "runs"')));
  });
});
