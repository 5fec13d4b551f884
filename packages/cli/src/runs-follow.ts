import type { Command, EventEnvelope, EventPage, Run } from '@svc/contracts';
import { ApiError, TERMINAL_COMMAND_STATES, TERMINAL_RUN_STATES } from '@svc/contracts';
import { EXIT, turnExitCode } from './errors.js';
import { eventLine, eventTone } from './format/sessions.js';
import type { Invocation } from './run.js';

export interface RunEventFlags {
  after?: number;
  limit?: number;
  follow?: boolean;
}

/** How long one events long-poll may wait; the manager answers as soon as an event exists. */
const WAIT_MS = 20_000;

export const runPath = (runId: string, tail = '') =>
  `/api/v1/runs/${encodeURIComponent(runId)}${tail}`;

/**
 * A run's events by seq. `--follow` long-polls the manager (GET …/events?waitMs), printing each
 * event once and in order, until the followed turn is terminal: the run's latest command when
 * following starts, else its first command. The answer is that turn's exit code.
 */
export async function runEvents(inv: Invocation, runId: string, flags: RunEventFlags) {
  const page = (afterSeq: number, waitMs: number) =>
    patiently(() =>
      inv.client.request<EventPage>('GET', runPath(runId, '/events'), undefined, {
        query: { afterSeq, limit: flags.limit, waitMs: waitMs || undefined },
        // The long-poll itself must not be cut short by the client's own request timeout.
        ...(waitMs ? { timeoutMs: waitMs + 30_000 } : {}),
      }),
    );
  const print = (event: EventEnvelope) =>
    inv.config.json ? inv.out.data(event, true) : inv.out.line(eventLine(event), eventTone(event));

  if (!flags.follow) {
    const one = await page(flags.after ?? 0, 0);
    if (inv.config.json) inv.out.data(one);
    else {
      for (const event of one.events) print(event);
      if (one.hasMore && one.nextAfterSeq !== null)
        inv.out.line(`more: runs events ${runId} --after ${one.nextAfterSeq}`);
    }
    return EXIT.ok;
  }

  const run = await inv.client.request<Run>('GET', runPath(runId));
  let followed = run.latestCommandId;
  let after = flags.after ?? 0;
  let waitMs = 0;
  let status: string | null = null;
  for (;;) {
    const next = await page(after, waitMs);
    for (const event of next.events) {
      print(event);
      after = event.seq;
      followed ??= event.commandId;
      // A terminal status of the followed command (or of the whole run) ends the turn.
      if (
        event.category === 'terminal_status' &&
        (event.commandId === null || event.commandId === followed)
      )
        status ??= typeof event.data['status'] === 'string' ? event.data['status'] : 'failed';
    }
    if (status !== null && !next.hasMore) break;
    if (next.hasMore) {
      waitMs = 0;
      continue;
    }
    if (next.events.length === 0) {
      // Nothing new: the turn may have ended before `--after` (its events already read).
      status = await terminalState(inv, runId, followed);
      if (status !== null) {
        waitMs = 0;
        // State and terminal event commit together: one more page holds the rest.
        const rest = await page(after, 0);
        for (const event of rest.events) print(event);
        break;
      }
    }
    waitMs = WAIT_MS;
  }
  const line = `run ${runId}${followed ? ` command ${followed}` : ''} ended ${status}`;
  if (inv.config.json) inv.out.error(line);
  else inv.out.line(line);
  return turnExitCode(status);
}

/** The followed command's terminal state, else the run's, else null while either is live. */
async function terminalState(
  inv: Invocation,
  runId: string,
  commandId: string | null | undefined,
): Promise<string | null> {
  if (commandId) {
    const command = await inv.client.request<Command>(
      'GET',
      runPath(runId, `/commands/${encodeURIComponent(commandId)}`),
    );
    if ((TERMINAL_COMMAND_STATES as readonly string[]).includes(command.state))
      return command.state;
  }
  const run = await inv.client.request<Run>('GET', runPath(runId));
  return (TERMINAL_RUN_STATES as readonly string[]).includes(run.state) ? run.state : null;
}

/**
 * A long-poll refused because the manager holds its limit of client watches (429
 * `capacity-exceeded`) is asked again after the time it names (`Retry-After`): following
 * a run is worth a short wait, not an error.
 */
async function patiently<T>(call: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await call();
    } catch (error) {
      if (!(error instanceof ApiError) || error.failureKind !== 'capacity-exceeded') throw error;
      const seconds = Number(error.details?.['retryAfterSeconds'] ?? 2);
      await new Promise((r) => setTimeout(r, Math.min(30, Math.max(1, seconds)) * 1000));
    }
  }
}
