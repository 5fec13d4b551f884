import { sql, type Insertable } from 'kysely';
import {
  newId,
  payloadHash,
  ServiceError,
  type ExecutionPolicy,
  type RunnerJob,
  type RunnerJobCreateBody,
  type RunnerJobList,
  type SecretRefRecord,
  SECRET_NAMESPACE,
  type WorkReadySummary,
} from '@svc/contracts';
import type { LaunchResult, Launcher, RunnerJobSpec } from '../../launcher/types.js';
import { mintRunnerToken, tokenHash } from '../caller-tokens.js';
import { json } from '../../store/json.js';
import type { Executor, RunRow } from '../../store/runs.js';
import type { RunnerJobsTable } from '../../store/schema.js';
import { getCommandRow, isTerminalCommand } from '../runs/commands.js';
import { secretRefRecord } from '../runs/run-policy.js';
import type { Ctx } from '../context.js';
import { getRunRow, isTerminalRun, lockRunOrThrow } from '../runs/runs.js';
import type { ImagePolicy } from './images.js';
import { checkJobOverrides } from './overrides.js';
import { pollingPaths, toRunnerJob, type RunnerJobRow } from './records.js';
import { forgetTransientEnv, maskTransientEnv } from './masks.js';
import { hashedEntries, platformEndpointDefaults, transientEnvSummary } from './transient-env.js';
import { runnerJobsFailed } from '../../metrics/registry.js';
import { isUniqueViolation } from '../../store/errors.js';
import { answerLive, liveJobOf } from './live.js';

export interface RunnerJobDeps {
  launcher: Launcher;
  images: ImagePolicy;
  /** The URL runners use to reach this manager (known once it listens). */
  managerUrl: () => string;
  /** Non-secret runner settings passed to every job. */
  runnerEnv: () => Record<string, string>;
  /** The work-ready summary a job is expected to have before its runner reports one. */
  workReady: () => WorkReadySummary | null;
}

export interface CreatedRunnerJob {
  job: RunnerJob;
  created: boolean;
}

const policyOf = (run: RunRow) => run.execution_policy as ExecutionPolicy;
const refsOf = (run: RunRow) => ({
  providerSecretRef: policyOf(run).secretScope.providerCredentials[0]!.secretRef,
  toolCredentials: policyOf(run).secretScope.toolCredentials,
});
const extraOf = (run: RunRow, deps: Pick<RunnerJobDeps, 'workReady'>) => ({
  ...refsOf(run),
  expectedWorkReady: deps.workReady(),
});

/**
 * Create a runner Job for a command of a run (manual dispatch). The record is written first
 * (phase pending), then the launcher starts it; the response never waits for a turn.
 * Idempotent by key: the same key and payload hash returns the existing job and attempt.
 */
export async function createRunnerJob(
  ctx: Ctx,
  deps: RunnerJobDeps,
  runId: string,
  body: RunnerJobCreateBody,
): Promise<CreatedRunnerJob> {
  const { image } = checkJobOverrides(deps.images, body, [], {});
  const hash = requestHashOf(body, image);

  await ctx.hooks.checkRunStorage?.(runId);
  if (body.dryRun) return { job: await dryRun(ctx, deps, runId, body, image), created: false };

  const write = () =>
    ctx.db.transaction().execute(async (trx) => {
      const run = await lockRunOrThrow(trx, runId);
      if (body.idempotencyKey) {
        const existing = await trx
          .selectFrom('runner_jobs')
          .selectAll()
          .where('run_id', '=', runId)
          .where('idempotency_key', '=', body.idempotencyKey)
          .executeTakeFirst();
        if (existing) {
          if (existing.payload_hash !== hash) {
            throw new ServiceError(
              'idempotency-conflict',
              `idempotency key ${body.idempotencyKey} was used with a different runner job request`,
              {
                runnerJobId: existing.runner_job_id,
                attemptId: existing.attempt_id,
              },
            );
          }
          return { run, row: existing, spec: null };
        }
      }
      const prepared = await prepare(ctx, trx, deps, run, body, image);
      await ctx.hooks.beforeRunnerJob?.(trx, run);
      if (body.attemptId) {
        const taken = await trx
          .selectFrom('runner_jobs')
          .select('runner_job_id')
          .where('attempt_id', '=', body.attemptId)
          .executeTakeFirst();
        if (taken)
          throw new ServiceError(
            'state-conflict',
            `attempt ${body.attemptId} already has runner job ${taken.runner_job_id}`,
          );
      }
      // One live runner Job per command (the run's row lock orders concurrent creates; a
      // partial unique index backs it): a second create starts nothing.
      const live = await liveJobOf(trx, body.commandId);
      if (live) return { run, row: answerLive(live, body, hash), spec: null };
      const row = await trx
        .insertInto('runner_jobs')
        .values(jobRowOf(ctx, deps, prepared.spec, body, hash))
        .returningAll()
        .executeTakeFirstOrThrow();
      return { run, row, spec: prepared.spec };
    });
  let outcome;
  try {
    outcome = await write();
  } catch (error) {
    // A writer that does not take the run's lock lost the race to the index: answer its job.
    if (!isUniqueViolation(error, 'runner_jobs_live_command_idx')) throw error;
    outcome = await write();
  }

  if (!outcome.spec)
    return { job: toRunnerJob(outcome.row, extraOf(outcome.run, deps)), created: false };
  const launched = await launch(ctx, deps, outcome.row, outcome.spec);
  return { job: toRunnerJob(launched, extraOf(outcome.run, deps)), created: true };
}

