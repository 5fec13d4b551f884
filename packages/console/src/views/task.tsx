// One queue task: its state and why it waits, what it asks, every attempt with its run,
// session, duration and outcome, its judge runs, and the actions that can act on it.
import { api, type Task } from '../api.js';
import {
  Duration,
  Empty,
  ErrorBox,
  LoadFailed,
  Field,
  Id,
  ListHead,
  StateBadge,
  Td,
  Time,
  useLoad,
} from '../ui.js';
import { TaskActions } from './task-actions.js';
import { Waiting } from './waiting.js';

const REFRESH_MS = 3000;

export function TaskView({ taskId }: { taskId: string }) {
  const task = useLoad(() => api.getTask(taskId), [taskId], REFRESH_MS);
  if (task.error && !task.data)
    return (
      <LoadFailed
        what="task"
        id={taskId}
        error={task.error}
        back={{ href: '/queue', label: 'The queue' }}
      />
    );
  if (!task.data) return <p class="muted">Loading task…</p>;
  const t = task.data;
  return (
    <section>
      <header class="view-head">
        <h1>{t.title}</h1>
        <StateBadge state={t.state} />
        <Id value={t.taskId} what="task id" />
      </header>
      {task.error && (
        <ErrorBox error={task.error} title="Refresh failed (showing the last answer)" />
      )}
      {t.waiting && (
        <p class="panel waiting-panel">
          <Waiting waiting={t.waiting} />
        </p>
      )}
      <div class="actions bar" aria-label="Task actions">
        <TaskActions task={t} onChange={task.reload} />
      </div>
      <div class="grid">
        <TaskFacts task={t} />
        <div class="panel">
          <h2>Asks</h2>
          {typeof t.payload['prompt'] === 'string' ? (
            <blockquote class="prompt">{t.payload['prompt']}</blockquote>
          ) : (
            <p class="muted">No prompt.</p>
          )}
          {t.summary && (
            <>
              <h3>Summary</h3>
              <p>{t.summary}</p>
            </>
          )}
          {t.references.length > 0 && (
            <>
              <h3>References</h3>
              <ul class="plain">
                {t.references.map((r) => (
                  <li key={`${r.kind}:${r.ref}`}>
                    {r.kind}: {r.title ?? r.ref}
                    {r.url && <span class="sub"> {r.url}</span>}
                  </li>
                ))}
              </ul>
            </>
          )}
        </div>
      </div>
      <Attempts task={t} />
      <JudgeRuns task={t} />
    </section>
  );
}

function TaskFacts({ task: t }: { task: Task }) {
  return (
    <div class="panel">
      <h2>Task</h2>
      <dl>
        <Field label="Queue / lane">
          {t.queue} / {t.lane}
        </Field>
        <Field label="Priority">{t.priority}</Field>
        <Field label="Profile">{t.backendProfile}</Field>
        {t.concurrencyKey && (
          <Field label="Concurrency key">
            {t.concurrencyKey} (at most {t.concurrencyLimit ?? 1} at once)
          </Field>
        )}
        <Field label="Tenant / project">
          {t.tenantId} / {t.projectId}
        </Field>
        <Field label="Attempts">
          {t.counters.attempts} of {t.maxAttempts}
          {t.counters.failed > 0 && `, ${t.counters.failed} failed`}
          {t.counters.blocked > 0 && `, ${t.counters.blocked} blocked`}
        </Field>
        {t.retries.length > 0 && <Retries task={t} />}
        {t.sessionId && (
          <Field label="Session">
            <Id value={t.sessionId} what="session id" href={`/sessions/${t.sessionId}`} />
          </Field>
        )}
        {t.schedule && (
          <Field label="Schedule">
            <Id value={t.schedule.scheduleId} what="schedule id" href="/schedules" /> tick{' '}
            <Time at={t.schedule.tick} />
          </Field>
        )}
        {t.scheduling.runAfter && (
          <Field label="Runs after">
            <Time at={t.scheduling.runAfter} />
          </Field>
        )}
        {t.scheduling.lastRefusal && (
          <Field label="Last refusal">
            <code>{t.scheduling.lastRefusal.failureKind}</code> {t.scheduling.lastRefusal.message}{' '}
            <Time at={t.scheduling.lastRefusal.at} />
          </Field>
        )}
        {t.scheduling.retryNote && <Field label="Retry">{t.scheduling.retryNote}</Field>}
        {t.cancelReason && <Field label="Cancelled because">{t.cancelReason}</Field>}
        {t.next && (
          <Field label="Next">
            <code>{t.next}</code>
          </Field>
        )}
        <Field label="Created">
          <Time at={t.createdAt} />
        </Field>
        <Field label="Updated">
          <Time at={t.updatedAt} />
        </Field>
        <Field label="Ended">
          <Time at={t.terminalAt} />
        </Field>
      </dl>
    </div>
  );
}

