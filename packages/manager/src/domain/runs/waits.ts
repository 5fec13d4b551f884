import { sql } from 'kysely';
import { TERMINAL_COMMAND_STATES, type EventPage, type ResultEnvelope } from '@svc/contracts';
import { eventsWakeKey } from '../../store/wakeups.js';
import { watchEvents } from '../../store/events-watch.js';
import type { Ctx } from '../context.js';
import { listEvents } from './events.js';
import { buildResult } from './results.js';
import { isTerminalRun } from './runs.js';

/**
 * Read, and while the answer is "nothing yet", wait for the run's next event wake-up and read
 * again, until `waitMs` has passed or the client left. Subscribing before each read means an
 * event committed between the read and the wait still wakes it. A wait holds one of the
 * process's client watch slots; with none free it is refused (429) before it reads anything.
 * `worthReading`, when given, is asked after each wake-up: a false answer waits again without
 * the full read (the deadline still ends with one).
 */
async function readUntil<T>(
  ctx: Ctx,
  runId: string,
  waitMs: number,
  signal: AbortSignal | undefined,
  read: () => Promise<T>,
  ready: (value: T) => boolean,
  worthReading?: () => Promise<boolean>,
): Promise<T> {
  const budget = Math.min(waitMs, ctx.config.watch.waitMaxMs);
  if (waitMs <= 0) return read();
  // A wait the configuration caps at 0 is still a watch asked for: it counts like any other.
  const release = ctx.watches.take('long-poll');
  if (budget <= 0) {
    try {
      return await read();
    } finally {
      release();
    }
  }
  const deadline = Date.now() + budget;
  // After a wake-up, a cheap probe may say the full read would still not be ready.
  const probeThenRead = async (): Promise<T | undefined> =>
    !worthReading || (await worthReading()) ? read() : undefined;
  try {
    for (let first = true; ; first = false) {
      const stop = new AbortController();
      const abort = () => stop.abort();
      signal?.addEventListener('abort', abort, { once: true });
      try {
        const woken = ctx.wakeups.wait(eventsWakeKey(runId), deadline - Date.now(), stop.signal);
        const value = first ? await read() : await probeThenRead();
        if (value !== undefined && (ready(value) || Date.now() >= deadline || signal?.aborted))
          return value;
        // About to wait: the run's appends wake other replicas only while it is marked watched
        // (for the whole budget, so once), and what was appended before the mark is read now,
        // behind the same probe as after a wake-up.
        if (first) {
          await watchEvents(ctx.db, runId, deadline - Date.now());
          const marked = await probeThenRead();
          if (marked !== undefined && ready(marked)) return marked;
        }
        // Released: this replica drains; the client gets the current state and asks again,
        // on another replica.
        if ((await woken) === 'released' || Date.now() >= deadline || signal?.aborted)
          return await read();
      } finally {
        stop.abort();
        signal?.removeEventListener('abort', abort);
      }
    }
  } finally {
    release();
  }
}

/**
 * Events after `afterSeq`, waiting up to `waitMs` for the first one. A terminal run with
 * nothing new answers at once: no event will follow.
 */
export async function waitForEvents(
  ctx: Ctx,
  runId: string,
  page: { afterSeq: number; limit: number; waitMs: number },
  signal?: AbortSignal,
): Promise<EventPage> {
  let terminal = false;
  return readUntil(
    ctx,
    runId,
    page.waitMs,
    signal,
    async () => {
      // State first: a run seen terminal has all its events committed (same transaction), so
      // an empty page read after it is really the end.
      terminal = isTerminalRun(await runState(ctx, runId));
      return listEvents(ctx, runId, page.afterSeq, page.limit);
    },
    (events) => events.events.length > 0 || terminal,
  );
}

async function runState(ctx: Ctx, runId: string): Promise<string> {
  const row = await ctx.db
    .selectFrom('runs')
    .select('state')
    .where('run_id', '=', runId)
    .executeTakeFirst();
  return row?.state ?? 'unknown';
}

/** The result envelope, waiting up to `waitMs` for it to become terminal. */
export function waitForResult(
  ctx: Ctx,
  runId: string,
  options: { commandId?: string; afterSeq?: number; waitMs: number },
  signal?: AbortSignal,
): Promise<ResultEnvelope> {
  const { waitMs, ...scope } = options;
  const commandId = scope.commandId;
  return readUntil(
    ctx,
    runId,
    waitMs,
    signal,
    () => buildResult(ctx, runId, scope),
    (result) => result.terminalStatus !== null || result.status === 'expired',
    // Every event batch of the run wakes the wait; one indexed read of the command tells
    // whether the envelope (a dozen statements) could be ready yet.
    commandId ? () => commandSettled(ctx, runId, commandId) : undefined,
  );
}

/**
 * Whether a command's result may be terminal: its state is terminal (written with its
 * terminal_status event), it is due to expire (the full read expires it), or it is not found
 * (the full read says so).
 */
async function commandSettled(ctx: Ctx, runId: string, commandId: string): Promise<boolean> {
  const row = await ctx.db
    .selectFrom('commands')
    .select(['state', sql<boolean>`state = 'accepted' AND expires_at <= now()`.as('due')])
    .where('command_id', '=', commandId)
    .where('run_id', '=', runId)
    .executeTakeFirst();
  return !row || row.due || (TERMINAL_COMMAND_STATES as readonly string[]).includes(row.state);
}
