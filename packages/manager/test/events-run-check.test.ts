import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { createTestStore, realPostgresAvailable, type TestStore } from '@svc/testkit';
import { managerTemplate } from './helpers.js';

const skip = (await realPostgresAvailable()) ? false : 'needs PostgreSQL';

/** The foreign key's own error, as the triggers raise it. */
const isRunReferenceError = (error: pg.DatabaseError) =>
  error.code === '23503' && error.constraint === 'events_run_id_fkey';

/**
 * Every event belongs to a run that exists (migration 0027 checks it once per statement, not
 * once per row): an event of an unknown run is refused with the foreign key's error and takes
 * the rest of its statement with it, the run cannot be deleted under an insert that has not
 * committed, a run's id cannot change under its events, and deleting a run deletes its events.
 */
describe('events and their run', { skip }, () => {
  let store: Extract<TestStore, { kind: 'postgres' }>;
  let pool: pg.Pool;

  before(async () => {
    const created = await createTestStore(managerTemplate);
    if (created.kind !== 'postgres') throw new Error('needs PostgreSQL');
    store = created;
    pool = new pg.Pool({ connectionString: store.url, max: 4 });
    await pool.query(`
      INSERT INTO runs (run_id, tenant_id, project_id, provider_id, backend_profile,
        workspace_ref, execution_policy, state)
      SELECT 'run-' || i, 't', 'p', 'prov', 'codex', '{}', '{}', 'running'
      FROM generate_series(1, 3) i`);
  });

  after(async () => {
    await pool?.end();
    await store?.drop();
  });

  const insert = (client: pg.Pool | pg.PoolClient, rows: Array<[string, number]>) =>
    client.query(
      `INSERT INTO events (run_id, seq, category, observed_at, data)
       SELECT r.run, r.seq, 'system', now(), '{}'
       FROM unnest($1::text[], $2::int[]) AS r(run, seq)`,
      [rows.map((r) => r[0]), rows.map((r) => r[1])],
    );
  const count = async (run: string) =>
    Number(
      (await pool.query('SELECT count(*) FROM events WHERE run_id = $1', [run])).rows[0].count,
    );

  it('refuses an event of an unknown run with the foreign key error, and writes none of its statement', async () => {
    await assert.rejects(
      insert(pool, [
        ['run-1', 1],
        ['run-1', 2],
        ['no-such-run', 1],
      ]),
      (error: pg.DatabaseError) => {
        assert.equal(error.code, '23503');
        assert.equal(error.constraint, 'events_run_id_fkey');
        assert.match(error.detail ?? '', /no-such-run/);
        return true;
      },
    );
    assert.equal(await count('run-1'), 0);
    await insert(pool, [
      ['run-1', 1],
      ['run-2', 1],
      ['run-2', 2],
    ]);
    assert.equal(await count('run-1'), 1);
    assert.equal(await count('run-2'), 2);
  });

  it('refuses to move an event to an unknown run', async () => {
    await assert.rejects(
      pool.query(`UPDATE events SET run_id = 'no-such-run' WHERE run_id = 'run-1'`),
      isRunReferenceError,
    );
    assert.equal(await count('run-1'), 1);
  });

  it('keeps the id of a run that has events', async () => {
    await assert.rejects(
      pool.query(`UPDATE runs SET run_id = 'renamed' WHERE run_id = 'run-2'`),
      isRunReferenceError,
    );
    assert.equal(await count('run-2'), 2);
    // A run without events may still be renamed (as under the foreign key), and back.
    await pool.query(`UPDATE runs SET run_id = 'renamed' WHERE run_id = 'run-3'`);
    await pool.query(`UPDATE runs SET run_id = 'run-3' WHERE run_id = 'renamed'`);
  });

  it('holds the run while an insert of its events is open, and deletes its events with it', async () => {
    const writer = await pool.connect();
    try {
      await writer.query('BEGIN');
      await insert(writer, [
        ['run-3', 1],
        ['run-3', 2],
      ]);
      // The insert's key-share lock: a delete of the run waits for it.
      await assert.rejects(
        (async () => {
          const deleter = await pool.connect();
          try {
            await deleter.query('BEGIN');
            await deleter.query(`SET LOCAL lock_timeout = '200ms'`);
            await deleter.query(`DELETE FROM runs WHERE run_id = 'run-3'`);
          } finally {
            await deleter.query('ROLLBACK').catch(() => {});
            deleter.release();
          }
        })(),
        (error: pg.DatabaseError) => error.code === '55P03',
      );
      await writer.query('COMMIT');
    } finally {
      writer.release();
    }
    assert.equal(await count('run-3'), 2);
    await pool.query(`DELETE FROM runs WHERE run_id IN ('run-2', 'run-3')`);
    assert.equal(await count('run-2'), 0);
    assert.equal(await count('run-3'), 0);
    assert.equal(await count('run-1'), 1, 'the other run keeps its events');
  });

  it('empties the events when the runs are truncated', async () => {
    assert.equal(await count('run-1'), 1);
    await pool.query('TRUNCATE runs CASCADE');
    assert.equal(Number((await pool.query('SELECT count(*) FROM events')).rows[0].count), 0);
  });
});
