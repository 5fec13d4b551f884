import { sql } from 'kysely';
import {
  payloadHash,
  ServiceError,
  type ActiveBefore,
  type SendBody,
  type SendResponse,
} from '@svc/contracts';
import { findCommand } from '../../store/commands.js';
import { dbNow, findRun } from '../../store/runs.js';
import { promptOf } from '../runs/command-payload.js';
import { createCommand } from '../runs/commands.js';
import type { Ctx } from '../context.js';
import { trustedClaim } from '../dispatch-scope.js';
import { resolveProfile } from '../runs/run-policy.js';
import { checkJobOverrides, toolsOf } from '../runner-jobs/overrides.js';
import { createRunnerJob, type RunnerJobDeps } from '../runner-jobs/runner-jobs.js';
import { createRun, type RunOrigin } from '../runs/runs.js';
import { sessionPath, type SessionRow } from './records.js';
import { getSessionRow } from './sessions.js';

export interface SendDeps {
  runnerJobs: RunnerJobDeps;
}

interface Decision {
  decision: 'steer' | 'new-run';
  activeBefore: ActiveBefore;
  steerRunId: string | null;
  steerTargetId: string | null;
}

/**
 * Session rule 2, decided from durable state only: steer when the active `turn` was
 * acknowledged by a runner, its run is claimed or running, and the lease is unexpired.
 * Anything else (pending, waiting for a runner, stale lease, terminal, nothing active, a
 * profile switch) starts a new run with a turn, and a runner job unless told not to.
 */
async function decide(ctx: Ctx, row: SessionRow, profile: string): Promise<Decision> {
  const [command, run, now] = await Promise.all([
    row.active_command_id ? findCommand(ctx.db, row.active_command_id) : Promise.resolve(undefined),
    row.active_run_id ? findRun(ctx.db, row.active_run_id) : Promise.resolve(undefined),
    // The database clock is read only when there is a lease to compare it with.
    row.active_run_id ? dbNow(ctx.db) : Promise.resolve(undefined),
  ]);
  const leaseExpired =
    run?.lease_expires_at && now ? new Date(run.lease_expires_at).getTime() <= now.getTime() : null;
  const before = (reason: string): ActiveBefore => ({
    runId: run?.run_id ?? null,
    commandId: command?.command_id ?? null,
    commandType: command?.type ?? null,
    commandState: command?.state ?? null,
    runState: run?.state ?? null,
    leaseOwner: run?.lease_owner ?? null,
    leaseExpired,
    reason,
  });
  const newRun = (reason: string): Decision => ({
    decision: 'new-run',
    activeBefore: before(reason),
    steerRunId: null,
    steerTargetId: null,
  });
  if (profile !== row.backend_profile) return newRun('profile-switch');
  if (!command || !run) return newRun('no-active-command');
  if (['completed', 'failed', 'blocked', 'cancelled', 'expired'].includes(command.state))
    return newRun('active-command-terminal');
  if (command.type !== 'turn') return newRun('active-command-not-a-turn');
  if (command.state !== 'confirmed') return newRun('active-turn-not-acknowledged');
  if (!['claimed', 'running'].includes(run.state)) return newRun(`run-${run.state}`);
  if (leaseExpired !== false) return newRun('lease-expired');
  return {
    decision: 'steer',
    activeBefore: before('acknowledged-turn-with-live-lease'),
    steerRunId: run.run_id,
    steerTargetId: command.command_id,
  };
}