/** What makes two runner job requests the same request (idempotency keys compare it). */
export function requestHashOf(body: RunnerJobCreateBody, image: RunnerJobSpec['image']): string {
  return payloadHash({
    commandId: body.commandId,
    attemptId: body.attemptId ?? null,
    image: image.ref,
    retention: body.retention ?? 'ttl',
    ttlSecondsAfterFinished: body.ttlSecondsAfterFinished ?? null,
    transientEnv: hashedEntries(body.transientEnv ?? []),
  });
}

/** The stored record of a job about to be launched: names, hashes and summaries, no values. */
export function jobRowOf(
  ctx: Ctx,
  deps: Pick<RunnerJobDeps, 'launcher'>,
  spec: RunnerJobSpec,
  body: RunnerJobCreateBody,
  hash: string,
): Insertable<RunnerJobsTable> {
  return {
    runner_job_id: spec.runnerJobId,
    run_id: spec.runId,
    command_id: spec.commandId,
    attempt_id: spec.attemptId,
    runner_id: spec.runnerId,
    job_name: spec.jobName,
    namespace: spec.namespace,
    launcher: deps.launcher.kind,
    idempotency_key: body.idempotencyKey ?? null,
    payload_hash: hash,
    image: json(spec.image),
    phase: 'pending',
    transient_env: json(spec.transientEnvSummary),
    session_pvc: spec.sessionPvc ? json(spec.sessionPvc) : null,
    work_ready: null,
    ttl_seconds_after_finished: spec.ttlSecondsAfterFinished,
    retention: body.retention ?? 'ttl',
    manager_instance: ctx.config.instanceId,
    token_hash: tokenHash(spec.managerToken!),
  };
}

async function prepare(
  ctx: Ctx,
  db: Executor,
  deps: RunnerJobDeps,
  run: RunRow,
  body: RunnerJobCreateBody,
  image: RunnerJobSpec['image'],
) {
  if (isTerminalRun(run.state))
    throw new ServiceError(
      'run-terminal',
      `run ${run.run_id} is ${run.state}; no runner job can serve it`,
      { runState: run.state },
    );
  const command = await getCommandRow(db, body.commandId).catch(() => null);
  if (!command || command.run_id !== run.run_id) {
    throw new ServiceError(
      'schema-invalid',
      `commandId ${body.commandId} does not belong to run ${run.run_id}`,
      { field: 'commandId' },
    );
  }
  if (isTerminalCommand(command.state)) {
    throw new ServiceError(
      'state-conflict',
      `command ${command.command_id} is ${command.state}; no runner job is created for it`,
      { commandState: command.state },
    );
  }
  const sessionPvc = (await ctx.hooks.sessionPvcFor?.(run, db)) ?? null;
  return { spec: jobSpecOf(ctx, deps, run, command.command_id, body, image, sessionPvc) };
}

