import {
  EVENTS_PAGE_DEFAULT,
  ServiceError,
  type EventAppendBody,
  type EventAppendResponse,
  type EventPage,
} from '@svc/contracts';
import { commandIdsOfRun, pageEvents, type NewEvent } from '../store/events.js';
import type { Ctx } from './context.js';
import { boundEventData } from './event-bounds.js';
import { writeEvents } from './event-log.js';
import { assertLeaseOwner } from './lease-checks.js';
import { toEvent } from './records.js';
import { getRunRow, lockRunOrThrow } from './runs.js';

/**
 * Runner append. One transaction per batch: the batch lands whole, in array order, or not at
 * all, and a retry of a batch (same keys) returns the seqs of the first attempt.
 */
export async function appendEvents(
  ctx: Ctx,
  runId: string,
  body: EventAppendBody,
  leaseToken: string | undefined,
): Promise<EventAppendResponse> {
  if (body.events.some((e) => e.category === 'terminal_status')) {
    throw new ServiceError(
      'schema-invalid',
      'terminal_status events are written by PATCH /commands/:id/status and PATCH /runs/:id/status, not appended',
    );
  }
  const events: NewEvent[] = body.events.map((e) => ({
    key: e.key,
    commandId: e.commandId ?? null,
    category: e.category,
    name: e.name ?? null,
    observedAt: e.observedAt ? new Date(e.observedAt) : new Date(),
    data: boundEventData(e.category, e.data).data,
  }));
  const referenced = [
    ...new Set(events.map((e) => e.commandId).filter((c): c is string => c !== null)),
  ];
  const result = await ctx.db.transaction().execute(async (trx) => {
    const run = await lockRunOrThrow(trx, runId);
    assertLeaseOwner(run, body.runnerId, leaseToken);
    const known = await commandIdsOfRun(trx, runId, referenced);
    const unknown = referenced.filter((id) => !known.has(id));
    if (unknown.length > 0)
      throw new ServiceError(
        'schema-invalid',
        `commandId ${unknown.join(', ')} does not belong to run ${runId}`,
      );
    return writeEvents(trx, run, events);
  });
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