export async function sendToSession(
  ctx: Ctx,
  deps: SendDeps,
  sessionId: string,
  body: SendBody,
  origin: RunOrigin = {},
): Promise<SendResponse> {
  const row = await getSessionRow(ctx.db, sessionId);
  const payload = {
    ...(body.payload ?? {}),
    ...(body.prompt !== undefined ? { prompt: body.prompt } : {}),
  };
  if (!promptOf(payload))
    throw new ServiceError(
      'schema-invalid',
      'send needs a non-empty prompt (or payload.prompt, payload.message, payload.text)',
      { field: 'prompt' },
    );
  await ctx.hooks.checkSessionStorage?.(sessionId);
  const profile =
    body.backendProfile || body.providerProfile ? resolveProfile(body) : row.backend_profile;
  const requestHash = payloadHash({
    payload,
    backendProfile: profile,
    runBase: body.runBase ?? null,
    runnerJob: body.runnerJob ?? null,
  });
  // A reused key is checked first, whatever the session's state now: the same request answers
  // what it created, other content is a conflict (as for commands), never a new run.
  const replay = body.idempotencyKey
    ? await replayed(ctx, sessionId, body.idempotencyKey, requestHash, payload)
    : null;
  const decision = await decide(ctx, row, profile);
  const runBase = { ...row.run_base, ...(body.runBase ?? {}) } as Record<string, unknown>;
  // A new run's runner Job overrides are checked before the run and turn are written.
  if (decision.decision === 'new-run' && body.runnerJob !== false)
    checkJobOverrides(
      deps.runnerJobs.images,
      body.runnerJob ?? {},
      toolsOf(runBase),
      ctx.config.runnerJobs.platformDefaults,
    );
  const base = {
    sessionId,
    decision: decision.decision,
    internalCommandType: decision.decision === 'steer' ? ('steer' as const) : ('turn' as const),
    activeBefore: decision.activeBefore,
    sessionPath: sessionPath(sessionId),
    valuesPrinted: false as const,
  };

  if (body.dryRun) {
    const threadId =
      profile === row.backend_profile ? row.thread_id : (row.profile_threads[profile] ?? null);
    const plan =
      decision.decision === 'steer'
        ? {
            createCommand: {
              runId: decision.steerRunId,
              type: 'steer',
              targetCommandId: decision.steerTargetId,
            },
          }
        : {
            createRun: {
              backendProfile: profile,
              sessionRef: { sessionId, threadId },
              thread: threadId ? 'resume' : 'start',
            },
            createCommand: { type: 'turn' },
            createRunnerJob: body.runnerJob !== false,
          };
    return {
      ...base,
      dryRun: true,
      mutation: false,
      run: null,
      command: null,
      runnerJob: null,
      plan,
    };
  }

  if (replay) {
    const steer = replay.command?.type === 'steer';
    return {
      ...base,
      decision: steer ? 'steer' : 'new-run',
      internalCommandType: steer ? 'steer' : 'turn',
      ...replay,
      dryRun: false,
      mutation: false,
      plan: null,
    };
  }

  if (decision.decision === 'steer') {
    const { command } = await createCommand(
      ctx,
      decision.steerRunId!,
      {
        type: 'steer',
        payload: { ...payload, targetCommandId: decision.steerTargetId },
        ...(body.idempotencyKey ? { idempotencyKey: body.idempotencyKey } : {}),
      },
      { requestHash },
    );
    const run = await findRun(ctx.db, decision.steerRunId!);
    await touch(ctx, sessionId);
    return {
      ...base,
      dryRun: false,
      mutation: true,
      run: run
        ? { runId: run.run_id, state: run.state, backendProfile: run.backend_profile }
        : null,
      command: {
        commandId: command.commandId,
        type: command.type,
        state: command.state,
        threadId: command.threadId,
      },
      runnerJob: null,
      plan: null,
    };
  }

  if (profile !== row.backend_profile) {
    // A profile switch never continues another profile's thread.
    await ctx.db
      .updateTable('sessions')
      .set({
        backend_profile: profile,
        thread_id: row.profile_threads[profile] ?? null,
        updated_at: sql`now()`,
      } as never)
      .where('session_id', '=', sessionId)
      .execute();
  }
  const run = await createRun(
    ctx,
    {
      ...(runBase as Parameters<typeof createRun>[1]),
      backendProfile: profile,
      traceSink: (runBase['traceSink'] as null | undefined) ?? null,
      sessionRef: {
        sessionId,
        ...(row.conversation_id ? { conversationId: row.conversation_id } : {}),
      },
    },
    origin,
  );
  const { command } = await createCommand(
    ctx,
    run.runId,
    {
      type: 'turn',
      payload,
      ...(body.idempotencyKey ? { idempotencyKey: body.idempotencyKey } : {}),
    },
    { requestHash },
  );
  const job =
    body.runnerJob === false
      ? null
      : (
          await createRunnerJob(ctx, deps.runnerJobs, run.runId, {
            ...(body.runnerJob ?? {}),
            commandId: command.commandId,
          })
        ).job;
  await touch(ctx, sessionId);
  return {
    ...base,
    dryRun: false,
    mutation: true,
    run: { runId: run.runId, state: run.state, backendProfile: run.backendProfile },
    command: {
      commandId: command.commandId,
      type: command.type,
      state: command.state,
      threadId: run.sessionRef?.threadId ?? null,
    },
    runnerJob: job
      ? {
          runnerJobId: job.runnerJobId,
          attemptId: job.attemptId,
          jobName: job.jobName,
          phase: job.phase,
        }
      : null,
    plan: null,
  };
}