/** The last retry: who, when, from which state; the budget counts from it. */
function Retries({ task: t }: { task: Task }) {
  const last = t.retries.at(-1)!;
  return (
    <Field label="Retried">
      {t.counters.retries === 1 ? 'once' : `${t.counters.retries} times`}, last by {last.by} from{' '}
      {last.fromState} <Time at={last.at} />
      {last.reason && ` (${last.reason})`}; {t.counters.sinceRetry} of {t.maxAttempts} attempts used
      since
    </Field>
  );
}

function Attempts({ task: t }: { task: Task }) {
  const attempts = [...(t.attempts ?? [])].reverse();
  return (
    <>
      <h2>Attempts</h2>
      {attempts.length === 0 ? (
        <Empty>No attempt yet.</Empty>
      ) : (
        <table class="list attempts">
          <ListHead columns={['#', 'State', 'Run', 'Session', 'Started', 'Took', 'Outcome']} />
          <tbody>
            {attempts.map((a) => (
              <tr key={a.attemptId} data-attempt-id={a.attemptId}>
                <Td label="#" class="num">
                  {a.retryIndex + 1}
                </Td>
                <Td label="State">
                  <StateBadge state={a.state} />
                </Td>
                <Td label="Run">
                  {a.runId ? (
                    <Id value={a.runId} what="run id" href={`/runs/${a.runId}`} />
                  ) : (
                    <span class="muted">–</span>
                  )}
                </Td>
                <Td label="Session">
                  {a.sessionId ? (
                    <Id value={a.sessionId} what="session id" href={`/sessions/${a.sessionId}`} />
                  ) : (
                    <span class="muted">–</span>
                  )}
                </Td>
                <Td label="Started">
                  <Time at={a.startedAt ?? a.createdAt} />
                </Td>
                <Td label="Took">
                  <Duration
                    from={a.startedAt ?? a.createdAt}
                    to={a.terminalAt}
                    running={a.state === 'dispatched' || a.state === 'running'}
                  />
                </Td>
                <Td label="Outcome">
                  {a.failureKind || a.message ? (
                    <span class="bad-text">
                      {a.failureKind && <code>{a.failureKind}</code>} {a.message}
                    </span>
                  ) : (
                    <span class="muted">{a.terminalStatus ?? '–'}</span>
                  )}
                </Td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

function JudgeRuns({ task: t }: { task: Task }) {
  if (t.judgeRuns.length === 0 && !t.scheduling.judge) return null;
  return (
    <>
      <h2>Judge runs</h2>
      {t.judgeRuns.length === 0 ? (
        <Empty>
          No judge run yet; each finished attempt is judged ({t.scheduling.judge?.backendProfile}).
        </Empty>
      ) : (
        <table class="list">
          <ListHead
            columns={['Verdict', 'State', 'Attempt', 'Run', 'Failure', 'Retry suggestion', 'Ended']}
          />
          <tbody>
            {t.judgeRuns.map((j) => (
              <tr key={j.judgeRunId}>
                <Td label="Verdict">
                  <StateBadge state={j.verdict ?? 'pending'} />
                </Td>
                <Td label="State">
                  <StateBadge state={j.state} />
                </Td>
                <Td label="Attempt" class="mono">
                  {j.attemptId ?? '–'}
                </Td>
                <Td label="Run">
                  {j.runId ? (
                    <Id value={j.runId} what="run id" href={`/runs/${j.runId}`} />
                  ) : (
                    <span class="muted">–</span>
                  )}
                </Td>
                <Td label="Failure">{j.failureKind ?? '–'}</Td>
                <Td label="Retry suggestion">{j.retrySuggestion ?? '–'}</Td>
                <Td label="Ended">
                  <Time at={j.terminalAt} />
                </Td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
