import {
  type CompletionEvidence,
  type FinalResponse,
  type ResultEnvelope,
  type TerminalStatus,
  type ToolCallSummary,
} from '@svc/contracts';
import { eventAt, type EventRow } from '../../store/events.js';
import {
  assistantParts,
  latestAssistant,
  latestTerminal,
  openToolCalls,
  scopeCounts,
  targetEventsAfter,
  type Scope,
} from '../../store/result-queries.js';
import { windowTotals, type WindowTotals } from '../../store/result-windows.js';
import { dbNow, type RunRow } from '../../store/runs.js';
import type { CommandRow } from '../../store/commands.js';
import { expireCommands } from './command-expiry.js';
import type { Ctx } from '../context.js';
import { getCommandRow, isTerminalCommand } from './commands.js';
import { deriveLiveness } from './liveness.js';
import { steerDeliveryOf } from './records.js';
import { getRunRow } from './runs.js';

const RECENT_TOOL_CALLS = 10;
/** Largest seq the integer column holds: "before any terminal event". */
const MAX_SEQ = 2_147_483_647;

/**
 * The result envelope: what happened in a run or one command, aggregated from events at query
 * time. `completed` comes only from a terminal_status event; the reply is the last
 * authoritative final assistant message before it, else the last non-empty assistant text
 * (a labelled fallback). Counters cover a window of at most RESULT_AGGREGATION_CAP events;
 * past it the envelope says eventsCapped and where the next window starts.
 */
