import {
  EVENTS_PAGE_DEFAULT,
  ServiceError,
  type EventPage,
  type SessionEventsQuery,
} from '@svc/contracts';
import type { Ctx } from '../context.js';
import { listEvents } from '../runs/events.js';
import { getSessionRow } from './sessions.js';

/** Categories a person reading "output" wants: what the agent said and what commands printed. */
export const OUTPUT_CATEGORIES = [
  'assistant_message',
  'command_output',
  'error',
  'terminal_status',
] as const;

/**
 * Trace and output read the events of a run the session owns (the active or last one unless a
 * runId is named), never another session's run and never a queue summary.
 */
export async function sessionEvents(
  ctx: Ctx,
  sessionId: string,
  query: SessionEventsQuery,
  kind: 'trace' | 'output',
): Promise<EventPage> {
  const row = await getSessionRow(ctx.db, sessionId);
  const runId = query.runId ?? row.active_run_id ?? row.last_run_id;
  if (!runId)
    return { runId: '', events: [], lastSeq: 0, nextAfterSeq: query.afterSeq ?? 0, hasMore: false };
  const run = await ctx.db
    .selectFrom('runs')
    .select('session_id')
    .where('run_id', '=', runId)
    .executeTakeFirst();
  if (!run || run.session_id !== sessionId)
    throw new ServiceError('not-found', `run ${runId} does not belong to session ${sessionId}`);
  return listEvents(
    ctx,
    runId,
    query.afterSeq ?? 0,
    query.limit ?? EVENTS_PAGE_DEFAULT,
    kind === 'output' ? { categories: OUTPUT_CATEGORIES } : {},
  );
}
