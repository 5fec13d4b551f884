import { sql, type Insertable } from 'kysely';
import { payloadHash, ServiceError, type SessionRef } from '@svc/contracts';
import type { LaunchResult, RunnerJobSpec } from '../../launcher/types.js';
import { commandsCreated, runsCreated } from '../../metrics/registry.js';
import type { SessionVolume } from '../../sessions/volumes.js';
import type { CommandRow } from '../../store/commands.js';
import type { RunRow, Tx } from '../../store/runs.js';
import type { RunnerJobsTable } from '../../store/schema.js';
import { commandRowOf } from '../runs/commands.js';
import type { Ctx } from '../context.js';
import type { Prepared } from '../queue/dispatch.js';
import { attemptRunBase, recordFailure, type QueueDeps } from '../queue/launch.js';
import { supervisorSnapshot } from '../queue/outcome.js';
import type { AttemptRow, TaskRow } from '../queue/store.js';
import { checkJobOverrides } from '../runner-jobs/overrides.js';
import { jobRowOf, jobSpecOf, requestHashOf, startJob } from '../runner-jobs/runner-jobs.js';
import { runRowOf } from '../runs/runs.js';
import { sessionPvcOf } from '../sessions/hooks.js';
import { sessionRowOf } from '../sessions/sessions.js';
import type { Claimed } from './claim.js';
import { PREPARED, preparedForOne } from '../../store/prepared.js';

/** A claimed attempt of a bootstrapped session, its checks passed. */
export interface FreshAttempt {
  claimed: Claimed;
  prepared: Prepared;
}

/** A written attempt whose volume and runner Job are still to be created. */
export interface PendingJob {
  task: TaskRow;
  attempt: AttemptRow;
  spec: RunnerJobSpec;
}

/**
 * The records of a whole batch of fresh attempts, in the claim's own transaction, one
 * statement per table: what a manual dispatch writes one attempt at a time through the
 * session, send and runner job layers (session, run, turn, runner Job record, the attempt's
 * references), with the same rows and identities: the attemptId is the turn's idempotency key
 * and the runner Job's attempt id. The sessions are new, the runs unseen by anyone and the
 * tasks locked by the claim, so none of the per-attempt checks for a busy or evicted session,
 * or a cancel meanwhile, apply. Each session's volume is named as it will be created, after
 * the commit and before its Job (see startBatch). Returns the jobs to start.
 */
export async function writeRecords(
  ctx: Ctx,
  trx: Tx,
  deps: QueueDeps,
  fresh: readonly FreshAttempt[],
): Promise<PendingJob[]> {
  if (fresh.length === 0) return [];
  const built = fresh.map((f) =>
    buildRecords(ctx, f, deps.volumes.planned(f.claimed.attempt.session_id!)),
  );
  // Sessions with their runs (a run names its session); the commands, then the runner Job
  // records with the attempts' references: three statements for the whole batch.
  const runs = await trx
    .with('fresh_sessions', (q) => q.insertInto('sessions').values(built.map((b) => b.session)))
    .insertInto('runs')
    .values(built.map((b) => b.run))
    .returningAll()
    .modifyEnd(preparedForOne(built.length))
    .execute();
  const commands = await trx
    .insertInto('commands')
    .values(built.map((b) => b.command))
    .returningAll()
    .modifyEnd(preparedForOne(built.length))
    .execute();
  const runById = new Map(runs.map((r) => [r.run_id, r]));
  const commandById = new Map(commands.map((c) => [c.command_id, c]));
  // The scheduler asks for no overrides: every job of the batch gets the default image.
  const { image } = checkJobOverrides(deps.runnerJobs.images, {}, [], {});
  const jobs = built.map((b) => {
    const run = runById.get(b.run.run_id)!;
    const body = { attemptId: b.attempt.attempt_id, commandId: b.command.command_id };
    const pvc = sessionPvcOf(ctx.config, b.session, b.volume);
    const spec = jobSpecOf(ctx, deps.runnerJobs, run, body.commandId, body, image, pvc);
    return { spec, row: jobRowOf(ctx, deps.runnerJobs, spec, body, requestHashOf(body, image)) };
  });
  const attempts = await writeReferences(
    trx,
    jobs.map((j) => j.row),
    built.map((b, i) => ({
      b,
      run: runById.get(b.run.run_id)!,
      command: commandById.get(b.command.command_id)!,
      spec: jobs[i]!.spec,
    })),
  );
  runsCreated.inc(fresh.length);
  commandsCreated.inc({ type: 'turn' }, fresh.length);
  return built.map((b, i) => ({
    task: b.task,
    attempt: attempts.get(b.attempt.attempt_id)!,
    spec: jobs[i]!.spec,
  }));
}

