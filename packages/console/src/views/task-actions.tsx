// What an operator can do to a task, each enabled only when the API would act: dispatch (a
// retry once an attempt failed), cancel, refresh the latest attempt's outcome.
import { api, type TaskSummary } from '../api.js';
import { ConfirmAction } from '../confirm.js';

const OPEN = new Set(['dispatched', 'running']);
const FINAL = new Set(['completed', 'cancelled']);

/** Why a new attempt cannot start now, or null when it can. */
export function dispatchBlocked(task: TaskSummary): string | null {
  if (FINAL.has(task.state)) return `the task is ${task.state}`;
  if (task.latestAttempt && OPEN.has(task.latestAttempt.state)) return 'an attempt is in flight';
  if (task.counters.attempts >= task.maxAttempts)
    return `all ${task.maxAttempts} attempts are used`;
  return null;
}

export function TaskActions({ task, onChange }: { task: TaskSummary; onChange: () => void }) {
  const blocked = dispatchBlocked(task);
  const retry = task.state === 'failed' || task.state === 'blocked';
  return (
    <div class="row-actions">
      <ConfirmAction
        label={retry ? 'Retry' : 'Dispatch'}
        question={
          retry
            ? `Start attempt ${task.counters.attempts + 1} of ${task.maxAttempts} for "${task.title}"?`
            : `Dispatch "${task.title}" now?`
        }
        disabled={blocked !== null}
        why={blocked ?? undefined}
        onConfirm={() => api.dispatchTask(task.taskId).then(onChange)}
      />
      <ConfirmAction
        label="Cancel"
        question={`Cancel "${task.title}"?`}
        danger
        disabled={FINAL.has(task.state)}
        why={`the task is ${task.state}`}
        input={{ label: 'Reason (optional)' }}
        onConfirm={(reason) =>
          api.cancelTask(task.taskId, reason || 'cancelled from the console').then(onChange)
        }
      />
      <button
        type="button"
        disabled={!task.latestAttempt}
        title={task.latestAttempt ? 'Read the latest attempt’s outcome again' : 'no attempt yet'}
        onClick={() => void api.refreshTask(task.taskId).then(onChange)}
      >
        Refresh
      </button>
    </div>
  );
}