export async function buildResult(
  ctx: Ctx,
  runId: string,
  options: { commandId?: string; afterSeq?: number },
): Promise<ResultEnvelope> {
  // The expiry probe and the first reads go out together (one round trip of wait, not three);
  // in the rare case something expired, the run and command are read again after it.
  const read = async () => {
    const [run, named] = await Promise.allSettled([
      getRunRow(ctx, runId),
      options.commandId ? getCommandRow(ctx.db, options.commandId, runId) : undefined,
    ]);
    // An unknown run is reported as such, whichever read failed first.
    if (run.status === 'rejected') throw run.reason;
    if (named.status === 'rejected') throw named.reason;
    return [run.value, named.value] as const;
  };
  // A named command's scope is known before anything is read: its terminal event and the
  // database clock go out with the first reads (one round trip fewer on a result long-poll).
  const early = options.commandId
    ? Promise.all([dbNow(ctx.db), latestTerminal(ctx.db, { runId, commandId: options.commandId })])
    : undefined;
  early?.catch(() => undefined); // a failed first read reports the failure instead
  const [expired, first] = await Promise.all([expireCommands(ctx, runId), read()]);
  const [run, named] = expired > 0 ? await read() : first;
  const command = named
    ? named
    : run.latest_command_id
      ? await getCommandRow(ctx.db, run.latest_command_id, runId)
      : null;
  const scope: Scope = { runId, commandId: command?.command_id ?? null };
  const cap = ctx.config.resultEventCap;
  const afterSeq = options.afterSeq ?? 0;

  const [[now, terminalEvent], counts] = await Promise.all([
    early && expired === 0
      ? early.then(settledWith(ctx, scope, command))
      : clockAndTerminal(ctx, scope),
    // A command keeps its own counters (event log); only a run without commands is counted.
    command
      ? Promise.resolve({ count: command.event_count, lastSeq: command.last_event_seq })
      : scopeCounts(ctx.db, scope),
  ]);
  // The window spans at most `cap` seqs of the run, so it never holds more than `cap` events.
  const scopeEnd = counts.lastSeq ?? afterSeq;
  const eventsCapped = scopeEnd > afterSeq + cap;
  const throughSeq = eventsCapped ? afterSeq + cap : Math.max(afterSeq, scopeEnd);
  const beforeSeq = terminalEvent ? terminalEvent.seq : MAX_SEQ;

  const [
    authoritative,
    { tools, artifacts: artifactRow },
    lastRunEvent,
    lastScopeEvent,
    openTools,
    attemptId,
  ] = await Promise.all([
    latestAssistant(ctx.db, scope, beforeSeq, true),
    windowTotals(ctx.db, scope, afterSeq, throughSeq, RECENT_TOOL_CALLS),
    run.last_seq > 0 ? eventAt(ctx.db, runId, run.last_seq) : Promise.resolve(undefined),
    counts.lastSeq !== null ? eventAt(ctx.db, runId, counts.lastSeq) : Promise.resolve(undefined),
    terminalEvent ? Promise.resolve(0) : openToolCalls(ctx.db, scope),
    attemptOf(ctx, command),
  ]);
  const selected = authoritative ?? (await latestAssistant(ctx.db, scope, beforeSeq, false));
  const final = selected
    ? await finalResponseOf(ctx, scope, selected, beforeSeq, authoritative !== undefined)
    : null;

  const terminal = terminalOf(run, command, terminalEvent);
  const completed = terminalEvent !== undefined && terminal.status === 'completed';
  const authority = final ? final.authority : 'missing';
  const needsContinuation = completed && authority !== 'authoritative';
  const status = terminal.status ?? command?.state ?? run.state;

  const envelope: ResultEnvelope = {
    runId,
    commandId: command?.command_id ?? null,
    attemptId,
    status: command?.state === 'expired' ? 'expired' : status,
    terminalStatus: terminal.status,
    completed,
    terminalSource: terminalEvent
      ? {
          kind: 'terminal-status-event',
          seq: terminalEvent.seq,
          eventId: `${runId}:${terminalEvent.seq}`,
        }
      : terminal.status
        ? { kind: command ? 'command-record' : 'run-record', seq: null, eventId: null }
        : { kind: 'none', seq: null, eventId: null },
    reply: completed && final ? final.text : null,
    finalResponse: final,
    finalResponseAuthority: authority,
    finalResponseFallback: authority === 'fallback',
    needsContinuation,
    completionEvidence: evidence(
      run,
      terminal.status,
      terminalEvent?.seq ?? null,
      authority,
      needsContinuation,
    ),
    finalAssistantSeq: final?.seq ?? null,
    finalAssistantSource: final?.source ?? null,
    finalAssistantTextTruncated: final?.textTruncated ?? false,
    finalAssistantOutputTruncated: final?.outputTruncated ?? false,
    failureKind: terminal.failureKind,
    blocker:
      terminal.status === 'blocked'
        ? {
            failureKind: terminal.failureKind ?? 'blocked',
            message: terminal.message ?? 'blocked',
            details: terminal.details,
          }
        : null,
    lastSeq: run.last_seq,
    eventCount: run.last_seq, // seqs are contiguous from 1: the count is the last seq
    eventsCapped,
    nextAfterSeq: eventsCapped ? throughSeq : null,
    aggregationWindow: {
      afterSeq,
      throughSeq,
      cap,
    },
    ...(command ? { scopedLastSeq: counts.lastSeq, scopedEventCount: counts.count } : {}),
    artifactSummary: {
      outputEvents: artifactRow.output_events,
      outputBytes: Number(artifactRow.output_bytes),
      keptBytes: Number(artifactRow.kept_bytes),
      truncatedOutputs: artifactRow.truncated_outputs,
      diffEvents: artifactRow.diff_events,
      diffBytes: Number(artifactRow.diff_bytes),
      references: artifactRow.references ?? [],
    },
    toolCallSummary: summarizeTools(tools),
    liveness: deriveLiveness({
      now,
      run,
      command,
      lastRunEvent: lastRunEvent ?? null,
      lastCommandEvent: lastScopeEvent ?? null,
      terminal: terminal.status !== null,
      sessionId: run.session_id,
      openToolCalls: openTools,
    }),
    threadId: command?.thread_id ?? null,
  };
  if (command?.type === 'steer') {
    const steerTerminal = terminalEvent?.seq ?? MAX_SEQ;
    const later = command.target_command_id
      ? await targetEventsAfter(
          ctx.db,
          runId,
          command.command_id,
          command.target_command_id,
          steerTerminal,
        )
      : false;
    envelope.steerDelivery = steerDeliveryOf(command, later);
  }
  return envelope;
}

interface TerminalFacts {
  status: TerminalStatus | null;
  failureKind: string | null;
  message: string | null;
  details: Record<string, unknown>;
}

function terminalOf(
  run: RunRow,
  command: CommandRow | null,
  event: EventRow | undefined,
): TerminalFacts {
  if (event) {
    const data = event.data;
    return {
      status: data['status'] as TerminalStatus,
      failureKind: (data['failureKind'] as string | null) ?? null,
      message: (data['message'] as string | null) ?? null,
      details: (data['details'] as Record<string, unknown> | undefined) ?? {},
    };
  }
  const state = command ? command.state : run.state;
  const failureKind = command ? command.failure_kind : run.failure_kind;
  const message = command ? command.message : run.message;
  const status: TerminalStatus | null =
    state === 'expired'
      ? 'failed'
      : ['failed', 'blocked', 'cancelled'].includes(state)
        ? (state as TerminalStatus)
        : null;
  // A record that claims `completed` without its event is not trusted as completed.
  return { status, failureKind, message, details: {} };
}