/**
 * A retried send with the same key finds the command it created the first time (a turn of a
 * new run, or a steer), provided the request is the same; otherwise `idempotency-conflict`.
 */
async function replayed(
  ctx: Ctx,
  sessionId: string,
  key: string,
  requestHash: string,
  payload: Record<string, unknown>,
): Promise<Pick<SendResponse, 'run' | 'command' | 'runnerJob'> | null> {
  const hit = await ctx.db
    .selectFrom('commands as c')
    .innerJoin('runs as r', 'r.run_id', 'c.run_id')
    .select([
      'r.run_id',
      'r.state as run_state',
      'r.backend_profile',
      'c.command_id',
      'c.type',
      'c.state',
      'c.thread_id',
      'c.payload_hash',
      'c.request_hash',
    ])
    .where('r.session_id', '=', sessionId)
    .where('c.idempotency_key', '=', key)
    .where('c.type', 'in', ['turn', 'steer'])
    .orderBy('c.created_at')
    .executeTakeFirst();
  if (!hit) return null;
  // Commands from before request hashes were kept compare their turn payload.
  const same = hit.request_hash
    ? hit.request_hash === requestHash
    : hit.type === 'turn' && hit.payload_hash === payloadHash({ type: 'turn', payload });
  if (!same)
    throw new ServiceError(
      'idempotency-conflict',
      `idempotency key ${key} was used with a different send request on session ${sessionId}`,
      { sessionId, commandId: hit.command_id, runId: hit.run_id },
    );
  if (!hit) return null;
  const job = await ctx.db
    .selectFrom('runner_jobs')
    .selectAll()
    .where('command_id', '=', hit.command_id)
    .orderBy('created_at')
    .executeTakeFirst();
  return {
    run: { runId: hit.run_id, state: hit.run_state, backendProfile: hit.backend_profile },
    command: {
      commandId: hit.command_id,
      type: hit.type,
      state: hit.state,
      threadId: hit.thread_id,
    },
    runnerJob: job
      ? {
          runnerJobId: job.runner_job_id,
          attemptId: job.attempt_id,
          jobName: job.job_name,
          phase: job.phase,
        }
      : null,
  };
}

/** Activity keeps a session's storage from expiring. */
async function touch(ctx: Ctx, sessionId: string): Promise<void> {
  // A session this dispatch created has just been given its full time to live.
  if (trustedClaim(sessionId)) return;
  await ctx.db
    .updateTable('sessions')
    .set({
      expires_at: sql`greatest(expires_at, now() + make_interval(secs => ${ctx.config.sessions.ttlSeconds}))`,
      updated_at: sql`now()`,
    } as never)
    .where('session_id', '=', sessionId)
    .execute();
}