/** Everything a launcher needs for one job of a command, its manager token minted here. */
export function jobSpecOf(
  ctx: Ctx,
  deps: RunnerJobDeps,
  run: RunRow,
  commandId: string,
  body: RunnerJobCreateBody,
  image: RunnerJobSpec['image'],
  sessionPvc: RunnerJobSpec['sessionPvc'],
): RunnerJobSpec {
  const entries = body.transientEnv ?? [];
  const policy = policyOf(run);
  const defaults = platformEndpointDefaults(
    entries,
    policy.secretScope.toolCredentials,
    ctx.config.runnerJobs.platformDefaults,
  );
  const runnerJobId = newId('rj');
  const jobName = `svc-v01-runner-${runnerJobId.slice(3)}`;
  return {
    runnerJobId,
    jobName,
    namespace: deps.launcher.namespace,
    runId: run.run_id,
    commandId,
    attemptId: body.attemptId ?? newId('att'),
    runnerId: newId('rnr'),
    image,
    managerUrl: deps.managerUrl(),
    // The job's own credential: valid for this run's runner routes until the job ends.
    managerToken: mintRunnerToken(),
    profile: run.backend_profile,
    providerSecret: policy.secretScope.providerCredentials[0]!.secretRef,
    toolCredentials: policy.secretScope.toolCredentials,
    bundleCredential: bundleCredentialOf(run),
    transientEnv: [...entries, ...defaults],
    transientEnvSummary: transientEnvSummary(
      entries,
      defaults,
      entries.length + defaults.length > 0
        ? { name: `${jobName}-env`, namespace: deps.launcher.namespace }
        : null,
    ),
    sessionPvc,
    ttlSecondsAfterFinished:
      body.retention === 'keep'
        ? 0
        : (body.ttlSecondsAfterFinished ?? ctx.config.runnerJobs.ttlSecondsAfterFinished),
    timeoutMs:
      (run.execution_policy as { timeoutMs?: number } | null)?.timeoutMs ??
      ctx.config.policy.defaultTimeoutMs,
    runnerEnv: {
      ...deps.runnerEnv(),
      // A queue task's run gets no follow-up turn: its runner closes it once the turn ended
      // and exits, so the task's capacity is free as soon as its work is done.
      ...(run.queue_task_id ? { SVC_RUNNER_SINGLE_TURN: 'true' } : {}),
    },
  };
}

/** The git bundle's fetch credential reference, completed like every SecretRef. */
function bundleCredentialOf(run: RunRow): SecretRefRecord | null {
  const ref = (
    run.resource_bundle_ref as {
      credentialRef?: { name: string; namespace?: string; keys?: string[] };
    } | null
  )?.credentialRef;
  return ref ? secretRefRecord(SECRET_NAMESPACE, ref.name, ref.keys ?? ['token']) : null;
}

async function dryRun(
  ctx: Ctx,
  deps: RunnerJobDeps,
  runId: string,
  body: RunnerJobCreateBody,
  image: RunnerJobSpec['image'],
): Promise<RunnerJob> {
  const run = await getRunRow(ctx, runId);
  const { spec } = await prepare(ctx, ctx.db, deps, run, body, image);
  return {
    runnerJobId: spec.runnerJobId,
    runId,
    commandId: spec.commandId,
    attemptId: spec.attemptId,
    runnerId: spec.runnerId,
    jobName: spec.jobName,
    namespace: spec.namespace,
    launcher: deps.launcher.kind,
    logPath: null,
    podIdentity: null,
    phase: 'pending',
    image,
    transientEnv: spec.transientEnvSummary,
    ...refsOf(run),
    sessionPvc: spec.sessionPvc,
    workReady: deps.workReady(),
    polling: pollingPaths(runId, spec.commandId, spec.runnerJobId),
    retention: body.retention ?? 'ttl',
    ttlSecondsAfterFinished: spec.ttlSecondsAfterFinished,
    exitCode: null,
    terminalSummary: null,
    createdAt: new Date().toISOString(),
    startedAt: null,
    finishedAt: null,
    dryRun: true,
    manifest: deps.launcher.render(spec),
    valuesPrinted: false,
  };
}

