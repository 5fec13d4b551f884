// A run's activity and last outcome, as the manager reports them (`activity`, `lastCommand`);
// a run closed before any turn reads its own outcome.
import type { Run } from '../api.js';
import { StateBadge } from '../ui.js';

export const TERMINAL_RUN = new Set(['completed', 'failed', 'blocked', 'cancelled']);
export const TERMINAL_COMMAND = new Set(['completed', 'failed', 'blocked', 'cancelled', 'expired']);

/** The run's state, and what it is doing when the manager says (activity). */
export function RunState({ run }: { run: Run }) {
  return (
    <span class="run-state">
      <StateBadge state={run.state} />
      {run.activity !== 'closed' && (
        <>
          {' '}
          <StateBadge state={run.activity} />
        </>
      )}
      {run.cancelRequested && !TERMINAL_RUN.has(run.state) && <span class="sub"> cancelling</span>}
    </span>
  );
}

/** How the last command ended, or null while none has. */
export function lastOutcomeOf(
  run: Run,
): { state: string; failureKind: string | null; message: string | null } | null {
  const last = run.lastCommand;
  if (last) return TERMINAL_COMMAND.has(last.state) ? last : null;
  if (TERMINAL_RUN.has(run.state))
    return { state: run.state, failureKind: run.failureKind, message: run.message };
  return null;
}

export function Outcome({ run, full }: { run: Run; full?: boolean }) {
  const outcome = lastOutcomeOf(run);
  if (!outcome) return <span class="muted">{run.lastCommand ? 'in progress' : '–'}</span>;
  return (
    <span class="outcome">
      <StateBadge state={outcome.state} />
      {outcome.failureKind && outcome.failureKind !== outcome.state && (
        <code class="bad-text"> {outcome.failureKind}</code>
      )}
      {outcome.message && outcome.state !== 'completed' && (
        <span class={full ? 'message' : 'message clip'} title={outcome.message}>
          {' '}
          {outcome.message}
        </span>
      )}
    </span>
  );
}