interface Built {
  task: TaskRow;
  attempt: AttemptRow;
  volume: SessionVolume;
  session: ReturnType<typeof sessionRowOf> & {
    session_id: string;
    pvc_name: string;
    pvc_namespace: string;
    storage_kind: string;
  };
  run: ReturnType<typeof runRowOf> & { run_id: string };
  command: ReturnType<typeof commandRowOf> & { command_id: string };
}

/** The rows one attempt's dispatch would write, as the session, send and run layers build them. */
function buildRecords(ctx: Ctx, fresh: FreshAttempt, volume: SessionVolume): Built {
  const { claimed, prepared } = fresh;
  const { task, attempt } = claimed;
  const sessionId = attempt.session_id!;
  const profile = prepared.profile;
  const runBase = attemptRunBase(prepared, task, attempt);
  const runnerJob = { attemptId: attempt.attempt_id };
  const sessionRef: SessionRef = { sessionId, conversationId: null, threadId: null };
  const run = runRowOf(
    ctx,
    { ...runBase, backendProfile: profile, traceSink: null },
    profile,
    sessionRef,
    { queueTaskId: task.task_id },
  );
  const command = commandRowOf(
    ctx,
    run.run_id,
    1,
    { type: 'turn', payload: prepared.payload, idempotencyKey: attempt.attempt_id },
    {
      // The send's request hash: a resend with the attempt id as its key replays this turn.
      requestHash: payloadHash({
        payload: prepared.payload,
        backendProfile: profile,
        runBase,
        runnerJob,
      }),
      target: null,
    },
  );
  const session = {
    ...sessionRowOf(
      ctx,
      sessionId,
      { sessionId, backendProfile: profile, runBase: prepared.runBase },
      profile,
    ),
    pvc_name: volume.pvcName,
    pvc_namespace: volume.namespace,
    pvc_phase: volume.phase,
    // The turn is the session's active work from the start, as after a send.
    active_run_id: run.run_id,
    active_command_id: command.command_id,
    execution_state: 'running',
    version: 2,
  } as Built['session'];
  return {
    task,
    attempt,
    volume,
    session,
    run: { ...run, command_seq: 1, latest_command_id: command.command_id },
    command,
  };
}

/** The runner Job records, and each attempt's references to its run, command and job. */
async function writeReferences(
  trx: Tx,
  jobRows: ReadonlyArray<Insertable<RunnerJobsTable>>,
  refs: ReadonlyArray<{ b: Built; run: RunRow; command: CommandRow; spec: RunnerJobSpec }>,
): Promise<Map<string, AttemptRow>> {
  const now = new Date();
  const column = <T>(pick: (r: (typeof refs)[number]) => T) => refs.map(pick);
  const rows = await trx
    .with('fresh_jobs', (q) => q.insertInto('runner_jobs').values([...jobRows]))
    // A raw CTE body is written as given: its parentheses are part of the SQL text.
    .with(
      'referenced',
      () => sql<AttemptRow>`(
    UPDATE queue_attempts a SET
      run_id = v.run_id, command_id = v.command_id, runner_job_id = v.runner_job_id,
      thread = 'start', runner_id = v.runner_id, job_name = v.job_name, runner_phase = 'pending',
      supervisor = v.supervisor::jsonb, supervisor_at = now(), updated_at = now()
    FROM unnest(
      ${column((r) => r.b.attempt.attempt_id)}::text[], ${column((r) => r.run.run_id)}::text[],
      ${column((r) => r.command.command_id)}::text[],
      ${column((r) => r.spec.runnerJobId)}::text[], ${column((r) => r.spec.runnerId)}::text[],
      ${column((r) => r.spec.jobName)}::text[],
      ${column((r) =>
        JSON.stringify(supervisorSnapshot(now, r.run, r.command, r.b.attempt.session_id!)),
      )}::text[]
    ) AS v(attempt_id, run_id, command_id, runner_job_id, runner_id, job_name, supervisor)
    WHERE a.attempt_id = v.attempt_id
    RETURNING a.*)`,
    )
    .selectFrom('referenced')
    .selectAll()
    .modifyEnd(preparedForOne(refs.length))
    .execute();
  return new Map(rows.map((row) => [row.attempt_id, row]));
}