async function launch(
  ctx: Ctx,
  deps: RunnerJobDeps,
  row: RunnerJobRow,
  spec: RunnerJobSpec,
): Promise<RunnerJobRow> {
  const result = await startJob(ctx, deps, row, spec);
  // Where the job runs is recorded whatever phase a fast job already reported.
  return ctx.db
    .updateTable('runner_jobs')
    .set({
      phase: sql`CASE WHEN phase = 'pending' THEN ${result.phase} ELSE phase END`,
      log_path: result.logPath,
      pod_identity: result.podIdentity,
      started_at: sql`coalesce(started_at, now())`,
      updated_at: sql`now()`,
    } as never)
    .where('runner_job_id', '=', row.runner_job_id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Hand a recorded job to the launcher. A refusal is recorded on the job (phase failed, reason
 * launch-failed) and thrown as infra-failed; success is left for the caller to record.
 */
export async function startJob(
  ctx: Ctx,
  deps: Pick<RunnerJobDeps, 'launcher'>,
  row: Pick<RunnerJobRow, 'runner_job_id' | 'job_name' | 'attempt_id'>,
  spec: RunnerJobSpec,
  ready?: Promise<void>,
): Promise<LaunchResult> {
  // Masked before the launcher sees them: even its error messages must not carry a value.
  maskTransientEnv(
    ctx.redactor,
    row.runner_job_id,
    spec.transientEnv,
    spec.transientEnvSummary.defaultsAdded,
  );
  // What the Job waits for (its session volume) fails with its own reason, not as the launch's.
  let notReady: { reason: unknown } | undefined;
  const gate = ready?.catch((reason: unknown) => {
    notReady = { reason };
    throw reason;
  });
  // Handled here too: a launcher that fails before it awaits the gate must not leave its
  // rejection unhandled (the launch's own error is what this reports then).
  gate?.catch(() => undefined);
  try {
    return await deps.launcher.launch(spec, gate);
  } catch (error) {
    const message = ctx.redactor.redact(error instanceof Error ? error.message : String(error));
    forgetTransientEnv(ctx.redactor, row.runner_job_id);
    await ctx.db
      .updateTable('runner_jobs')
      .set({
        phase: 'failed',
        finished_at: sql`now()`,
        terminal_summary: json({ reason: 'launch-failed', message }),
        updated_at: sql`now()`,
      } as never)
      .where('runner_job_id', '=', row.runner_job_id)
      .execute();
    runnerJobsFailed.inc({ stage: 'launch' });
    ctx.logger.error({ jobName: row.job_name, err: message }, 'runner job launch failed');
    if (notReady) throw notReady.reason;
    throw new ServiceError(
      'infra-failed',
      `runner job ${row.job_name} could not be started: ${message}`,
      {
        runnerJobId: row.runner_job_id,
        attemptId: row.attempt_id,
      },
    );
  }
}

async function findJob(ctx: Pick<Ctx, 'db'>, runnerJobId: string): Promise<RunnerJobRow> {
  const row = await ctx.db
    .selectFrom('runner_jobs')
    .selectAll()
    .where('runner_job_id', '=', runnerJobId)
    .executeTakeFirst();
  if (!row) throw new ServiceError('not-found', `runner job ${runnerJobId} not found`);
  return row;
}

export async function getRunnerJob(
  ctx: Ctx,
  deps: Pick<RunnerJobDeps, 'workReady'>,
  runId: string,
  runnerJobId: string,
): Promise<RunnerJob> {
  const run = await getRunRow(ctx, runId);
  const row = await findJob(ctx, runnerJobId);
  if (row.run_id !== runId)
    throw new ServiceError('not-found', `runner job ${runnerJobId} not found in run ${runId}`);
  return toRunnerJob(row, extraOf(run, deps));
}

export async function listRunnerJobs(
  ctx: Ctx,
  deps: Pick<RunnerJobDeps, 'workReady'>,
  runId: string,
  commandId: string | undefined,
): Promise<RunnerJobList> {
  const run = await getRunRow(ctx, runId);
  let query = ctx.db.selectFrom('runner_jobs').selectAll().where('run_id', '=', runId);
  if (commandId) query = query.where('command_id', '=', commandId);
  const rows = await query.orderBy('created_at').limit(200).execute();
  return { runId, runnerJobs: rows.map((row) => toRunnerJob(row, extraOf(run, deps))) };
}
