// Why a task waits, as the manager says it (capacity and its use, backoff or run-after until
// a time, blocked and why, session busy, paused, …); nothing when it does not wait.
import type { TaskWaiting } from '../api.js';
import { Time } from '../ui.js';

export function Waiting({ waiting }: { waiting: TaskWaiting | null | undefined }) {
  if (!waiting) return null;
  return (
    <span class="waiting-reason" data-reason={waiting.reason}>
      <span class="badge tone-wait">waits: {waiting.reason}</span> {waiting.message}
      {waiting.limit && (
        <span class="sub">
          {' '}
          ({waiting.limit.scope} {waiting.limit.key}: {waiting.limit.used} of {waiting.limit.limit}{' '}
          in use)
        </span>
      )}
      {waiting.until && (
        <span class="sub">
          {' '}
          until <Time at={waiting.until} />
        </span>
      )}
    </span>
  );
}
