import type { RunState } from '@svc/contracts';
import type { CommandRow } from '../../store/commands.js';

export interface ClosingOutcome {
  state: Exclude<RunState, 'pending' | 'claimed' | 'running' | 'completed'>;
  failureKind: string;
  message: string | null;
  details: Record<string, unknown>;
}

/**
 * How a run ends when its runner closes it (`completed`: idle, or no more work can come):
 * as its last turn (the latest turn or resume command) ended, so a run whose only turn failed
 * reads `failed` with that turn's failure kind, not `completed`.
 *
 * - last turn `completed`, or no turn at all: `completed` (undefined here: the report stands);
 * - `failed`: `failed` with the turn's failure kind and message;
 * - `blocked`: `blocked` likewise (a run-blocking kind already blocked the run with the turn);
 * - `cancelled`: `cancelled` (the work the run was for was cancelled; nothing completed it);
 * - `expired` (no runner took it in time): `failed`, `command-expired`.
 *
 * An earlier turn's failure does not decide: a later turn that completed is the run's answer.
 */
export function closingOutcome(
  last: CommandRow | undefined,
  runnerMessage: string | null,
): ClosingOutcome | undefined {
  if (!last || last.state === 'completed') return undefined;
  const details = {
    lastCommandId: last.command_id,
    lastCommandState: last.state,
    ...(runnerMessage ? { closedBecause: runnerMessage.slice(0, 500) } : {}),
  };
  const message = last.message ?? `last turn ${last.state}`;
  switch (last.state) {
    case 'failed':
      return {
        state: 'failed',
        failureKind: last.failure_kind ?? 'backend-failed',
        message,
        details,
      };
    case 'blocked':
      return {
        state: 'blocked',
        failureKind: last.failure_kind ?? 'backend-failed',
        message,
        details,
      };
    case 'cancelled':
      return { state: 'cancelled', failureKind: 'cancelled', message, details };
    case 'expired':
      return {
        state: 'failed',
        failureKind: last.failure_kind ?? 'command-expired',
        message,
        details,
      };
    default:
      // Not terminal: the caller refuses to close a run with unfinished commands first.
      return undefined;
  }
}