/**
 * Create each written attempt's session volume and start its runner Job, the Job created once
 * its volume is, each through `schedule` (the scheduler's launch pool). A refusal of either
 * fails the attempt as a manual dispatch's would (the job failed with the launcher's reason,
 * the run cancelled); the started ones are recorded together.
 */
export async function startBatch(
  ctx: Ctx,
  deps: QueueDeps,
  jobs: readonly PendingJob[],
  schedule: <T>(launch: () => Promise<T>) => Promise<T>,
): Promise<void> {
  const outcomes = await Promise.all(
    jobs.map((job) =>
      schedule(async () => {
        const sessionId = job.attempt.session_id!;
        // As for a session created by hand: no run goes on without its session's volume. The
        // launch prepares its Job meanwhile and creates it once the volume is there.
        const volume = deps.volumes.create(sessionId).then(
          () => undefined,
          (error: unknown) =>
            Promise.reject(
              new ServiceError(
                'infra-failed',
                `the volume of session ${sessionId} could not be created: ${error instanceof Error ? error.message : String(error)}`,
              ),
            ),
        );
        try {
          const row = {
            runner_job_id: job.spec.runnerJobId,
            job_name: job.spec.jobName,
            attempt_id: job.spec.attemptId,
          };
          return { job, result: await startJob(ctx, deps.runnerJobs, row, job.spec, volume) };
        } catch (error) {
          await recordFailure(ctx, job.task.task_id, job.attempt, error);
          return null;
        }
      }),
    ),
  );
  const started = outcomes.filter((o): o is { job: PendingJob; result: LaunchResult } => !!o);
  if (started.length === 0) return;
  const column = <T>(pick: (s: (typeof started)[number]) => T) => started.map(pick);
  // Where each job runs is recorded whatever phase a fast job already reported; the jobs and
  // their attempts in one statement (one round trip, one commit). The jobs are the main
  // statement, so their rows are locked before the attempts' (run when it has finished), as
  // in the two statements this replaced.
  await sql`${PREPARED}
    WITH v AS (
      SELECT * FROM unnest(
        ${column((s) => s.job.spec.runnerJobId)}::text[], ${column((s) => s.job.attempt.attempt_id)}::text[],
        ${column((s) => s.result.phase)}::text[], ${column((s) => s.result.logPath)}::text[],
        ${column((s) => s.result.podIdentity)}::text[]
      ) AS v(runner_job_id, attempt_id, phase, log_path, pod_identity)
    ),
    attempts AS (
      UPDATE queue_attempts a SET runner_phase = v.phase, updated_at = now()
      FROM v WHERE a.attempt_id = v.attempt_id AND a.runner_phase = 'pending'
    )
    UPDATE runner_jobs j SET
      phase = CASE WHEN j.phase = 'pending' THEN v.phase ELSE j.phase END,
      log_path = v.log_path, pod_identity = v.pod_identity,
      started_at = coalesce(j.started_at, now()), updated_at = now()
    FROM v WHERE j.runner_job_id = v.runner_job_id`.execute(ctx.db);
}
