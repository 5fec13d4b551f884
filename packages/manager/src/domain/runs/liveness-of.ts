import { TERMINAL_COMMAND_STATES, type Liveness } from '@svc/contracts';
import type { CommandRow } from '../../store/commands.js';
import { eventAt } from '../../store/events.js';
import { latestTerminal, openToolCalls } from '../../store/result-queries.js';
import { dbNow, type RunRow } from '../../store/runs.js';
import type { Ctx } from '../context.js';
import { deriveLiveness } from './liveness.js';
import { isTerminalRun } from './runs.js';

/** Liveness of a run (and its command) alone, for views that need no full result envelope. */
export async function livenessOf(
  ctx: Pick<Ctx, 'db'>,
  run: RunRow,
  command: CommandRow | null,
): Promise<Liveness> {
  const scope = { runId: run.run_id, commandId: command?.command_id ?? null };
  const [now, terminalEvent, lastRunEvent, lastCommandEvent, openTools] = await Promise.all([
    dbNow(ctx.db),
    latestTerminal(ctx.db, scope),
    run.last_seq > 0 ? eventAt(ctx.db, run.run_id, run.last_seq) : Promise.resolve(undefined),
    command?.last_event_seq
      ? eventAt(ctx.db, run.run_id, command.last_event_seq)
      : Promise.resolve(undefined),
    openToolCalls(ctx.db, scope),
  ]);
  const terminal =
    terminalEvent !== undefined ||
    (command
      ? (TERMINAL_COMMAND_STATES as readonly string[]).includes(command.state)
      : isTerminalRun(run.state));
  return deriveLiveness({
    now,
    run,
    command,
    lastRunEvent: lastRunEvent ?? null,
    lastCommandEvent: (command ? lastCommandEvent : lastRunEvent) ?? null,
    terminal,
    sessionId: run.session_id,
    openToolCalls: openTools,
  });
}
