import { sql } from 'kysely';
import {
  EVENT_NAMES,
  newId,
  ServiceError,
  type ClaimBody,
  type ClaimResponse,
  type LeaseBody,
  type LeaseResponse,
  type PollQuery,
  type PollResponse,
  type RunnerRegisterBody,
  type RunnerRegistration,
} from '@svc/contracts';
import { pollPage, type PollPage } from '../../store/command-poll.js';
import { expireCommands } from './command-expiry.js';
import { iso, isoRequired, json } from '../../store/json.js';
import { dbNow, type RunRow } from '../../store/runs.js';
import { runWakeKey, type WaitEnd } from '../../store/wakeups.js';
import { leaseClaims, leaseExpiries, leaseTakeovers } from '../../metrics/registry.js';
import type { Ctx } from '../context.js';
import { managerEvent, writeEvents } from './event-log.js';
import { mintLeaseToken, tokenHash } from '../caller-tokens.js';
import { assertLeaseOwner, leaseConflict, ownerDetails } from './lease-checks.js';
import { toCommand } from './records.js';
import { getRun, getRunRow, isTerminalRun, lockRunOrThrow } from './runs.js';
import { renewLease, type Renewal } from '../../store/heartbeats.js';

export async function registerRunner(
  ctx: Ctx,
  body: RunnerRegisterBody,
): Promise<RunnerRegistration> {
  await getRunRow(ctx, body.runId);
  const runnerId = body.runnerId ?? newId('rnr');
  const row = await ctx.db
    .insertInto('runners')
    .values({
      runner_id: runnerId,
      run_id: body.runId,
      attempt_id: body.attemptId ?? null,
      runner_job_id: body.runnerJobId ?? null,
      hostname: body.hostname ?? null,
      pid: body.pid ?? null,
      version: body.version ?? null,
      work_ready: body.workReady ? json(body.workReady) : null,
    })
    .onConflict((oc) => oc.column('runner_id').doUpdateSet({ last_seen_at: sql`now()` } as never))
    .returningAll()
    .executeTakeFirstOrThrow();
  if (row.run_id !== body.runId)
    throw new ServiceError('state-conflict', `runner ${runnerId} is registered for another run`);
  if (body.workReady) {
    // The runner's own smoke check is the work-ready fact of its job.
    await ctx.db
      .updateTable('runner_jobs')
      .set({ work_ready: json(body.workReady) } as never)
      .where('runner_id', '=', runnerId)
      .execute();
  }
  return {
    runnerId,
    runId: row.run_id,
    attemptId: row.attempt_id,
    registeredAt: isoRequired(row.registered_at),
    leaseTtlMs: ctx.config.leaseTtlMs,
    heartbeatIntervalMs: ctx.config.heartbeatIntervalMs,
    pollWaitMs: ctx.config.pollWaitMaxMs,
  };
}

/**
 * Claim a run. Granted when nobody holds an unexpired lease (or the claimer already does);
 * taking over an expired lease records `runner.claim.recovered`. Refused otherwise with
 * `runner-lease-conflict`, naming owner and expiry; a replacement runner's refusal also records
 * `runner.claim.waiting` once per lease epoch, so its wait is visible in the run's events.
 */
