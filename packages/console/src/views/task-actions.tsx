// What an operator can do to a task, each enabled only when the API would act: dispatch (a
// new attempt within its budget), retry (queue an ended task again with a fresh budget),
// cancel, refresh the latest attempt's outcome.
import { api, type TaskSummary } from '../api.js';
import { ConfirmAction } from '../confirm.js';

const OPEN = new Set(['dispatched', 'running']);
const FINAL = new Set(['completed', 'cancelled']);
/** States a retry takes (the API refuses the others with state-conflict). */
const RETRYABLE = new Set(['failed', 'blocked', 'cancelled']);

/** Why a new attempt cannot start now, or null when it can. */
export function dispatchBlocked(task: TaskSummary): string | null {
  if (FINAL.has(task.state)) return `the task is ${task.state}`;
  if (task.latestAttempt && OPEN.has(task.latestAttempt.state)) return 'an attempt is in flight';
  if (task.waiting?.reason === 'queue-paused')
    return `queue ${task.queue} is paused: queue resume ${task.queue} first`;
  if (task.counters.sinceRetry >= task.maxAttempts)
    return `all ${task.maxAttempts} attempts are used: Retry gives it a fresh budget`;
  return null;
}

export function TaskActions({ task, onChange }: { task: TaskSummary; onChange: () => void }) {
  const blocked = dispatchBlocked(task);
  const ended = task.state === 'failed' || task.state === 'blocked';
  const attempts = task.counters.attempts;
  return (
    <div class="row-actions">
      <ConfirmAction
        label="Dispatch"
        question={
          ended
            ? `Start attempt ${task.counters.sinceRetry + 1} of ${task.maxAttempts} for "${task.title}" now?`
            : `Dispatch "${task.title}" now?`
        }
        disabled={blocked !== null}
        why={blocked ?? undefined}
        onConfirm={() => api.dispatchTask(task.taskId).then(onChange)}
      />
      {RETRYABLE.has(task.state) && (
        <ConfirmAction
          label="Retry"
          question={`Queue "${task.title}" again with a fresh budget of ${task.maxAttempts} attempt(s)?${attempts > 0 ? ` Its ${attempts} earlier attempt(s) stay listed.` : ''}`}
          input={{ label: 'Reason (optional)' }}
          onConfirm={(reason) => api.retryTask(task.taskId, reason).then(onChange)}
        />
      )}
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
