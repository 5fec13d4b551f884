import { sql } from 'kysely';
import { TERMINAL_RUN_STATES, type RunActivity } from '@svc/contracts';
import type { Executor, RunRow } from './runs.js';
import { PREPARED } from './prepared.js';

/**
 * What a run record says beyond its own row: its activity and its latest turn. Derived in the
 * statement that reads the run, never stored: the latest turn is the row `latest_command_id`
 * names (kept by the statement that creates a turn), and whether a turn is open, and
 * acknowledged, is one probe of the small open-turn index (migration 0023). A listing page is
 * one statement whatever its size (a join and a probe per row, no query per run).
 */
export interface RunFacts {
  activity: RunActivity;
  lc_command_id: string | null;
  lc_type: string | null;
  lc_state: string | null;
  lc_failure_kind: string | null;
  lc_message: string | null;
  lc_terminal_at: Date | null;
}

export type RunViewRow = RunRow & RunFacts;

/** A run just created: nothing to read. */
export const NO_FACTS: RunFacts = {
  activity: 'idle',
  lc_command_id: null,
  lc_type: null,
  lc_state: null,
  lc_failure_kind: null,
  lc_message: null,
  lc_terminal_at: null,
};

const CLOSED = sql.raw(TERMINAL_RUN_STATES.map((s) => `'${s}'`).join(', '));

/**
 * The activity of the run aliased `runs`: closed when it is terminal; else its open turns
 * decide (turn or resume commands not yet terminal): one acknowledged means turn-active, only
 * waiting ones (accepted, delivered) waiting-runner, none idle. Turns run one at a time, so a
 * turn queued behind an active one leaves the run turn-active.
 */
export const activityOf = sql<RunActivity>`CASE WHEN runs.state IN (${CLOSED}) THEN 'closed'
  ELSE CASE (
    SELECT max(CASE WHEN c.state = 'confirmed' THEN 2 ELSE 1 END) FROM commands c
    WHERE c.run_id = runs.run_id AND c.state IN ('accepted', 'delivered', 'confirmed')
      AND c.type IN ('turn', 'resume')
  ) WHEN 2 THEN 'turn-active' WHEN 1 THEN 'waiting-runner' ELSE 'idle' END END`;

/** `runs` joined with its latest turn (`lc`), every run column and the facts selected. */
export function runViews(db: Executor) {
  return db
    .selectFrom('runs')
    .leftJoin('commands as lc', 'lc.command_id', 'runs.latest_command_id')
    .selectAll('runs')
    .select([
      activityOf.as('activity'),
      'lc.command_id as lc_command_id',
      'lc.type as lc_type',
      'lc.state as lc_state',
      'lc.failure_kind as lc_failure_kind',
      'lc.message as lc_message',
      'lc.terminal_at as lc_terminal_at',
    ]);
}

/** One run with its facts and the database clock (leases are judged by it), in one statement. */
export async function findRunView(
  db: Executor,
  runId: string,
): Promise<(RunViewRow & { view_now: Date }) | undefined> {
  return runViews(db)
    .select(sql<Date>`now()`.as('view_now'))
    .where('runs.run_id', '=', runId)
    .modifyEnd(PREPARED)
    .executeTakeFirst();
}
