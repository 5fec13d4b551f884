import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import { Type } from '@sinclair/typebox';
import { INT32_MAX, SeqPosition, ServiceError } from '@svc/contracts';
import type { Ctx } from '../domain/context.js';
import { listEvents } from '../domain/runs/events.js';
import { getRun, getRunRow, isTerminalRun } from '../domain/runs/runs.js';
import { watchEvents } from '../store/events-watch.js';
import { eventsWakeKey, runWakeKey } from '../store/wakeups.js';
import { clientGone, errors, RunParams, type App } from './common.js';

const StreamQuery = Type.Object(
  { afterSeq: Type.Optional(SeqPosition) },
  { additionalProperties: false },
);
const STREAM_PAGE = 500;
const LAST_EVENT_ID = /^\d{1,15}$/;

/**
 * Server-Sent Events of one run: each event is a `message` with `id:` = seq and the event
 * envelope as data; `event: run` carries what the run record says of itself (`state`,
 * `activity`, `lastCommand`), first when the stream opens and again whenever that changes; a
 * comment line every heartbeat interval keeps proxies from closing an idle stream; `event: end`
 * says the run is terminal and every event was sent (with the run's last `run` facts). A stream lasts at
 * most the configured duration, then closes; EventSource reconnects with Last-Event-ID and
 * resumes after that seq. A stream holds one of the process's client watch slots (429 past them).
 */
export function eventStreamRoutes(app: App, ctx: Ctx): void {
  app.get(
    '/api/v1/runs/:runId/events/stream',
    {
      schema: {
        params: RunParams,
        querystring: StreamQuery,
        response: {
          200: {
            description:
              "text/event-stream: `id:` seq, `data:` event envelope; `event: run` with the run's state, activity and lastCommand, at the start and on every change; `event: end` when the run is terminal",
            content: { 'text/event-stream': { schema: Type.String() } },
          },
          ...errors,
        },
      },
    },
    async (request, reply) => {
      const header = request.headers['last-event-id'];
      if (header !== undefined && (typeof header !== 'string' || !LAST_EVENT_ID.test(header)))
        throw new ServiceError('schema-invalid', 'Last-Event-ID must be an event seq', {
          field: 'last-event-id',
        });
      const afterSeq = header !== undefined ? Number(header) : (request.query.afterSeq ?? 0);
      if (afterSeq > INT32_MAX)
        throw new ServiceError('schema-invalid', `Last-Event-ID is past the largest seq`, {
          field: 'last-event-id',
        });
      // The slot first: past the bound, nothing is read for a stream that will not be served.
      const release = ctx.watches.take('stream');
      try {
        await getRunRow(ctx, request.params.runId);
      } catch (error) {
        release();
        throw error;
      }
      reply.hijack();
      const raw = reply.raw;
      raw.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
        'x-request-id': request.id,
      });
      const gone = clientGone(request);
      try {
        await stream(ctx, request.params.runId, afterSeq, raw, gone);
      } catch (error) {
        request.log.warn({ err: error, runId: request.params.runId }, 'event stream ended early');
      } finally {
        release();
        raw.end();
      }
    },
  );
}

async function stream(
  ctx: Ctx,
  runId: string,
  afterSeq: number,
  raw: ServerResponse,
  gone: AbortSignal,
): Promise<void> {
  const { streamHeartbeatMs, streamMaxMs } = ctx.config.watch;
  const until = Date.now() + streamMaxMs;
  const write = async (chunk: string) => {
    if (!raw.write(chunk) && !gone.aborted)
      await Promise.race([once(raw, 'drain'), once(gone, 'abort')]);
  };
  const heartbeat = setInterval(() => {
    if (!gone.aborted) raw.write(': keep-alive\n\n');
  }, streamHeartbeatMs);
  let seq = afterSeq;
  let watched = false;
  let sentFacts = '';
  // Set when a drain released the stream: it sends what is committed now, then ends, and the
  // client reconnects (Last-Event-ID) to another replica.
  let last = false;
  try {
    await write('retry: 2000\n\n');
    while (!gone.aborted && Date.now() < until) {
      const stop = new AbortController();
      const abort = () => stop.abort();
      gone.addEventListener('abort', abort, { once: true });
      try {
        // Events, and the run's commands (a turn sent or cancelled appends no event at once but
        // changes the run's activity and last turn).
        const woken = Promise.race([
          ctx.wakeups.wait(eventsWakeKey(runId), until - Date.now(), stop.signal),
          ctx.wakeups.wait(runWakeKey(runId), until - Date.now(), stop.signal),
        ]);
        // Marked watched for the stream's whole life before its first read: the run's appends
        // then wake it from any replica (see store/events-watch.ts).
        if (!watched) {
          await watchEvents(ctx.db, runId, until - Date.now());
          watched = true;
        }
        // State before events: a run seen terminal has every event committed.
        const run = await getRun(ctx, runId);
        const page = await listEvents(ctx, runId, seq, STREAM_PAGE);
        for (const event of page.events) {
          await write(`id: ${event.seq}\ndata: ${JSON.stringify(event)}\n\n`);
          seq = event.seq;
        }
        if (page.hasMore) continue;
        // After the events it may describe: a client that applies them in order sees the run
        // say what its events say (a failed turn's terminal_status, then lastCommand failed).
        const facts = JSON.stringify({
          runId,
          state: run.state,
          activity: run.activity,
          lastCommand: run.lastCommand,
        });
        if (facts !== sentFacts) {
          await write(`event: run\ndata: ${facts}\n\n`);
          sentFacts = facts;
        }
        if (isTerminalRun(run.state)) {
          const end = {
            runId,
            state: run.state,
            activity: run.activity,
            lastCommand: run.lastCommand,
            lastSeq: seq,
          };
          await write(`event: end\ndata: ${JSON.stringify(end)}\n\n`);
          return;
        }
        if (last) return;
        last = (await woken) === 'released';
      } finally {
        stop.abort();
        gone.removeEventListener('abort', abort);
      }
    }
  } finally {
    clearInterval(heartbeat);
  }
}
