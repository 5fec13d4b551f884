import { sql } from 'kysely';
import type { CommandRow } from './commands.js';
import type { Executor, RunRow } from './runs.js';
import { PREPARED } from './prepared.js';

/** What a runner poll needs of its run: the lease, for fencing, and the control signals. */
export type PollRun = Pick<
  RunRow,
  | 'run_id'
  | 'state'
  | 'cancel_requested_at'
  | 'command_seq'
  | 'lease_owner'
  | 'lease_token_hash'
  | 'lease_expires_at'
>;

export interface PollPage {
  run: PollRun;
  /** The page after `afterSeq`, as it stands after this statement's deliveries. */
  rows: CommandRow[];
  /** Commands cancelled after a runner took them: the runner must stop working on them. */
  cancelledCommandIds: string[];
  /** An accepted command of the run is past its TTL: expire, then read again. */
  anyDue: boolean;
}

interface PollRow extends CommandRow {
  run_state: string;
  run_cancel_requested_at: Date | null;
  run_command_seq: number;
  run_lease_owner: string | null;
  run_lease_token_hash: string | null;
  run_lease_expires_at: Date | null;
  cancelled_ids: string[];
  any_due: boolean;
  delivered_state: string | null;
  delivered_at_now: Date | null;
  delivered_runner_id: string | null;
  delivered_updated_at: Date | null;
}

/**
 * A runner poll in one statement (one round trip, one transaction): the run's lease and
 * control signals, the page of commands, and, with `deliverTo` naming the lease holder and its
 * token digest, accepted commands of the page moved to `delivered`. The move is fenced in the
 * same statement, so a caller without the lease changes nothing. A delivery mark is
 * re-derivable (lost in a crash, the command is accepted again and delivered on the next
 * poll; the ack that follows commits durably), so its commit skips the synchronous WAL flush.
 * Undefined when the run does not exist.
 */
export async function pollPage(
  db: Executor,
  runId: string,
  afterSeq: number,
  limit: number,
  deliverTo: { runnerId: string; tokenHash: string } | null,
): Promise<PollPage | undefined> {
  const { rows } = await sql<PollRow>`${PREPARED}
    WITH run AS (
      SELECT runs.*, set_config('synchronous_commit', 'off', true) AS relaxed
      FROM runs WHERE run_id = ${runId}
    ),
    page AS (
      SELECT * FROM commands
      WHERE run_id = ${runId} AND seq > ${afterSeq}
      ORDER BY seq LIMIT ${limit}
    ),
    delivered AS (
      UPDATE commands c SET
        state = 'delivered', delivered_at = now(), runner_id = r.lease_owner, updated_at = now()
      FROM page p, run r
      WHERE c.command_id = p.command_id AND c.state = 'accepted' AND c.expires_at > now()
        AND r.lease_owner = ${deliverTo?.runnerId ?? null}::text
        AND r.lease_token_hash = ${deliverTo?.tokenHash ?? null}::text
      RETURNING c.command_id, c.state, c.delivered_at, c.runner_id, c.updated_at
    )
    SELECT p.*,
      r.state AS run_state,
      r.cancel_requested_at AS run_cancel_requested_at,
      r.command_seq AS run_command_seq,
      r.lease_owner AS run_lease_owner,
      r.lease_token_hash AS run_lease_token_hash,
      r.lease_expires_at AS run_lease_expires_at,
      ARRAY(
        SELECT x.command_id FROM commands x
        WHERE x.run_id = r.run_id AND x.state = 'cancelled' AND x.delivered_at IS NOT NULL
        ORDER BY x.terminal_at DESC LIMIT 50
      ) AS cancelled_ids,
      EXISTS (
        SELECT 1 FROM commands x
        WHERE x.run_id = r.run_id AND x.state = 'accepted' AND x.expires_at <= now()
      ) AS any_due,
      d.state AS delivered_state,
      d.delivered_at AS delivered_at_now,
      d.runner_id AS delivered_runner_id,
      d.updated_at AS delivered_updated_at
    FROM run r
    LEFT JOIN page p ON true
    LEFT JOIN delivered d ON d.command_id = p.command_id
    ORDER BY p.seq`.execute(db);
  const first = rows[0];
  if (!first) return undefined;
  return {
    run: {
      run_id: runId,
      state: first.run_state,
      cancel_requested_at: first.run_cancel_requested_at,
      command_seq: first.run_command_seq,
      lease_owner: first.run_lease_owner,
      lease_token_hash: first.run_lease_token_hash,
      lease_expires_at: first.run_lease_expires_at,
    },
    rows: rows.filter((r) => r.command_id !== null).map(commandOf),
    cancelledCommandIds: first.cancelled_ids,
    anyDue: first.any_due,
  };
}

/** The command columns of a poll row, with this statement's delivery applied. */
function commandOf(row: PollRow): CommandRow {
  const {
    run_state: _state,
    run_cancel_requested_at: _cancel,
    run_command_seq: _seq,
    run_lease_owner: _owner,
    run_lease_token_hash: _hash,
    run_lease_expires_at: _expires,
    cancelled_ids: _cancelled,
    any_due: _due,
    delivered_state,
    delivered_at_now,
    delivered_runner_id,
    delivered_updated_at,
    ...command
  } = row;
  if (delivered_state === null) return command;
  return {
    ...command,
    state: delivered_state,
    delivered_at: delivered_at_now,
    runner_id: delivered_runner_id,
    updated_at: delivered_updated_at!,
  };
}
