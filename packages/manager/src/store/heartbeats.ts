import { sql } from 'kysely';
import type { Db } from './db.js';
import { BUSY } from './coalescer.js';
import { json } from './json.js';
import { PREPARED } from './prepared.js';
import type { RunRow } from './runs.js';

/** One lease renewal as the store takes it. */
export interface Renewal {
  runId: string;
  runnerId: string;
  /** Digest of the lease token sent (a token never issued matches no stored digest). */
  tokenHash: string;
  ttlMs: number;
  /** When the agent last did anything, by the runner's clock (capped by the database's). */
  activityAt: Date | null;
  activityKind: string | null;
}

export type RenewedRun = RunRow & { cancelled_command_ids: string[] };

/**
 * The cancelled commands a runner must stop (delivered ones), newest first: read with every
 * renewal, so a cancel reaches the runner within one heartbeat.
 */
const CANCELLED = sql`ARRAY(
  SELECT c.command_id FROM commands c
  WHERE c.run_id = runs.run_id AND c.state = 'cancelled' AND c.delivered_at IS NOT NULL
  ORDER BY c.terminal_at DESC LIMIT 50
) AS cancelled_command_ids`;

/**
 * Extend the lease of its owner and read the run's control signals, in one statement. A lease
 * renewal is re-derivable after a crash (the runner renews again within its TTL, and a lost
 * renewal at worst lets a lease lapse early, which the claim protocol already handles), so its
 * commit skips the synchronous WAL flush: the setting is local to this statement's transaction
 * and reverts at its end. Nothing else written here needs durability. Null: not renewed (not
 * the owner, not its token, no such run).
 */
export async function renewLease(db: Db, renewal: Renewal): Promise<RenewedRun | null> {
  // Runner clocks are not trusted beyond the database clock.
  const activitySet = renewal.activityAt
    ? sql`, last_activity_at = least(now(), greatest(last_activity_at, ${renewal.activityAt}::timestamptz)),
         last_activity_kind = ${renewal.activityKind ?? 'agent-notification'}`
    : sql``;
  const { rows } = await sql<RenewedRun>`${PREPARED}
    WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true) AS setting)
    UPDATE runs SET
      lease_expires_at = now() + make_interval(secs => ${renewal.ttlMs / 1000}),
      heartbeat_at = now(),
      updated_at = now() ${activitySet}
    FROM relaxed
    WHERE run_id = ${renewal.runId} AND lease_owner = ${renewal.runnerId}
      -- Fenced in the same statement: a token never issued cannot match any stored hash.
      AND lease_token_hash = ${renewal.tokenHash}
    RETURNING runs.*, ${CANCELLED}`.execute(db);
  return rows[0] ?? null;
}

/**
 * Renewals of several runs (one each) in one statement and one commit, each with the outcome
 * `renewLease` would have given it alone, or `BUSY`: its run's row is locked by another
 * transaction (an append group committing), which this statement does not wait for. Waiting
 * would hold the rows it already locked and chain every other writer of those runs behind it;
 * the caller tries a busy renewal again (store/coalescer.ts). Rows are locked in run_id order.
 */
export async function renewLeases(
  db: Db,
  renewals: readonly Renewal[],
): Promise<(RenewedRun | null | typeof BUSY)[]> {
  const input = renewals.map((r, n) => ({
    n,
    run: r.runId,
    runner: r.runnerId,
    token_hash: r.tokenHash,
    ttl_s: r.ttlMs / 1000,
    activity_at: r.activityAt?.toISOString() ?? null,
    activity_kind: r.activityAt ? (r.activityKind ?? 'agent-notification') : null,
  }));
  const { rows } = await sql<
    RenewedRun & { input_n: number; free: boolean; renewed: boolean }
  >`${PREPARED}
    WITH relaxed AS (SELECT set_config('synchronous_commit', 'off', true) AS setting),
    h AS (
      SELECT * FROM jsonb_to_recordset(${json(input)}::jsonb) AS h(n integer, run text,
        runner text, token_hash text, ttl_s double precision, activity_at timestamptz,
        activity_kind text)
    ),
    free AS MATERIALIZED (
      SELECT r.run_id FROM runs r WHERE r.run_id IN (SELECT run FROM h)
      ORDER BY r.run_id FOR NO KEY UPDATE SKIP LOCKED
    ),
    renewed AS (
      UPDATE runs SET
        lease_expires_at = now() + make_interval(secs => h.ttl_s),
        heartbeat_at = now(),
        updated_at = now(),
        last_activity_at = CASE WHEN h.activity_at IS NULL THEN runs.last_activity_at
          ELSE least(now(), greatest(runs.last_activity_at, h.activity_at)) END,
        last_activity_kind = coalesce(h.activity_kind, runs.last_activity_kind)
      FROM h, relaxed
      WHERE runs.run_id = h.run AND runs.run_id IN (SELECT run_id FROM free)
        AND runs.lease_owner = h.runner AND runs.lease_token_hash = h.token_hash
      RETURNING h.n AS renewed_n, runs.*, ${CANCELLED}
    )
    SELECT h.n AS input_n,
      h.run IN (SELECT run_id FROM free) OR NOT EXISTS (SELECT 1 FROM runs x WHERE x.run_id = h.run) AS free,
      renewed.renewed_n IS NOT NULL AS renewed, renewed.*
    FROM h LEFT JOIN renewed ON renewed.renewed_n = h.n`.execute(db);
  const out = new Array<RenewedRun | null | typeof BUSY>(renewals.length).fill(null);
  for (const { input_n, free, renewed, ...run } of rows)
    out[input_n] = renewed ? run : free ? null : BUSY;
  return out;
}
