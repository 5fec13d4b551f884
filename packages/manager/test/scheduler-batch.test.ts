import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import type { FakeKube } from '@svc/testkit';
import { plantTrigger, startTestManager, type TestManager } from './helpers.js';
import { waitFor } from './e2e-helpers.js';
import { startFakeKube } from './kube-helpers.js';

/**
 * The scheduler writes a claimed batch's sessions, runs, turns and runner Jobs together. What it
 * writes must be what a manual dispatch writes, record for record, and a refusal from the
 * cluster fails only the attempt it concerns.
 */
const NS = 'svc-v01';
let fake: FakeKube;

const kubeEnv = (extra: Record<string, string> = {}) => ({
  SVC_LAUNCHER: 'kubernetes',
  SVC_SECRET_STORE: 'kubernetes',
  SVC_KUBE_API_URL: fake.url,
  SVC_MANAGER_PUBLIC_URL: 'http://svc-run-manager.svc-v01.svc:8080',
  SVC_KUBE_POLL_INTERVAL_MS: '60000',
  SVC_KUBE_RETRIES: '0',
  ...extra,
});
const SCHEDULING = { SVC_SCHEDULER: 'on', SVC_SCHEDULER_SCAN_MS: '300' };

before(async () => {
  fake = await startFakeKube();
});
after(() => fake.close());

async function submit(t: TestManager, title: string): Promise<string> {
  const res = await t.api('POST', '/api/v1/queue/tasks', {
    tenantId: 'tenant-a',
    projectId: 'proj-1',
    queue: 'batch',
    title,
    // A failed attempt stays the task's outcome (no retry to race the assertions).
    maxAttempts: 1,
    payload: { prompt: 'do the work' },
  });
  assert.equal(res.status, 201, res.raw);
  return res.body.taskId as string;
}

/** Every record an attempt made, ids and times replaced by what they refer to. */
async function recordsOf(t: TestManager, taskId: string) {
  const db = t.manager.store.db;
  const attempt = await db
    .selectFrom('queue_attempts')
    .selectAll()
    .where('task_id', '=', taskId)
    .executeTakeFirstOrThrow();
  const [session, run, command, job] = await Promise.all([
    db.selectFrom('sessions').selectAll().where('session_id', '=', attempt.session_id!).execute(),
    db.selectFrom('runs').selectAll().where('run_id', '=', attempt.run_id!).execute(),
    db.selectFrom('commands').selectAll().where('command_id', '=', attempt.command_id!).execute(),
    db.selectFrom('runner_jobs').selectAll().where('attempt_id', '=', attempt.attempt_id).execute(),
  ]);
  const ids = new Map<string, string>([
    [attempt.attempt_id, '<attempt>'],
    [attempt.session_id!, '<session>'],
    [attempt.run_id!, '<run>'],
    [attempt.command_id!, '<command>'],
    [taskId, '<task>'],
    [job[0]!.runner_job_id, '<runner-job>'],
    [job[0]!.runner_id, '<runner>'],
  ]);
  const normal = (value: unknown): unknown => {
    if (value instanceof Date) return '<time>';
    if (typeof value === 'string') {
      let out = value;
      for (const [id, name] of ids) out = out.split(id).join(name);
      return out.replace(/svc-v01-runner-[0-9a-f]+/g, '<job-name>');
    }
    if (Array.isArray(value)) return value.map(normal);
    if (value && typeof value === 'object')
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, normal(v)]));
    return value;
  };
  return normal({
    session: session[0],
    run: run[0],
    // The send's request hash covers the run metadata, which names the task and attempt.
    command: { ...command[0], request_hash: command[0]!.request_hash ? '<hash>' : null },
    // Each manager records itself; the fake API gives each Job its own uid.
    job: {
      ...job[0],
      token_hash: '<hash>',
      payload_hash: '<hash>',
      manager_instance: '<manager>',
      pod_identity: job[0]!.pod_identity?.replace(/#.*$/, '#<uid>'),
    },
    attempt: { ...attempt, supervisor: null },
  }) as Record<string, Record<string, unknown>>;
}

