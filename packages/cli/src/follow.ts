import type { EventPage, Session } from '@svc/contracts';
import { EXIT, turnExitCode } from './errors.js';
import { eventLine, eventTone } from './format/sessions.js';
import type { Invocation } from './run.js';

export interface EventFlags {
  afterSeq?: number;
  limit?: number;
  follow?: boolean;
}

/** How often `--follow` asks again while the session's command runs. */
const POLL_MS = 500;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Page a session's output or trace by source seq. `--follow` keeps polling, printing each new
 * event as one bounded line (JSON mode: one compact JSON event per line), until the session's
 * command is terminal; the run followed is the one the first page named. Following answers the
 * exit code of how that command ended (errors.ts, turnExitCode).
 */
export async function sessionEvents(
  inv: Invocation,
  sessionId: string,
  kind: 'output' | 'trace',
  flags: EventFlags,
): Promise<number> {
  const path = `/api/v1/sessions/${encodeURIComponent(sessionId)}`;
  const page = (afterSeq: number, runId: string | undefined) =>
    inv.client.request<EventPage>('GET', `${path}/${kind}`, undefined, {
      query: { afterSeq, limit: flags.limit, runId },
    });

  if (!flags.follow) {
    const one = await page(flags.afterSeq ?? 0, undefined);
    if (inv.config.json) {
      inv.out.data(one);
      return EXIT.ok;
    }
    for (const event of one.events) inv.out.line(eventLine(event), eventTone(event));
    if (one.hasMore && one.nextAfterSeq !== null)
      inv.out.line(`more: sessions ${kind} ${sessionId} --after-seq ${one.nextAfterSeq}`);
    return EXIT.ok;
  }

  let after = flags.afterSeq ?? 0;
  let runId: string | undefined;
  const drain = async (): Promise<void> => {
    for (;;) {
      const next = await page(after, runId);
      if (!runId && next.runId) runId = next.runId;
      for (const event of next.events)
        if (inv.config.json) inv.out.data(event, true);
        else inv.out.line(eventLine(event), eventTone(event));
      after = next.events.at(-1)?.seq ?? next.nextAfterSeq ?? after;
      if (!next.hasMore) return;
    }
  };
  for (;;) {
    await drain();
    const session = await inv.client.request<Session>('GET', path);
    if (session.executionState !== 'running') {
      // Terminal state and terminal event commit together: one last page holds the rest.
      await drain();
      const line = `session ${sessionId} ${session.executionState}: last outcome ${session.lastOutcome ?? '-'}`;
      if (inv.config.json) inv.out.error(line);
      else inv.out.line(line);
      // Like `gh run watch --exit-status`: a script learns how the followed turn ended.
      return turnExitCode(session.lastOutcome);
    }
    await sleep(POLL_MS);
  }
}