export async function claimRun(ctx: Ctx, runId: string, body: ClaimBody): Promise<ClaimResponse> {
  const ttl = ctx.config.leaseTtlMs;
  // Every grant, even to the same runner again, gets a fresh token: an earlier claim's token
  // (a duplicate or restarted process using the same runnerId) is fenced out from here on.
  const leaseToken = mintLeaseToken();
  // On the lease lane: a claim waits for no append or read of a busy main pool.
  const db = ctx.lanes?.leaseDb ?? ctx.db;
  const outcome = await db.transaction().execute(async (trx) => {
    const run = await lockRunOrThrow(trx, runId);
    if (isTerminalRun(run.state))
      throw new ServiceError(
        'run-terminal',
        `run ${runId} is ${run.state}; there is nothing to claim`,
        { runState: run.state },
      );
    const now = await dbNow(trx);
    const expired =
      run.lease_expires_at !== null && new Date(run.lease_expires_at).getTime() <= now.getTime();
    const free = run.lease_owner === null || run.lease_owner === body.runnerId || expired;
    if (!free) {
      if (body.mode === 'replacement') {
        await writeEvents(trx, run, [
          managerEvent(
            'system',
            EVENT_NAMES.claimWaiting,
            `claim-waiting:${body.runnerId}:${run.lease_epoch}`,
            null,
            {
              runnerId: body.runnerId,
              attemptId: body.attemptId ?? null,
              owner: run.lease_owner,
              leaseExpiresAt: iso(run.lease_expires_at),
            },
          ),
        ]);
      }
      return { conflict: run, now };
    }
    const takeover = run.lease_owner !== null && run.lease_owner !== body.runnerId;
    const newOwner = run.lease_owner !== body.runnerId;
    const epoch = newOwner ? run.lease_epoch + 1 : run.lease_epoch;
    const events = [];
    if (takeover) {
      events.push(
        managerEvent('system', EVENT_NAMES.claimRecovered, `claim-recovered:${epoch}`, null, {
          runnerId: body.runnerId,
          attemptId: body.attemptId ?? null,
          previousOwner: run.lease_owner,
          previousLeaseExpiredAt: iso(run.lease_expires_at),
        }),
      );
    }
    if (newOwner) {
      events.push(
        managerEvent('system', EVENT_NAMES.claimed, `claimed:${epoch}`, null, {
          runnerId: body.runnerId,
          attemptId: body.attemptId ?? null,
          epoch,
        }),
      );
    }
    await writeEvents(trx, run, events);
    const updated = await trx
      .updateTable('runs')
      .set({
        lease_owner: body.runnerId,
        lease_expires_at: sql`now() + make_interval(secs => ${ttl / 1000})`,
        heartbeat_at: sql`now()`,
        lease_epoch: epoch,
        lease_token_hash: tokenHash(leaseToken),
        state: run.state === 'pending' ? 'claimed' : run.state,
        claimed_at: run.claimed_at ?? sql`now()`,
        updated_at: sql`now()`,
      } as never)
      .where('run_id', '=', runId)
      .returningAll()
      .executeTakeFirstOrThrow();
    return { granted: updated, previousOwner: takeover ? run.lease_owner : null, now };
  });

  if ('conflict' in outcome) {
    leaseClaims.inc({ outcome: 'conflict' });
    const run = outcome.conflict;
    const expiresAt = run.lease_expires_at ? new Date(run.lease_expires_at) : null;
    // Owner and expiry (spec/2): a replacement waits for the expiry, an operator sees who holds it.
    throw new ServiceError(
      'runner-lease-conflict',
      `run ${runId} is leased by ${run.lease_owner ?? 'another runner'} until ${iso(expiresAt)}`,
      {
        ...ownerDetails(run.lease_owner, expiresAt),
        retryAfterMs: expiresAt ? Math.max(0, expiresAt.getTime() - outcome.now.getTime()) + 50 : 0,
      },
    );
  }
  const run = outcome.granted;
  leaseClaims.inc({ outcome: 'granted' });
  // Another runner's lease is only ever taken once it expired.
  if (outcome.previousOwner !== null) {
    leaseExpiries.inc();
    leaseTakeovers.inc();
  }
  return {
    run: await getRun({ db }, runId),
    lease: leaseGrant(run, ttl),
    leaseToken,
    recovered: outcome.previousOwner !== null,
    previousOwner: outcome.previousOwner,
    lastSeq: run.last_seq,
    lastCommandSeq: run.command_seq,
  };
}

function leaseGrant(run: RunRow, ttlMs: number) {
  return {
    owner: run.lease_owner!,
    expiresAt: isoRequired(run.lease_expires_at!),
    epoch: run.lease_epoch,
    ttlMs,
  };
}

/**
 * Heartbeat: extends the lease of its owner and hands back the run's control signals, in one
 * statement (store/heartbeats.ts), on the lease lane's connections; renewals arriving together
 * share one statement and one commit.
 */