describe('scheduler batches', () => {
  it('writes what a manual dispatch writes: session, run, turn, runner Job and attempt', async () => {
    const manual = await startTestManager({ env: kubeEnv() });
    try {
      await manual.configureProfile('builtin-a');
      const byHand = await submit(manual, 'one');
      const dispatched = await manual.api('POST', `/api/v1/queue/tasks/${byHand}/dispatch`, {});
      assert.equal(dispatched.status, 201, dispatched.raw);
      const scheduledTask = await submit(manual, 'two');
      await manual.manager.close();
      const t = await startTestManager({ store: manual.store, env: kubeEnv(SCHEDULING) });
      try {
        await waitFor(
          'the scheduled attempt to start',
          async () => {
            const row = await sql<{ phase: string | null }>`
              SELECT a.runner_phase AS phase FROM queue_attempts a
              WHERE a.task_id = ${scheduledTask}`.execute(t.manager.store.db);
            return row.rows[0]?.phase === 'starting';
          },
          15_000,
        );
        const a = await recordsOf(t, byHand);
        const b = await recordsOf(t, scheduledTask);
        for (const kind of ['session', 'run', 'command', 'job', 'attempt'])
          assert.deepEqual(b[kind], a[kind], `${kind} records differ`);
        // The turn is the scheduled run's active work, as after a send.
        assert.equal(b['session']!['active_command_id'], '<command>');
        assert.equal(b['session']!['execution_state'], 'running');
        assert.equal(b['command']!['idempotency_key'], '<attempt>');
        assert.equal(b['job']!['phase'], 'starting');
      } finally {
        await t.close();
      }
    } finally {
      await manual.store.drop();
    }
  });

  it('fails only the attempts the cluster refused, each with the reason', async () => {
    const seeder = await startTestManager({ env: kubeEnv() });
    try {
      await seeder.configureProfile('builtin-a');
      const tasks: string[] = [];
      for (let i = 0; i < 6; i++) tasks.push(await submit(seeder, `task ${i}`));
      await seeder.manager.close();
      fake.clearRequests();
      // One claim and one Job of the batch are refused.
      fake.failNext('POST', 'persistentvolumeclaims', 403, 'Forbidden', 'claims are not allowed');
      fake.failNext('POST', 'jobs', 422, 'Invalid', 'Job spec refused by admission');
      const t = await startTestManager({ store: seeder.store, env: kubeEnv(SCHEDULING) });
      try {
        const db = t.manager.store.db;
        await waitFor(
          'every attempt to start or fail',
          async () => {
            const rows = await db
              .selectFrom('queue_attempts')
              .select(['state', 'runner_phase'])
              .execute();
            return (
              rows.length === 6 &&
              rows.every((r) => r.state === 'failed' || r.runner_phase === 'starting')
            );
          },
          15_000,
        ).catch(async (error: unknown) => {
          const rows = await db.selectFrom('queue_attempts').selectAll().execute();
          console.log(JSON.stringify(rows.map((r) => [r.state, r.runner_phase, r.message])));
          console.log(t.logs.join('').slice(-3000));
          throw error;
        });
        const attempts = await db
          .selectFrom('queue_attempts')
          .selectAll()
          .orderBy('created_at')
          .execute();
        const failed = attempts.filter((a) => a.state === 'failed');
        assert.equal(failed.length, 2, JSON.stringify(attempts.map((a) => a.state)));
        for (const a of failed) assert.equal(a.failure_kind, 'infra-failed');
        const messages = failed.map((a) => a.message ?? '').sort();
        assert.match(messages.join('\n'), /volume of session .* could not be created/);
        assert.match(messages.join('\n'), /runner job .* could not be started/);
        // The refused Job's run does not stay open: cancelled, its runner Job failed.
        const refusedJob = failed.find((a) => /runner job/.test(a.message ?? ''))!;
        const run = await db
          .selectFrom('runs')
          .select('state')
          .where('run_id', '=', refusedJob.run_id!)
          .executeTakeFirstOrThrow();
        assert.equal(run.state, 'cancelled');
        const jobOf = (attemptId: string) =>
          db
            .selectFrom('runner_jobs')
            .select(['phase', 'terminal_summary'])
            .where('attempt_id', '=', attemptId)
            .executeTakeFirstOrThrow();
        const job = await jobOf(refusedJob.attempt_id);
        assert.equal(job.phase, 'failed');
        assert.equal((job.terminal_summary as { reason: string }).reason, 'launch-failed');
        // The attempt whose claim was refused: its Secret, made while the claim was being
        // created, is deleted again, no Job is created, and its runner Job record is failed.
        const refusedVolume = failed.find((a) => /volume of session/.test(a.message ?? ''))!;
        assert.doesNotMatch(refusedVolume.message!, /runner job/, 'the claim is the reason given');
        assert.equal(fake.get('secrets', NS, `${refusedVolume.job_name}-env`), undefined);
        assert.equal(fake.get('jobs', NS, refusedVolume.job_name!), undefined);
        const unlaunched = await jobOf(refusedVolume.attempt_id);
        assert.equal(unlaunched.phase, 'failed');
        assert.match(
          (unlaunched.terminal_summary as { message: string }).message,
          /volume of session .* could not be created/,
        );
        // The others run: one Kubernetes Job each, naming its own claim and Secret.
        const started = attempts.filter((a) => a.state !== 'failed');
        assert.equal(started.length, 4);
        for (const a of started) {
          const manifest = fake.get('jobs', NS, a.job_name!);
          assert.ok(manifest, `Job ${a.job_name} created`);
          const text = JSON.stringify(manifest);
          assert.ok(text.includes(`svc-v01-session-${a.session_id}`), 'mounts its session claim');
          assert.ok(text.includes(`${a.job_name}-env`), 'reads its own Secret');
        }
        // The failed tasks follow their attempts; the others are dispatched.
        const states = await db.selectFrom('queue_tasks').select(['task_id', 'state']).execute();
        const byTask = new Map(states.map((s) => [s.task_id, s.state]));
        for (const a of failed) assert.equal(byTask.get(a.task_id), 'failed');
        for (const a of started) assert.equal(byTask.get(a.task_id), 'dispatched');
      } finally {
        await t.close();
      }
    } finally {
      await seeder.store.drop();
    }
  });

  it('claims a batch again one at a time when its records cannot be written together, spending one attempt each', async () => {
    const seeder = await startTestManager({ env: kubeEnv() });
    try {
      const seeding = seeder.manager.store.db;
      await seeder.configureProfile('builtin-a');
      const tasks: string[] = [];
      for (let i = 0; i < 4; i++) tasks.push(await submit(seeder, `task ${i}`));
      // The database refuses the batch statement's sessions (and only those): a fault at the
      // edge, as a constraint added by an operator or a full disk would be.
      await plantTrigger(seeding, {
        name: 'refuse_batch_sessions',
        before: 'INSERT',
        table: 'sessions',
        body: `
          IF current_query() LIKE '%fresh_sessions%' THEN
            RAISE EXCEPTION 'batch sessions refused';
          END IF;
          RETURN NEW;`,
      });
      await seeder.manager.close();
      const t = await startTestManager({ store: seeder.store, env: kubeEnv(SCHEDULING) });
      try {
        const db = t.manager.store.db;
        await waitFor(
          'every task to start',
          async () => {
            const rows = await db
              .selectFrom('queue_attempts')
              .select(['runner_phase'])
              .where('task_id', 'in', tasks)
              .execute();
            return rows.length === 4 && rows.every((r) => r.runner_phase === 'starting');
          },
          15_000,
        );
        // The failed batch left nothing: one attempt per task, each with its run and Job.
        const attempts = await db
          .selectFrom('queue_attempts')
          .selectAll()
          .where('task_id', 'in', tasks)
          .execute();
        assert.equal(attempts.length, 4);
        for (const a of attempts) {
          assert.equal(a.state, 'dispatched');
          assert.ok(a.run_id && a.command_id && a.job_name, 'the attempt names its run and Job');
          assert.ok(fake.get('jobs', NS, a.job_name), `Job ${a.job_name} created`);
        }
        const counts = await db
          .selectFrom('queue_tasks')
          .select(['attempt_count', 'state'])
          .where('task_id', 'in', tasks)
          .execute();
        assert.deepEqual(
          counts.map((c) => [c.state, c.attempt_count]),
          tasks.map(() => ['dispatched', 1]),
        );
        assert.ok(
          t.logs.some((line) => line.includes('writing a batch failed; launching one by one')),
          'the fallback is logged',
        );
      } finally {
        await t.close();
      }
    } finally {
      await seeder.store.drop();
    }
  });
});
