import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { Migrator } from 'kysely/migration';
import pg from 'pg';
import { realPostgresAvailable, testServerUrl, withDatabase } from '@svc/testkit';
import { migrationProvider } from '../src/store/migrations/index.js';

const skip = (await realPostgresAvailable()) ? false : 'needs PostgreSQL (a database of its own)';

/**
 * Migration 0020 on a database an earlier version wrote: duplicate live runner Jobs of one
 * command (concurrent creates made them) are resolved to the oldest, runs of queue attempts
 * and judges learn their task, and from then on the database refuses a second live Job.
 */
describe('migration 0020 on existing data', { skip }, () => {
  const name = `svc_t_mig20_${randomBytes(4).toString('hex')}`;
  let server: string;
  let db: Kysely<any>;

  before(async () => {
    server = (await testServerUrl())!;
    const admin = new pg.Client({ connectionString: server });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    db = new Kysely<any>({
      dialect: new PostgresDialect({
        pool: new pg.Pool({ connectionString: withDatabase(server, name), max: 2 }),
      }),
    });
  });
  after(async () => {
    await db?.destroy();
    const admin = new pg.Client({ connectionString: server });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  });

  const job = (id: string, command: string, phase: string, createdAt: string) => sql`
    INSERT INTO runner_jobs (runner_job_id, run_id, command_id, attempt_id, runner_id, job_name,
      namespace, launcher, payload_hash, image, phase, transient_env, ttl_seconds_after_finished,
      created_at)
    VALUES (${id}, 'run-1', ${command}, ${`att-${id}`}, ${`rnr-${id}`}, ${`job-${id}`}, 'local',
      'local', 'h', '{}', ${phase}, '{}', 60, ${createdAt}::timestamptz)`;

  it('keeps the oldest live job of a command, marks the others failed, then enforces one', async () => {
    const migrator = new Migrator({
      db,
      provider: migrationProvider,
      allowUnorderedMigrations: true,
    });
    assert.equal((await migrator.migrateTo('0019-events-watch')).error, undefined);
    await sql`INSERT INTO runs (run_id, tenant_id, project_id, provider_id, backend_profile,
      workspace_ref, execution_policy, state, metadata)
      VALUES ('run-1', 'tenant-a', 'p', 'openai', 'builtin-a', '{}', '{}', 'running', '{}')`.execute(
      db,
    );
    for (const [id, seq] of [
      ['cmd-1', 1],
      ['cmd-2', 2],
    ] as const)
      await sql`INSERT INTO commands (command_id, run_id, seq, type, state, payload_hash, payload,
        expires_at) VALUES (${id}, 'run-1', ${seq}, 'turn', 'confirmed', 'h', '{}',
        now() + interval '1 hour')`.execute(db);
    await sql`INSERT INTO queue_tasks (task_id, tenant_id, project_id, queue, lane, title, payload,
      payload_hash, state, backend_profile, provider_id, workspace_ref, enqueue_seq, change_seq,
      max_attempts, latest_attempt_id)
      VALUES ('tsk-1', 'tenant-a', 'p', 'main', 'default', 't', '{}', 'h', 'running', 'builtin-a',
        'openai', '{}', 1, 1, 3, 'att-q')`.execute(db);
    await sql`INSERT INTO queue_attempts (attempt_id, task_id, retry_index, state, run_id)
      VALUES ('att-q', 'tsk-1', 0, 'running', 'run-1')`.execute(db);
    await job('a', 'cmd-1', 'running', '2026-01-01T00:00:01Z').execute(db);
    await job('b', 'cmd-1', 'running', '2026-01-01T00:00:02Z').execute(db);
    await job('c', 'cmd-1', 'starting', '2026-01-01T00:00:03Z').execute(db);
    await job('d', 'cmd-1', 'failed', '2026-01-01T00:00:00Z').execute(db);
    await job('e', 'cmd-2', 'running', '2026-01-01T00:00:04Z').execute(db);

    assert.equal((await migrator.migrateTo('0020-live-runner-jobs')).error, undefined);
    const rows = await sql<{ runner_job_id: string; phase: string; reason: string | null }>`
      SELECT runner_job_id, phase, terminal_summary->>'reason' AS reason
      FROM runner_jobs ORDER BY runner_job_id`.execute(db);
    assert.deepEqual(
      rows.rows.map((r) => [r.runner_job_id, r.phase, r.reason]),
      [
        ['a', 'running', null],
        ['b', 'failed', 'duplicate-live-job'],
        ['c', 'failed', 'duplicate-live-job'],
        ['d', 'failed', null],
        ['e', 'running', null],
      ],
    );
    const run = await sql<{ queue_task_id: string | null }>`
      SELECT queue_task_id FROM runs WHERE run_id = 'run-1'`.execute(db);
    assert.equal(run.rows[0]!.queue_task_id, 'tsk-1', 'the attempt’s run knows its task');
    await assert.rejects(job('f', 'cmd-1', 'pending', '2026-01-01T00:00:05Z').execute(db), {
      code: '23505',
    });
    // A job of a command whose live job ended may follow it.
    await sql`UPDATE runner_jobs SET phase = 'succeeded' WHERE runner_job_id = 'a'`.execute(db);
    await job('g', 'cmd-1', 'pending', '2026-01-01T00:00:06Z').execute(db);
    assert.equal((await migrator.migrateToLatest()).error, undefined);
  });
});