export async function heartbeat(
  ctx: Ctx,
  runId: string,
  body: LeaseBody,
  leaseToken: string | undefined,
): Promise<LeaseResponse> {
  const ttl = ctx.config.leaseTtlMs;
  const renewal: Renewal = {
    runId,
    runnerId: body.runnerId,
    tokenHash: tokenHash(leaseToken ?? ''),
    ttlMs: ttl,
    activityAt: body.lastActivityAt ? new Date(body.lastActivityAt) : null,
    activityKind: body.lastActivityKind ?? null,
  };
  const renewals = ctx.lanes?.renewals;
  const updated = renewals
    ? await renewals.submit(renewal)
    : await renewLease(ctx.lanes?.leaseDb ?? ctx.db, renewal);
  if (!updated) throw leaseConflict(await getRunRow(ctx, runId));
  return {
    lease: leaseGrant(updated, ttl),
    control: {
      runState: updated.state,
      cancelRequested: updated.cancel_requested_at !== null,
      cancelledCommandIds: updated.cancelled_command_ids,
    },
  };
}

/**
 * Poll commands after a seq. With `runnerId` (the lease owner), accepted commands in the page
 * become `delivered`. With `waitMs`, an empty poll waits for a wake-up (a new command, a
 * cancel) up to that bound: the runner reacts within milliseconds without hammering the store.
 * Each read is one statement (pollPage): lease, page, delivery and control signals together.
 */
/**
 * Long-polls that began together (a fleet after a manager restart, runners started in one
 * wave) would all time out together and come back as one burst of reads, every round. Each
 * wait of a second or more ends at a random point in its second half instead, so the fleet's
 * polls drift apart within a few rounds; an empty answer before `waitMs` is within its contract.
 */
function spreadWait(waitMs: number): number {
  return waitMs < 1000 ? waitMs : Math.round(waitMs * (0.5 + 0.5 * Math.random()));
}

export async function pollCommands(
  ctx: Ctx,
  runId: string,
  query: PollQuery,
  leaseToken: string | undefined,
  signal?: AbortSignal,
): Promise<PollResponse> {
  const afterSeq = query.afterSeq ?? 0;
  const limit = query.limit ?? 20;
  const waitMs = spreadWait(Math.min(query.waitMs ?? 0, ctx.config.pollWaitMaxMs));
  const deliverTo = query.runnerId
    ? { runnerId: query.runnerId, tokenHash: tokenHash(leaseToken ?? '') }
    : null;
  const read = async (): Promise<PollPage> => {
    let page = await pollPage(ctx.db, runId, afterSeq, limit, deliverTo);
    if (page && query.runnerId) assertLeaseOwner(page.run, query.runnerId, leaseToken);
    // Rare: a command of the run outlived its TTL. Expire it (with its followers), read again.
    if (page?.anyDue && (await expireCommands(ctx, runId)) > 0)
      page = await pollPage(ctx.db, runId, afterSeq, limit, deliverTo);
    if (!page) throw new ServiceError('not-found', `run ${runId} not found`);
    return page;
  };
  // Subscribe before reading, so a command committed between the read and the wait still wakes us.
  const stop = new AbortController();
  const abort = () => stop.abort();
  signal?.addEventListener('abort', abort, { once: true });
  const wake =
    waitMs > 0
      ? ctx.wakeups.wait(runWakeKey(runId), waitMs, stop.signal)
      : Promise.resolve<WaitEnd>('timeout');
  let page;
  try {
    page = await read();
    const idle =
      page.rows.length === 0 &&
      page.run.cancel_requested_at === null &&
      !isTerminalRun(page.run.state);
    if (idle && waitMs > 0) {
      // Any wake-up (new command, cancel) ends the wait with a fresh read. A wait that simply
      // ran out answers the page it has: nothing woke it, and the runner's next poll, which
      // follows at once, reads anyway (a lost wake-up costs no more than before). A fleet's
      // timed-out polls then cost one read each, not two.
      if ((await wake) !== 'timeout') page = await read();
    }
  } finally {
    stop.abort();
    signal?.removeEventListener('abort', abort);
  }
  return {
    runId,
    commands: page.rows.map(toCommand),
    lastCommandSeq: page.run.command_seq,
    control: {
      runState: page.run.state,
      cancelRequested: page.run.cancel_requested_at !== null,
      cancelledCommandIds: page.cancelledCommandIds,
    },
  };
}
