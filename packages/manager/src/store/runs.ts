import { sql, type Insertable, type Selectable, type Transaction } from 'kysely';
import type { Db } from './db.js';
import type { Database, RunsTable } from './schema.js';
import { PREPARED } from './prepared.js';

export type RunRow = Selectable<RunsTable>;
export type Tx = Transaction<Database>;
export type Executor = Db | Tx;

export async function insertRun(db: Executor, row: Insertable<RunsTable>): Promise<RunRow> {
  return db.insertInto('runs').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function findRun(db: Executor, runId: string): Promise<RunRow | undefined> {
  return db
    .selectFrom('runs')
    .selectAll()
    .where('run_id', '=', runId)
    .modifyEnd(PREPARED)
    .executeTakeFirst();
}

/** Row lock for the rest of the transaction: serializes every writer of one run. */
export async function lockRun(trx: Tx, runId: string): Promise<RunRow | undefined> {
  return trx
    .selectFrom('runs')
    .selectAll()
    .where('run_id', '=', runId)
    .forUpdate()
    .executeTakeFirst();
}

/**
 * The run of a command, row-locked, found by the command in the same statement: a command's
 * run never changes, so nothing needs reading before the transaction.
 */
export async function lockRunOfCommand(trx: Tx, commandId: string): Promise<RunRow | undefined> {
  return trx
    .selectFrom('runs')
    .selectAll()
    .where('run_id', '=', (eb) =>
      eb.selectFrom('commands').select('run_id').where('command_id', '=', commandId),
    )
    .forUpdate()
    .executeTakeFirst();
}

export async function updateRun(
  db: Executor,
  runId: string,
  patch: Partial<Record<keyof RunsTable, unknown>>,
): Promise<RunRow> {
  return db
    .updateTable('runs')
    .set({ ...patch, updated_at: sql`now()` } as never)
    .where('run_id', '=', runId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** The database clock: leases and ages are judged by one clock across replicas. */
export async function dbNow(db: Executor): Promise<Date> {
  const result = await sql<{ now: Date }>`SELECT now() AS now`.execute(db);
  return result.rows[0]!.now;
}
