import type {
  Activity,
  BudgetState,
  Liveness,
  LivenessPhase,
  RecoveryAction,
} from '@svc/contracts';
import type { CommandRow } from '../../store/commands.js';
import type { EventRow } from '../../store/events.js';
import { iso } from '../../store/json.js';
import type { RunRow } from '../../store/runs.js';

/** Share of the idle budget left at which a run counts as approaching its idle timeout. */
const APPROACHING_SHARE = 0.2;

export interface LivenessInput {
  now: Date;
  run: RunRow;
  command: CommandRow | null;
  lastRunEvent: EventRow | null;
  lastCommandEvent: EventRow | null;
  terminal: boolean;
  sessionId: string | null;
  /** Tool calls of the command that started and have not finished. */
  openToolCalls: number;
}

/**
 * Liveness, derived at query time and never stored: where the run is (phase), when anything
 * last happened, and the idle budget. Any agent activity resets the idle start: an event of
 * the command, or a runner heartbeat reporting an agent notification.
 */
export function deriveLiveness(input: LivenessInput): Liveness {
  const { now, run, command, lastRunEvent, lastCommandEvent, terminal } = input;
  const policy = run.execution_policy as { timeoutMs?: number };
  const timeoutMs = policy.timeoutMs ?? 600_000;
  const leaseExpired = run.lease_expires_at !== null && time(run.lease_expires_at) <= now.getTime();

  const lastActivity = lastRunEvent ? activityOf(lastRunEvent, now) : null;
  const lastCommandActivity = lastCommandEvent ? activityOf(lastCommandEvent, now) : null;

  // Idle start: the latest of command confirmation, its last event, and reported agent activity.
  const candidates: Array<{ at: number; seq: number | null }> = [];
  const started = command?.confirmed_at ?? command?.created_at ?? run.claimed_at ?? run.created_at;
  candidates.push({ at: time(started), seq: null });
  if (lastCommandEvent)
    candidates.push({ at: time(lastCommandEvent.recorded_at), seq: lastCommandEvent.seq });
  if (run.last_activity_at) candidates.push({ at: time(run.last_activity_at), seq: null });
  const idleStart = candidates.reduce((a, b) => (b.at > a.at ? b : a));
  const idleElapsedMs = Math.max(0, now.getTime() - idleStart.at);
  const elapsedMs = Math.max(0, now.getTime() - time(command?.created_at ?? run.created_at));
  const remainingMs = Math.max(0, timeoutMs - idleElapsedMs);
  const state: BudgetState = terminal
    ? 'terminal'
    : remainingMs === 0
      ? 'idle-timed-out'
      : remainingMs <= timeoutMs * APPROACHING_SHARE
        ? 'approaching-idle-timeout'
        : 'within-budget';

  const phase = derivePhase(
    run,
    command,
    lastCommandEvent ?? null,
    terminal,
    leaseExpired,
    input.openToolCalls,
  );
  return {
    phase,
    active: !terminal,
    lastSeq: run.last_seq,
    lastEventAgeMs: lastRunEvent
      ? Math.max(0, now.getTime() - time(lastRunEvent.recorded_at))
      : null,
    lastActivity,
    lastCommandActivity,
    lease: {
      owner: run.lease_owner,
      expiresAt: iso(run.lease_expires_at),
      expired: leaseExpired,
      heartbeatAt: iso(run.heartbeat_at),
      heartbeatAgeMs: run.heartbeat_at ? Math.max(0, now.getTime() - time(run.heartbeat_at)) : null,
    },
    recoveryActions: recoveryActions(run, command, phase, state, input.sessionId),
    timeoutBudget: {
      timeoutKind: 'idle',
      hardTimeout: false,
      timeoutMs,
      idleStartedAt: new Date(idleStart.at).toISOString(),
      idleElapsedMs,
      lastActivityAt: iso(lastCommandEvent?.recorded_at ?? run.last_activity_at ?? null),
      lastActivitySeq: lastCommandEvent?.seq ?? null,
      elapsedMs,
      remainingMs: terminal ? 0 : remainingMs,
      state,
    },
  };
}

