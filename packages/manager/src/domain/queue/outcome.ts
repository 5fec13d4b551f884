import type { AttemptState, Supervisor } from '@svc/contracts';
import type { CommandRow } from '../../store/commands.js';
import type { RunRow } from '../../store/runs.js';
import type { RunnerJobRow } from '../runner-jobs/records.js';
import { isTerminalCommand } from '../runs/commands.js';
import { deriveLiveness } from '../runs/liveness.js';
import { isTerminalRun } from '../runs/runs.js';
import type { AttemptRow } from './store.js';

/** The records an attempt points at. Refresh reads exactly these rows: never an event. */
export interface AttemptRecords {
  now: Date;
  run: RunRow | undefined;
  command: CommandRow | undefined;
  runnerJob: RunnerJobRow | undefined;
}

export interface AttemptOutcome {
  state: AttemptState;
  terminalStatus: string | null;
  failureKind: string | null;
  message: string | null;
  startedAt: Date | null;
  terminalAt: Date | null;
  durationMs: number | null;
  eventCount: number | null;
  lastEventSeq: number | null;
  runnerId: string | null;
  jobName: string | null;
  runnerPhase: string | null;
}

const MESSAGE_MAX = 500;
const TERMINAL_ATTEMPT_STATES: readonly string[] = ['completed', 'failed', 'blocked', 'cancelled'];
const bounded = (text: string | null) =>
  text && text.length > MESSAGE_MAX ? `${text.slice(0, MESSAGE_MAX - 1)}…` : text;
const date = (value: Date | string | null | undefined) =>
  value === null || value === undefined ? null : new Date(value);

/**
 * The attempt's state from its command and run records. The command decides (a run stays open
 * between turns); a terminal run without a terminal command decides next; an acknowledged
 * command or a running run means running.
 */
export function outcomeOf(attempt: AttemptRow, records: AttemptRecords): AttemptOutcome {
  const { run, command, runnerJob } = records;
  let state: AttemptState = attempt.state as AttemptState;
  let terminalStatus: string | null = attempt.terminal_status;
  let failureKind: string | null = attempt.failure_kind;
  let message: string | null = attempt.message;
  let terminalAt = date(attempt.terminal_at);

  // A terminal attempt keeps its outcome: the queue itself may have ended it (a cancel, a
  // failed dispatch whose leftover run was then cancelled) before its command was terminal.
  if (!TERMINAL_ATTEMPT_STATES.includes(state)) {
    if (command && isTerminalCommand(command.state)) {
      const expired = command.state === 'expired';
      terminalStatus = expired ? 'failed' : command.state;
      failureKind = expired ? 'command-expired' : command.failure_kind;
      message = command.message;
      terminalAt = date(command.terminal_at) ?? records.now;
    } else if (run && isTerminalRun(run.state)) {
      terminalStatus = run.state;
      failureKind = run.failure_kind;
      message = run.message;
      terminalAt = date(run.terminal_at) ?? records.now;
    }
    if (terminalStatus) state = terminalStatus as AttemptState;
    else if (command?.state === 'confirmed' || run?.state === 'running') state = 'running';
  }
  const startedAt = date(command?.confirmed_at) ?? date(attempt.started_at);
  const createdAt = new Date(attempt.created_at);
  return {
    state,
    terminalStatus,
    failureKind,
    message: bounded(message),
    startedAt,
    terminalAt,
    durationMs: terminalAt ? Math.max(0, terminalAt.getTime() - createdAt.getTime()) : null,
    eventCount: command ? command.event_count : attempt.event_count,
    lastEventSeq: command?.last_event_seq ?? attempt.last_event_seq,
    runnerId: runnerJob?.runner_id ?? attempt.runner_id,
    jobName: runnerJob?.job_name ?? attempt.job_name,
    runnerPhase: runnerJob?.phase ?? attempt.runner_phase,
  };
}

/**
 * The compact supervisor stored with the attempt, derived by the session layer's liveness
 * rules from the run and command records alone (their last event seq is a column of the
 * command). The finer live phase (waiting for a tool, for model output) needs the events and
 * is what `sessions show` answers.
 */
export function supervisorSnapshot(
  now: Date,
  run: RunRow,
  command: CommandRow | null,
  sessionId: string,
  options: { terminal?: boolean } = {},
): Supervisor {
  // An attempt the queue ended (a cancel) is over whatever its command still says.
  const terminal =
    (options.terminal ?? false) ||
    (command ? isTerminalCommand(command.state) : isTerminalRun(run.state));
  const liveness = deriveLiveness({
    now,
    run,
    command,
    lastRunEvent: null,
    lastCommandEvent: null,
    terminal,
    sessionId,
    openToolCalls: 0,
  });
  const seq = command?.last_event_seq ?? (run.last_seq > 0 ? run.last_seq : null);
  const recovery =
    liveness.recoveryActions.find(
      (a) => a.action !== 'inspect-result' && a.action !== 'read-events',
    ) ?? liveness.recoveryActions[0]!;
  return {
    phase: liveness.phase,
    lastActivitySeq: seq,
    lastActivityEventId: seq ? `${run.run_id}:${seq}` : null,
    timeoutBudget: {
      state: liveness.timeoutBudget.state,
      remainingMs: liveness.timeoutBudget.remainingMs,
      timeoutMs: liveness.timeoutBudget.timeoutMs,
    },
    recoveryAction: recovery.action,
    next: `sessions output ${sessionId} --after-seq ${seq ? Math.max(0, seq - 20) : 0}`,
  };
}
