import {
  isServiceError,
  newId,
  SECRET_NAMESPACE,
  ServiceError,
  type RunCreateBody,
  type Validation,
  type ValidationStarted,
} from '@svc/contracts';
import type { SecretStore } from '../../secrets/store.js';
import { createCommand } from '../runs/commands.js';
import type { Ctx } from '../context.js';
import { providerSecretName } from '../runs/run-policy.js';
import { createRunnerJob, type RunnerJobDeps } from '../runner-jobs/runner-jobs.js';
import { cancelRun, createRun } from '../runs/runs.js';
import { audited } from './audit.js';
import { assertManageableProfile } from './rules.js';
import { profileSecretMeta } from './secret-io.js';
import { requiredProfileKeys } from './status.js';
import { observeValidation, validationPath } from './validation-outcome.js';
import {
  attachRunnerJob,
  findValidation,
  finishValidation,
  insertValidation,
} from './validation-records.js';

/**
 * Provider validation (spec/2 rule 6): a real canary through the same run, command and runner
 * job path every run takes. The runner reads the profile Secret into an agent home and drives
 * the coding agent against the provider; nothing here reads the Secret's values or calls the
 * provider. The answer is immediate (`running`); the outcome is observed by polling.
 */

export const CANARY_PROMPT =
  'This is a connectivity check of the model provider. Reply with exactly one word: ready';

export interface ValidationDeps {
  secrets: SecretStore;
  runnerJobs: RunnerJobDeps;
}

export async function startValidation(
  ctx: Ctx,
  deps: ValidationDeps,
  profile: string,
  traceId: string,
): Promise<ValidationStarted> {
  assertManageableProfile(profile);
  return audited(ctx, { profile, action: 'validate', traceId }, () =>
    launchCanary(ctx, deps, profile),
  );
}

async function launchCanary(
  ctx: Ctx,
  deps: ValidationDeps,
  profile: string,
): Promise<ValidationStarted> {
  const validationId = newId('val');
  const meta = await profileSecretMeta(ctx, deps.secrets, profile);
  const record = {
    validation_id: validationId,
    profile,
    secret_resource_version: meta?.resourceVersion ?? null,
  };

  let runId: string;
  try {
    runId = (await createRun(ctx, canaryRun(ctx, profile, validationId))).runId;
  } catch (error) {
    // An unusable profile (no Secret) is a validation outcome worth keeping as lastValidation.
    if (isServiceError(error) && error.failureKind === 'secret-unavailable') {
      await insertValidation(ctx.db, {
        ...record,
        status: 'failed',
        failure_kind: error.failureKind,
        message: error.message,
        finished_at: new Date(),
      });
      throw new ServiceError(error.failureKind, error.message, {
        ...error.details,
        validationId,
      });
    }
    throw error;
  }

  const { command } = await createCommand(ctx, runId, {
    type: 'turn',
    idempotencyKey: validationId,
    payload: { prompt: CANARY_PROMPT, purpose: 'provider-validation', validationId },
  });
  await insertValidation(ctx.db, {
    ...record,
    status: 'running',
    run_id: runId,
    command_id: command.commandId,
  });

  try {
    const { job } = await createRunnerJob(ctx, deps.runnerJobs, runId, {
      commandId: command.commandId,
      idempotencyKey: validationId,
    });
    await attachRunnerJob(ctx.db, validationId, {
      runnerJobId: job.runnerJobId,
      jobName: job.jobName,
    });
    return {
      validationId,
      profile,
      runId,
      commandId: command.commandId,
      jobName: job.jobName,
      status: 'running',
      pollUrl: validationPath(profile, validationId),
    };
  } catch (error) {
    const failureKind = isServiceError(error) ? error.failureKind : 'infra-failed';
    await finishValidation(ctx.db, validationId, {
      status: 'failed',
      failureKind,
      message: isServiceError(error) ? error.message : 'the canary runner job could not be created',
    });
    // Nothing will serve the canary run: close it rather than leave it pending.
    await cancelRun(ctx, runId, 'provider validation could not start a runner').catch(
      () => undefined,
    );
    if (isServiceError(error))
      throw new ServiceError(error.failureKind, error.message, { ...error.details, validationId });
    throw error;
  }
}

function canaryRun(ctx: Ctx, profile: string, validationId: string): RunCreateBody {
  const { profiles, policy } = ctx.config;
  return {
    tenantId: profiles.validationTenant,
    projectId: profiles.validationProject,
    workspaceRef: { kind: 'opaque', workspaceId: validationId },
    providerId: profile,
    backendProfile: profile,
    // The narrowest policy: the canary needs no tools, files or network of its own.
    executionPolicy: {
      sandbox: 'read-only',
      approval: policy.defaultApproval,
      network: 'disabled',
      timeoutMs: Math.min(profiles.validationTimeoutMs, policy.maxTimeoutMs),
      secretScope: {
        providerCredentials: [
          {
            profile,
            secretRef: {
              namespace: SECRET_NAMESPACE,
              name: providerSecretName(profile),
              keys: requiredProfileKeys(profile),
            },
          },
        ],
        toolCredentials: [],
      },
    },
    traceSink: null,
    metadata: { purpose: 'provider-validation', validationId },
  };
}

export async function getValidation(
  ctx: Ctx,
  profile: string,
  validationId: string,
): Promise<Validation> {
  assertManageableProfile(profile);
  const row = await findValidation(ctx.db, validationId);
  if (!row || row.profile !== profile)
    throw new ServiceError(
      'not-found',
      `validation ${validationId} of profile ${profile} not found`,
    );
  return (await observeValidation(ctx, row)).view;
}
