import { sql, type Insertable, type Selectable } from 'kysely';
import type { CommandsTable } from './schema.js';
import type { Executor, Tx } from './runs.js';
import { WAKE_CHANNEL } from './wakeups.js';
import { PREPARED } from './prepared.js';

export type CommandRow = Selectable<CommandsTable>;

const NON_TERMINAL = ['accepted', 'delivered', 'confirmed'] as const;

export async function insertCommand(
  db: Executor,
  row: Insertable<CommandsTable>,
): Promise<CommandRow> {
  return db.insertInto('commands').values(row).returningAll().executeTakeFirstOrThrow();
}

/**
 * A new command, its run's command seq and latest command, and the run's wake-up, in one
 * statement (the caller holds the run lock): one round trip where three were. NOTIFY is sent
 * on commit, so a woken long-poll always finds the command.
 */
export async function insertCommandOfRun(
  trx: Tx,
  row: Insertable<CommandsTable>,
  latestCommandId: string | null,
  wakeKey: string,
): Promise<CommandRow> {
  const { woke: _woke, ...inserted } = await trx
    .with('inserted', (db) => db.insertInto('commands').values(row).returningAll())
    .with('bumped', (db) =>
      db
        .updateTable('runs')
        .set({
          command_seq: row.seq,
          latest_command_id: latestCommandId,
          updated_at: sql`now()`,
        } as never)
        .where('run_id', '=', row.run_id),
    )
    .selectFrom('inserted')
    .selectAll()
    .select(sql<string>`pg_notify(${WAKE_CHANNEL}, ${wakeKey})::text`.as('woke'))
    .executeTakeFirstOrThrow();
  return inserted;
}

export async function findCommand(
  db: Executor,
  commandId: string,
): Promise<CommandRow | undefined> {
  return db
    .selectFrom('commands')
    .selectAll()
    .where('command_id', '=', commandId)
    .modifyEnd(PREPARED)
    .executeTakeFirst();
}

export async function findCommandByKey(
  db: Executor,
  runId: string,
  key: string,
): Promise<CommandRow | undefined> {
  return db
    .selectFrom('commands')
    .selectAll()
    .where('run_id', '=', runId)
    .where('idempotency_key', '=', key)
    .executeTakeFirst();
}

export async function nonTerminalCommands(db: Executor, runId: string): Promise<CommandRow[]> {
  return db
    .selectFrom('commands')
    .selectAll()
    .where('run_id', '=', runId)
    .where('state', 'in', NON_TERMINAL)
    .orderBy('seq')
    .execute();
}

/** Latest non-terminal turn: the target of a steer or interrupt that names none. */
export async function activeTurn(db: Executor, runId: string): Promise<CommandRow | undefined> {
  return db
    .selectFrom('commands')
    .selectAll()
    .where('run_id', '=', runId)
    .where('type', '=', 'turn')
    .where('state', 'in', NON_TERMINAL)
    .orderBy('seq', 'desc')
    .limit(1)
    .executeTakeFirst();
}

export async function updateCommand(
  db: Executor,
  commandId: string,
  patch: Partial<Record<keyof CommandsTable, unknown>>,
): Promise<CommandRow> {
  return db
    .updateTable('commands')
    .set({ ...patch, updated_at: sql`now()` } as never)
    .where('command_id', '=', commandId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Whether any accepted command (of one run, or any) is past its TTL: a cheap probe. */
export async function anyDue(db: Executor, runId?: string): Promise<boolean> {
  let query = db
    .selectFrom('commands')
    .select('command_id')
    .where('state', '=', 'accepted')
    .where('expires_at', '<=', sql<Date>`now()`);
  if (runId) query = query.where('run_id', '=', runId);
  return (await query.limit(1).executeTakeFirst()) !== undefined;
}

/**
 * accepted -> expired for commands past their TTL. Returns the commands it moved (a command
 * another transaction expired first is not among them: the state condition decides).
 */
export async function expireDue(
  db: Executor,
  runId?: string,
): Promise<Array<Pick<CommandRow, 'command_id' | 'run_id' | 'thread_id'>>> {
  let query = db
    .updateTable('commands')
    .set({
      state: 'expired',
      terminal_at: sql`now()`,
      failure_kind: 'command-expired',
      message: 'not delivered to a runner within its TTL',
      updated_at: sql`now()`,
    } as never)
    .where('state', '=', 'accepted')
    .where('expires_at', '<=', sql<Date>`now()`);
  if (runId) query = query.where('run_id', '=', runId);
  return query.returning(['command_id', 'run_id', 'thread_id']).execute();
}
