import { sql, type Insertable, type Selectable } from 'kysely';
import type { LastValidation, ValidationStatus } from '@svc/contracts';
import { iso, isoRequired } from '../../store/json.js';
import type { Executor } from '../../store/runs.js';
import type { ProviderValidationsTable } from '../../store/schema.js';

/** Store operations of validation records, one function per statement. */

export type ValidationRow = Selectable<ProviderValidationsTable>;

export async function insertValidation(
  db: Executor,
  row: Insertable<ProviderValidationsTable>,
): Promise<ValidationRow> {
  return db.insertInto('provider_validations').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function findValidation(
  db: Executor,
  validationId: string,
): Promise<ValidationRow | undefined> {
  return db
    .selectFrom('provider_validations')
    .selectAll()
    .where('validation_id', '=', validationId)
    .executeTakeFirst();
}

export async function latestValidation(
  db: Executor,
  profile: string,
): Promise<ValidationRow | undefined> {
  return db
    .selectFrom('provider_validations')
    .selectAll()
    .where('profile', '=', profile)
    .orderBy('created_at', 'desc')
    .orderBy('validation_id', 'desc')
    .limit(1)
    .executeTakeFirst();
}

export async function attachRunnerJob(
  db: Executor,
  validationId: string,
  job: { runnerJobId: string; jobName: string },
): Promise<void> {
  await db
    .updateTable('provider_validations')
    .set({ runner_job_id: job.runnerJobId, job_name: job.jobName, updated_at: sql`now()` } as never)
    .where('validation_id', '=', validationId)
    .execute();
}

/** First terminal outcome wins: a later observation never rewrites a finished validation. */
export async function finishValidation(
  db: Executor,
  validationId: string,
  outcome: {
    status: Exclude<ValidationStatus, 'running'>;
    failureKind: string | null;
    message: string | null;
  },
): Promise<ValidationRow | undefined> {
  return db
    .updateTable('provider_validations')
    .set({
      status: outcome.status,
      failure_kind: outcome.failureKind,
      message: outcome.message,
      finished_at: sql`now()`,
      updated_at: sql`now()`,
    } as never)
    .where('validation_id', '=', validationId)
    .where('status', '=', 'running')
    .returningAll()
    .executeTakeFirst();
}

export function toLastValidation(row: ValidationRow): LastValidation {
  return {
    validationId: row.validation_id,
    status: row.status as ValidationStatus,
    failureKind: row.failure_kind,
    message: row.message,
    runId: row.run_id,
    commandId: row.command_id,
    jobName: row.job_name,
    secretResourceVersion: row.secret_resource_version,
    createdAt: isoRequired(row.created_at),
    finishedAt: iso(row.finished_at),
  };
}
