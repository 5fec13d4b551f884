import {
  TERMINAL_JOB_PHASES,
  type RunnerJobPhase,
  type Validation,
  type ValidationStatus,
} from '@svc/contracts';
import { iso, isoRequired } from '../../store/json.js';
import type { CommandRow } from '../../store/commands.js';
import { getCommandRow, isTerminalCommand } from '../runs/commands.js';
import type { Ctx } from '../context.js';
import { buildResult } from '../runs/results.js';
import type { RunnerJobRow } from '../runner-jobs/records.js';
import { finishValidation, type ValidationRow } from './validation-records.js';

/**
 * What a validation concluded, derived from durable facts only: the canary command's state and
 * failure kind, its result (terminal_status and the assistant reply) and the runner job's
 * phase. `completed` needs terminal completed AND a non-empty reply. The first terminal
 * conclusion is persisted and never rewritten.
 */

const MAX_REPLY = 200;

interface Outcome {
  status: ValidationStatus;
  failureKind: string | null;
  message: string | null;
}

export async function observeValidation(
  ctx: Ctx,
  row: ValidationRow,
): Promise<{ row: ValidationRow; view: Validation }> {
  if (!row.run_id || !row.command_id) return { row, view: toView(row, null, null, null) };
  // Reads go job, command, result. A job found ended while the command (read after) is still
  // open really ended first; a command found terminal has its terminal_status event (written in
  // the same transaction) visible to the result read after it.
  const job = row.runner_job_id ? await findJob(ctx, row.runner_job_id) : undefined;
  const command = await getCommandRow(ctx.db, row.command_id, row.run_id);
  const result = await buildResult(ctx, row.run_id, { commandId: row.command_id });
  const reply = result.completed && result.reply?.trim() ? result.reply.trim() : null;

  let current = row;
  if (row.status === 'running') {
    const outcome = conclude(command, job, reply);
    if (outcome.status !== 'running') {
      current =
        (await finishValidation(ctx.db, row.validation_id, {
          status: outcome.status,
          failureKind: outcome.failureKind,
          message: outcome.message,
        })) ?? row;
    }
  }
  const view = toView(current, command, job ?? null, reply);
  view.evidence.terminalStatus = result.terminalStatus;
  return { row: current, view };
}

function conclude(
  command: CommandRow,
  job: RunnerJobRow | undefined,
  reply: string | null,
): Outcome {
  if (isTerminalCommand(command.state)) {
    switch (command.state) {
      case 'completed':
        return reply
          ? { status: 'completed', failureKind: null, message: null }
          : {
              status: 'failed',
              failureKind: 'backend-failed',
              message: 'the canary turn completed without an assistant reply',
            };
      case 'cancelled':
        return { status: 'cancelled', failureKind: 'cancelled', message: command.message };
      case 'expired':
        return {
          status: 'failed',
          failureKind: 'infra-failed',
          message: 'no runner picked up the canary command before it expired',
        };
      default:
        return {
          status: 'failed',
          failureKind: command.failure_kind ?? 'backend-failed',
          message: command.message,
        };
    }
  }
  const phase = job?.phase as RunnerJobPhase | undefined;
  if (job && phase && TERMINAL_JOB_PHASES.includes(phase)) {
    if (phase === 'cancelled')
      return {
        status: 'cancelled',
        failureKind: 'cancelled',
        message: 'the runner job was cancelled',
      };
    return {
      status: 'failed',
      failureKind: 'infra-failed',
      message: `runner job ${job.job_name} ended (${phase}, exit code ${job.exit_code ?? 'none'}) before the canary command finished`,
    };
  }
  return { status: 'running', failureKind: null, message: null };
}

function toView(
  row: ValidationRow,
  command: CommandRow | null,
  job: RunnerJobRow | null,
  reply: string | null,
): Validation {
  return {
    validationId: row.validation_id,
    profile: row.profile,
    status: row.status as ValidationStatus,
    failureKind: row.failure_kind,
    message: row.message,
    runId: row.run_id,
    commandId: row.command_id,
    runnerJobId: row.runner_job_id,
    jobName: row.job_name,
    secretResourceVersion: row.secret_resource_version,
    reply: reply ? reply.slice(0, MAX_REPLY) : null,
    evidence: {
      commandState: command?.state ?? null,
      terminalStatus: null,
      runnerJobPhase: job?.phase ?? null,
      runnerJobSummary: (job?.terminal_summary as Record<string, unknown> | null) ?? null,
    },
    pollUrl: validationPath(row.profile, row.validation_id),
    createdAt: isoRequired(row.created_at),
    finishedAt: iso(row.finished_at),
    valuesPrinted: false,
  };
}

export function validationPath(profile: string, validationId: string): string {
  return `/api/v1/provider-profiles/${profile}/validations/${validationId}`;
}

async function findJob(
  ctx: Pick<Ctx, 'db'>,
  runnerJobId: string,
): Promise<RunnerJobRow | undefined> {
  return ctx.db
    .selectFrom('runner_jobs')
    .selectAll()
    .where('runner_job_id', '=', runnerJobId)
    .executeTakeFirst();
}
