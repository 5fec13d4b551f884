import { sql } from 'kysely';
import type { CommandRow } from './commands.js';
import type { Executor } from './runs.js';
import { PREPARED } from './prepared.js';

export type AckOutcome =
  | { kind: 'acknowledged'; command: CommandRow }
  | { kind: 'not-found' }
  | {
      kind: 'lease-conflict';
      run: { run_id: string; lease_owner: string | null; lease_expires_at: Date | null };
    }
  /** Fenced, but the command was not in an acknowledgeable state: the caller reads it again. */
  | { kind: 'refused' }
  /**
   * Standalone, nothing written: the command's queue attempt must follow the acknowledgement
   * in the same transaction. The caller acknowledges again inside its own, then follows.
   */
  | { kind: 'follow' };

interface AckRow extends Omit<CommandRow, 'command_id'> {
  /** Null when nothing was acknowledged. */
  command_id: string | null;
  lock_run_id: string | null;
  run_lease_owner: string | null;
  run_lease_expires_at: Date | null;
  fenced: boolean;
  follow: boolean;
}

/**
 * A runner's acknowledgement in one statement (one round trip, one transaction, committed
 * durably): the command's run row locked, the lease fenced (owner and token digest), the
 * command moved to `confirmed` (from accepted or delivered, or from confirmed by another
 * runner: a replacement takes over), and a claimed run moved to `running`. The command's own
 * conditions are re-checked on its newest version if another transaction changed it meanwhile,
 * so a command cancelled or expired concurrently is never confirmed.
 *
 * `standalone` (a call of its own, committed at once): a command whose queue attempt is still
 * `dispatched` is left alone and answered `follow`, so the attempt and its task move to
 * `running` in the caller's transaction with the acknowledgement (the common plain turn pays
 * nothing more than one indexed probe of the few dispatched attempts).
 */
export async function acknowledge(
  db: Executor,
  commandId: string,
  runnerId: string,
  tokenHash: string,
  standalone: boolean,
): Promise<AckOutcome> {
  const { rows } = await sql<AckRow>`${PREPARED}
    WITH run AS (
      SELECT run_id, state, lease_owner, lease_token_hash, lease_expires_at FROM runs
      WHERE run_id = (SELECT run_id FROM commands WHERE command_id = ${commandId})
      FOR UPDATE
    ),
    fenced AS (
      SELECT run_id FROM run WHERE lease_owner = ${runnerId} AND lease_token_hash = ${tokenHash}
    ),
    follow AS (
      SELECT ${standalone}::boolean AND EXISTS (
        SELECT 1 FROM queue_attempts WHERE command_id = ${commandId} AND state = 'dispatched'
      ) AS needed
    ),
    acked AS (
      UPDATE commands c SET
        state = 'confirmed', confirmed_at = now(), runner_id = ${runnerId},
        delivered_at = coalesce(c.delivered_at, now()), updated_at = now()
      FROM fenced f
      WHERE c.command_id = ${commandId} AND c.run_id = f.run_id
        AND NOT (SELECT needed FROM follow)
        AND (c.state IN ('accepted', 'delivered')
          OR (c.state = 'confirmed' AND c.runner_id IS DISTINCT FROM ${runnerId}))
      RETURNING c.*
    ),
    running AS (
      UPDATE runs r SET state = 'running', updated_at = now()
      FROM acked a
      WHERE r.run_id = a.run_id AND r.state IN ('claimed', 'pending')
    )
    SELECT a.*, r.run_id AS lock_run_id, r.lease_owner AS run_lease_owner,
      r.lease_expires_at AS run_lease_expires_at, EXISTS (SELECT 1 FROM fenced) AS fenced,
      (SELECT needed FROM follow) AS follow
    FROM (SELECT 1) one LEFT JOIN run r ON true LEFT JOIN acked a ON true`.execute(db);
  const row = rows[0];
  if (!row || row.lock_run_id === null) return { kind: 'not-found' };
  const { lock_run_id, run_lease_owner, run_lease_expires_at, fenced, follow, ...command } = row;
  if (!fenced)
    return {
      kind: 'lease-conflict',
      run: {
        run_id: lock_run_id,
        lease_owner: run_lease_owner,
        lease_expires_at: run_lease_expires_at,
      },
    };
  const { command_id } = command;
  if (command_id === null) return follow ? { kind: 'follow' } : { kind: 'refused' };
  return { kind: 'acknowledged', command: { ...command, command_id } };
}
