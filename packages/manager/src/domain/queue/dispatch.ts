import {
  ServiceError,
  type DispatchBody,
  type DispatchResponse,
  type QueuePlan,
  type RunBase,
  type SessionRef,
} from '@svc/contracts';
import { findCommand } from '../../store/commands.js';
import { dbNow } from '../../store/runs.js';
import { isTerminalCommand } from '../runs/commands.js';
import type { Ctx } from '../context.js';
import { inDispatchScope } from '../dispatch-scope.js';
import { checkJobOverrides, toolsOf } from '../runner-jobs/overrides.js';
import { sendToSession } from '../sessions/send.js';
import { checkDispatchable, claimAttempt, stalled } from './attempts.js';
import { checkSessionRef, checkTaskInputs, runBaseOf } from './inputs.js';
import { launchAttempt, replayAttempt, type QueueDeps } from './launch.js';
import { findAttempt, openAttempt, type TaskRow } from './store.js';
import { getTaskRow } from './views.js';

export type DispatchOutcome =
  { kind: 'dispatch'; response: DispatchResponse } | { kind: 'plan'; plan: QueuePlan };

/** What every attempt of a task is started from; checked before anything is written. */
export interface Prepared {
  profile: string;
  runBase: RunBase;
  payload: Record<string, unknown>;
  sessionRef: SessionRef | null;
}

/**
 * Manual dispatch: a new attempt with its session (bootstrapped when the task names none), run,
 * turn command and runner Job, the references written back to the attempt and task. Returns
 * once the Job is requested; it never waits for the turn. A repeated dispatch naming the same
 * attemptId returns that attempt.
 */
export async function dispatchTask(
  ctx: Ctx,
  deps: QueueDeps,
  taskId: string,
  body: DispatchBody,
): Promise<DispatchOutcome> {
  return inDispatchScope(() => dispatchScoped(ctx, deps, taskId, body));
}

async function dispatchScoped(
  ctx: Ctx,
  deps: QueueDeps,
  taskId: string,
  body: DispatchBody,
): Promise<DispatchOutcome> {
  const task = await getTaskRow(ctx.db, taskId);
  if (body.attemptId) {
    const known = await findAttempt(ctx.db, body.attemptId);
    if (known) return { kind: 'dispatch', response: await replayAttempt(ctx, deps, taskId, known) };
  }
  const open = await openAttempt(ctx.db, taskId);
  // The same attemptId committed by a racing dispatch between the two reads is that attempt.
  if (body.attemptId && open?.attempt_id === body.attemptId)
    return { kind: 'dispatch', response: await replayAttempt(ctx, deps, taskId, open) };
  checkDispatchable(task, open && !stalled(open, await dbNow(ctx.db)) ? open : undefined);
  const prepared = await prepare(ctx, deps, task, body);
  if (body.dryRun) return { kind: 'plan', plan: await plan(ctx, deps, task, prepared, body) };

  const claim = await claimAttempt(ctx, taskId, body.attemptId);
  if (claim.kind === 'replay')
    return { kind: 'dispatch', response: await replayAttempt(ctx, deps, taskId, claim.attempt) };
  return {
    kind: 'dispatch',
    response: await launchAttempt(ctx, deps, claim.task, claim.attempt, prepared, body),
  };
}

/**
 * The checks a run of this task meets now (policy or profiles may have changed since submit),
 * made before an attempt is spent: runner Job overrides, profile usable, task session alive
 * and idle. A dry run meets the same checks, so it refuses what the dispatch would.
 */
export async function prepare(
  ctx: Ctx,
  deps: QueueDeps,
  task: TaskRow,
  body: DispatchBody,
): Promise<Prepared> {
  const runBase = runBaseOf(task);
  checkTaskInputs(ctx, runBase, task.backend_profile, task.payload);
  checkJobOverrides(
    deps.runnerJobs.images,
    body.runnerJob ?? {},
    toolsOf(runBase),
    ctx.config.runnerJobs.platformDefaults,
  );
  await ctx.hooks.assertProfileUsable(task.backend_profile);
  const sessionRef = (task.session_ref as SessionRef | null) ?? null;
  if (sessionRef) {
    const session = await checkSessionRef(ctx.db, sessionRef, task.tenant_id, task.project_id, {
      requireStorage: true,
    });
    await ctx.hooks.checkSessionStorage?.(sessionRef.sessionId);
    const active = session.active_command_id
      ? await findCommand(ctx.db, session.active_command_id)
      : undefined;
    // An attempt is its own turn: it never steers or races another turn of the session.
    if (active && !isTerminalCommand(active.state))
      throw new ServiceError(
        'state-conflict',
        `session ${session.session_id} is serving command ${active.command_id}; dispatch when it is terminal`,
        { reason: 'session-busy', sessionId: session.session_id, commandId: active.command_id },
      );
  }
  return {
    profile: task.backend_profile,
    runBase,
    // An explicit thread in the task's sessionRef wins over the session's own (spec/2).
    payload: {
      ...task.payload,
      ...(task.retry_note
        ? { prompt: withRetryNote(task.payload['prompt'], task.retry_note) }
        : {}),
      ...(sessionRef?.threadId ? { threadId: sessionRef.threadId } : {}),
    },
    sessionRef,
  };
}

async function plan(
  ctx: Ctx,
  deps: QueueDeps,
  task: TaskRow,
  prepared: Prepared,
  body: DispatchBody,
): Promise<QueuePlan> {
  const ref = prepared.sessionRef;
  const session = ref
    ? {
        sessionId: ref.sessionId,
        origin: 'task-session-ref',
        send: await sendToSession(ctx, deps, ref.sessionId, {
          payload: prepared.payload,
          backendProfile: prepared.profile,
          runBase: prepared.runBase,
          dryRun: true,
        }).then((sent) => ({ decision: sent.decision, plan: sent.plan })),
      }
    : { sessionId: null, origin: 'bootstrapped', createSession: true, thread: 'start' };
  return {
    action: 'dispatch',
    taskId: task.task_id,
    dryRun: true,
    mutation: false,
    plan: {
      attempt: {
        attemptId: body.attemptId ?? null,
        retryIndex: task.attempt_count,
        maxAttempts: task.max_attempts,
      },
      taskState: { from: task.state, to: 'dispatched' },
      session,
      createRun: {
        backendProfile: prepared.profile,
        workspaceRef: prepared.runBase.workspaceRef,
        resourceBundleRef: prepared.runBase.resourceBundleRef ?? null,
      },
      createCommand: { type: 'turn' },
      createRunnerJob: { overrides: Object.keys(body.runnerJob ?? {}).sort() },
    },
    valuesPrinted: false,
  };
}

/** A judge's suggestion travels into the next attempt's prompt, after the task's own text. */
export function withRetryNote(prompt: unknown, note: string): string {
  return `${String(prompt)}\n\nA review of the previous attempt asks for this change:\n${note}`;
}