async function finalResponseOf(
  ctx: Ctx,
  scope: Scope,
  event: EventRow,
  beforeSeq: number,
  authoritative: boolean,
): Promise<FinalResponse> {
  const data = event.data;
  let text = typeof data['text'] === 'string' ? data['text'] : '';
  const parts = typeof data['parts'] === 'number' ? data['parts'] : 1;
  const itemId = typeof data['itemId'] === 'string' ? data['itemId'] : null;
  let textTruncated = data['textTruncated'] === true;
  if (parts > 1 && itemId) {
    const all = await assistantParts(ctx.db, scope, itemId, beforeSeq);
    text = all.map((p) => (typeof p.data['text'] === 'string' ? p.data['text'] : '')).join('');
    textTruncated = all.some((p) => p.data['textTruncated'] === true) || all.length < parts;
  }
  return {
    text,
    seq: event.seq,
    eventId: `${event.run_id}:${event.seq}`,
    source:
      typeof data['source'] === 'string' ? data['source'] : (event.name ?? 'assistant_message'),
    authority: authoritative ? 'authoritative' : 'fallback',
    replyAuthority: data['replyAuthority'] === true,
    final: data['final'] === true,
    textTruncated,
    outputTruncated: data['outputTruncated'] === true,
  };
}

function evidence(
  run: RunRow,
  status: TerminalStatus | null,
  terminalSeq: number | null,
  authority: string,
  needsContinuation: boolean,
): CompletionEvidence {
  const reason =
    status === null
      ? 'not-terminal'
      : status !== 'completed'
        ? `terminal-${status}`
        : authority === 'authoritative'
          ? 'terminal-completed-with-authoritative-final'
          : authority === 'fallback'
            ? 'terminal-completed-without-authoritative-final'
            : 'terminal-completed-without-assistant-text';
  const continueWith = needsContinuation
    ? run.session_id
      ? {
          method: 'POST',
          path: `/api/v1/sessions/${run.session_id}/send`,
          description: 'continue the same session, asking for the final answer',
        }
      : {
          method: 'POST',
          path: `/api/v1/runs/${run.run_id}/commands`,
          description: 'submit a turn on the same run asking for the final answer',
        }
    : null;
  return { reason, terminalSeq, continueWith };
}

function summarizeTools({ tallies, recent }: WindowTotals['tools']): ToolCallSummary {
  const statusCounts: Record<string, number> = {};
  const exitCodeCounts: Record<string, number> = {};
  let count = 0;
  for (const { status, exit_code: exitCode, n } of tallies) {
    count += n;
    const key = status ?? 'unknown';
    statusCounts[key] = (statusCounts[key] ?? 0) + n;
    if (exitCode !== null)
      exitCodeCounts[String(exitCode)] = (exitCodeCounts[String(exitCode)] ?? 0) + n;
  }
  return {
    count,
    statusCounts,
    exitCodeCounts,
    recent: recent.map((r) => ({
      seq: r.seq,
      method: r.method,
      toolName: r.tool_name,
      type: r.type,
      status: r.status,
      exitCode: r.exit_code,
      command: r.command,
    })),
  };
}

function clockAndTerminal(ctx: Ctx, scope: Scope): Promise<[Date, EventRow | undefined]> {
  return Promise.all([dbNow(ctx.db), latestTerminal(ctx.db, scope)]);
}

/**
 * The terminal event read beside the command row may come from an older snapshot than the
 * row: a command seen terminal has its terminal event committed (same transaction), so one
 * that was missed is read again; seen the other way round, the event is the newer fact.
 */
const settledWith =
  (ctx: Ctx, scope: Scope, command: CommandRow | null) =>
  async ([now, terminal]: [Date, EventRow | undefined]): Promise<[Date, EventRow | undefined]> =>
    terminal || !command || !isTerminalCommand(command.state)
      ? [now, terminal]
      : [now, await latestTerminal(ctx.db, scope)];

async function attemptOf(ctx: Ctx, command: CommandRow | null): Promise<string | null> {
  if (!command?.runner_id) return null;
  const runner = await ctx.db
    .selectFrom('runners')
    .select('attempt_id')
    .where('runner_id', '=', command.runner_id)
    .executeTakeFirst();
  return runner?.attempt_id ?? null;
}