function derivePhase(
  run: RunRow,
  command: CommandRow | null,
  last: EventRow | null,
  terminal: boolean,
  leaseExpired: boolean,
  openTools: number,
): LivenessPhase {
  if (terminal) return 'terminal';
  if (
    run.lease_owner === null ||
    (command && (command.state === 'accepted' || command.state === 'delivered'))
  ) {
    return leaseExpired ? 'runner-heartbeat-stale' : 'waiting-runner';
  }
  if (leaseExpired) return 'runner-heartbeat-stale';
  if (!last) return 'waiting-model';
  if (last.name === 'agent.transport-closed') return 'transport-disconnected';
  if (last.name === 'agent.stdio-inactive') return 'runner-stdio-inactive';
  // A tool still running decides the phase, whatever was recorded after it started.
  if (openTools > 0)
    return last.category === 'command_output' ? 'waiting-tool-output' : 'waiting-tool';
  const data = last.data;
  switch (last.category) {
    case 'error':
      if (last.name === 'agent.transport-closed') return 'transport-disconnected';
      return 'waiting-model';
    case 'system':
      if (last.name === 'agent.stdio-inactive') return 'runner-stdio-inactive';
      if (last.name === 'agent.transport-closed') return 'transport-disconnected';
      return 'waiting-model';
    case 'tool_call':
      return data['status'] === 'started' || data['status'] === 'inProgress'
        ? 'waiting-tool'
        : 'idle-after-tool';
    case 'command_output':
      return data['final'] === true ? 'idle-after-tool' : 'waiting-tool-output';
    case 'assistant_message':
      return data['final'] === true ? 'waiting-model' : 'waiting-model-output';
    default:
      return 'waiting-model';
  }
}

function recoveryActions(
  run: RunRow,
  command: CommandRow | null,
  phase: LivenessPhase,
  budget: BudgetState,
  sessionId: string | null,
): RecoveryAction[] {
  const base = `/api/v1/runs/${run.run_id}`;
  const actions: RecoveryAction[] = [
    {
      action: 'inspect-result',
      description: 'read the result envelope',
      path: command ? `${base}/commands/${command.command_id}/result` : `${base}/result`,
    },
    {
      action: 'read-events',
      description: 'page the run events or the session trace',
      path: sessionId ? `/api/v1/sessions/${sessionId}/trace` : `${base}/events`,
    },
  ];
  const stuck =
    phase === 'runner-heartbeat-stale' ||
    phase === 'transport-disconnected' ||
    phase === 'runner-stdio-inactive' ||
    budget === 'idle-timed-out';
  if (sessionId) {
    actions.push({
      action: 'continue-same-session',
      description: 'send the next step to the same session',
      path: `/api/v1/sessions/${sessionId}/send`,
    });
  } else if (stuck || phase === 'terminal') {
    actions.push({
      action: 'split-task',
      description: 'no session to continue: create a new task or run stating the next step',
      path: null,
    });
  }
  if (phase === 'waiting-runner' && run.lease_owner === null) {
    actions.push({
      action: 'create-runner-job',
      description: 'no runner has claimed the run; request a runner job',
      path: `${base}/runner-jobs`,
    });
  }
  return actions;
}

function activityOf(event: EventRow, now: Date): Activity {
  return {
    sourceSeq: event.seq,
    eventId: `${event.run_id}:${event.seq}`,
    activityKind: event.name ? `${event.category}:${event.name}` : event.category,
    observedAt: new Date(event.recorded_at).toISOString(),
    ageMs: Math.max(0, now.getTime() - time(event.recorded_at)),
  };
}

const time = (value: Date | string) => new Date(value).getTime();
