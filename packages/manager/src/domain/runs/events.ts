import {
  EVENTS_PAGE_DEFAULT,
  ServiceError,
  type EventAppendBody,
  type EventAppendResponse,
  type EventInput,
  type EventPage,
} from '@svc/contracts';
import { appendFresh, isPlainBatch, type FreshAppend } from '../../store/append-fresh.js';
import { commandIdsOfRun, pageEvents, type NewEvent } from '../../store/events.js';
import { eventsWakeKey } from '../../store/wakeups.js';
import { eventsAppended } from '../../metrics/registry.js';
import { tokenHash } from '../caller-tokens.js';
import type { Ctx } from '../context.js';
import { boundEventData } from './event-bounds.js';
import type { RunRow, Tx } from '../../store/runs.js';
import { writeEvents, type Written } from './event-log.js';
import { assertLeaseOwner } from './lease-checks.js';
import { toEvent } from './records.js';
import { getRunRow, lockRunOrThrow } from './runs.js';

/**
 * Runner append. The batch lands whole, in array order, or not at all (alone or inside a group
 * commit with other runs' batches), and a retry of a batch (same keys) returns the seqs of the
 * first attempt.
 */
export async function appendEvents(
  ctx: Ctx,
  runId: string,
  body: EventAppendBody,
  leaseToken: string | undefined,
): Promise<EventAppendResponse> {
  const events = runnerEvents(body.events);
  // The plain batch (lease held, new keys, the run's commands) is one call and one commit,
  // shared with other runners' batches that arrive meanwhile; anything else takes the general
  // path below, which explains a refusal or returns the seqs a retried batch was given.
  const fresh: FreshAppend = {
    runId,
    runnerId: body.runnerId,
    tokenHash: leaseToken === undefined ? null : tokenHash(leaseToken),
    events,
    wakeKey: eventsWakeKey(runId),
  };
  const appends = ctx.lanes?.appends;
  const first =
    appends && isPlainBatch(events)
      ? await appends.submit(fresh)
      : await appendFresh(ctx.db, fresh);
  const result =
    first !== null
      ? freshlyWritten(events, first)
      : await ctx.db.transaction().execute(async (trx) => {
          const run = await lockRunOrThrow(trx, runId);
          assertLeaseOwner(run, body.runnerId, leaseToken);
          return writeRunnerEvents(trx, run, events);
        });
  // This replica's waiters now; others by the NOTIFY, sent while one is marked watching.
  ctx.wakeups.committed(eventsWakeKey(runId));
  return {
    runId,
    appended: result.written.filter((w) => !w.duplicate).length,
    duplicates: result.written.filter((w) => w.duplicate).length,
    lastSeq: result.lastSeq,
    events: result.written.map((w) => ({
      key: w.key ?? '',
      seq: w.seq,
      eventId: `${runId}:${w.seq}`,
      duplicate: w.duplicate,
    })),
  };
}

function freshlyWritten(events: readonly NewEvent[], first: number) {
  eventsAppended.inc(events.length);
  const written: Written[] = events.map((e, i) => ({
    key: e.key,
    seq: first + i,
    duplicate: false,
  }));
  return { written, lastSeq: first + events.length - 1 };
}

/**
 * A runner's batch as it is stored: terminal_status refused (only the status routes write it),
 * data bounded and NUL-free. Checked before any transaction opens.
 */
export function runnerEvents(input: readonly EventInput[]): NewEvent[] {
  if (input.some((e) => e.category === 'terminal_status')) {
    throw new ServiceError(
      'schema-invalid',
      'terminal_status events are written by PATCH /commands/:id/status and PATCH /runs/:id/status, not appended',
    );
  }
  return input.map((e) => ({
    key: e.key,
    commandId: e.commandId ?? null,
    category: e.category,
    name: e.name ?? null,
    observedAt: e.observedAt ? new Date(e.observedAt) : new Date(),
    data: boundEventData(e.category, e.data).data,
  }));
}

/**
 * Store a runner's batch in the caller's transaction: the run row is locked and the caller
 * has checked the lease. Every commandId named must be one of the run's commands
 * (`ownCommandId`, when given, is known to be).
 */
export async function writeRunnerEvents(
  trx: Tx,
  run: RunRow,
  events: NewEvent[],
  ownCommandId?: string,
): Promise<{ written: Written[]; lastSeq: number }> {
  await checkRunnerEvents(trx, run, events, ownCommandId);
  return writeEvents(trx, run, events);
}

/** Every commandId a runner's batch names is one of the run's commands (`ownCommandId` is). */
export async function checkRunnerEvents(
  trx: Tx,
  run: RunRow,
  events: NewEvent[],
  ownCommandId?: string,
): Promise<void> {
  // A command already read under this run's lock needs no lookup.
  const referenced = [
    ...new Set(
      events.map((e) => e.commandId).filter((c): c is string => c !== null && c !== ownCommandId),
    ),
  ];
  const known = await commandIdsOfRun(trx, run.run_id, referenced);
  const unknown = referenced.filter((id) => !known.has(id));
  if (unknown.length > 0)
    throw new ServiceError(
      'schema-invalid',
      `commandId ${unknown.join(', ')} does not belong to run ${run.run_id}`,
    );
}

export async function listEvents(
  ctx: Ctx,
  runId: string,
  afterSeq = 0,
  limit = EVENTS_PAGE_DEFAULT,
  filter: { categories?: readonly string[]; commandIds?: readonly string[] } = {},
): Promise<EventPage> {
  // Both reads at once: a page costs one round trip. One extra row tells whether another page
  // follows without a count query; an unknown run answers not-found whatever the page held.
  const [run, rows] = await Promise.all([
    getRunRow(ctx, runId),
    pageEvents(ctx.db, runId, afterSeq, limit + 1, filter),
  ]);
  const hasMore = rows.length > limit;
  const page = hasMore ? rows.slice(0, limit) : rows;
  const last = page.at(-1);
  return {
    runId,
    events: page.map(toEvent),
    lastSeq: run.last_seq,
    nextAfterSeq: last ? last.seq : afterSeq,
    hasMore,
  };
}
