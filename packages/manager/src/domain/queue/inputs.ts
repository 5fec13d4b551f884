import { ServiceError, type RunBase, type SessionRef, type TaskSubmitBody } from '@svc/contracts';
import type { Executor } from '../../store/runs.js';
import { checkCommandPayload } from '../runs/command-payload.js';
import type { Ctx } from '../context.js';
import { resolveProfile } from '../runs/run-policy.js';
import { checkRunBase, findSession } from '../sessions/sessions.js';
import type { TaskRow } from './store.js';

/** What a task names when its fields are left out (docs/queue-and-cli.md, "Submit"). */
export const TASK_DEFAULTS = {
  profile: 'builtin-a',
  lane: 'default',
  workspaceRef: { kind: 'opaque' } as const,
};

/** The run fields every attempt of a task starts from: the task's own, passed unchanged. */
export function runBaseOf(task: TaskRow): RunBase {
  return {
    tenantId: task.tenant_id,
    projectId: task.project_id,
    workspaceRef: task.workspace_ref as RunBase['workspaceRef'],
    providerId: task.provider_id,
    ...(task.execution_policy ? { executionPolicy: task.execution_policy } : {}),
    ...(task.resource_bundle_ref
      ? { resourceBundleRef: task.resource_bundle_ref as NonNullable<RunBase['resourceBundleRef']> }
      : {}),
    metadata: task.metadata,
  };
}

/** The run base a submitted body will give its attempts, before the task exists. */
export function runBaseOfBody(body: TaskSubmitBody, profile: string): RunBase {
  return {
    tenantId: body.tenantId,
    projectId: body.projectId,
    workspaceRef: body.workspaceRef ?? TASK_DEFAULTS.workspaceRef,
    providerId: body.providerId ?? profile,
    ...(body.executionPolicy ? { executionPolicy: body.executionPolicy } : {}),
    ...(body.resourceBundleRef ? { resourceBundleRef: body.resourceBundleRef } : {}),
    metadata: body.metadata ?? {},
  };
}

/**
 * Every rule a run of this task would meet, checked when the task is stored, so a task that can
 * never run is refused at once: tenant and project boundary, execution policy ceiling, bundle
 * form, and the turn payload rules (no credentials, cookies, history or skill manifests).
 */
export function checkTaskInputs(
  ctx: Ctx,
  runBase: RunBase,
  profile: string,
  payload: Record<string, unknown>,
): void {
  checkRunBase(ctx, runBase, profile);
  checkCommandPayload('turn', payload, profile);
}

export function profileOf(body: Pick<TaskSubmitBody, 'backendProfile'>): string {
  return resolveProfile({ backendProfile: body.backendProfile ?? TASK_DEFAULTS.profile });
}

/** A task's own session must exist, belong to the same tenant and project, and hold storage. */
export async function checkSessionRef(
  db: Executor,
  ref: SessionRef,
  tenantId: string,
  projectId: string,
  options: { requireStorage: boolean },
) {
  const session = await findSession(db, ref.sessionId);
  if (!session)
    throw new ServiceError(
      'not-found',
      `session ${ref.sessionId} not found; create it with POST /api/v1/sessions or leave sessionRef out`,
      { field: 'sessionRef.sessionId' },
    );
  if (session.tenant_id !== tenantId || session.project_id !== projectId)
    throw new ServiceError(
      'tenant-policy-denied',
      `session ${ref.sessionId} belongs to another tenant or project`,
      { field: 'sessionRef.sessionId' },
    );
  if (options.requireStorage && session.storage_kind === 'evicted')
    throw new ServiceError(
      'session-store-evicted',
      `session ${ref.sessionId} storage was evicted; submit a task without sessionRef or with a live session`,
      { sessionId: ref.sessionId },
    );
  return session;
}
