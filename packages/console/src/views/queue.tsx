// Queue: the commander overview (what needs attention first), stats by state, and the task
// list with dispatch, cancel and refresh on each task.
import { api, type Task } from '../api.js';
import {
  ConfirmAction,
  Empty,
  ErrorBox,
  ListHead,
  StateBadge,
  StateTabs,
  Time,
  useLoad,
} from '../ui.js';
import { READER_ID } from './sessions.js';

// The contracts' entry point carries server code, so only its types reach the browser.
const TASK_STATES = [
  'queued',
  'dispatched',
  'running',
  'completed',
  'failed',
  'blocked',
  'cancelled',
];

export function QueueView({ query }: { query: URLSearchParams }) {
  const state = query.get('state') ?? '';
  const stats = useLoad(() => api.queueStats(), [], 5000);
  const commander = useLoad(() => api.commander(READER_ID), [], 5000);
  const tasks = useLoad(() => api.listTasks({ ...(state && { state }) }), [state], 5000);
  const reload = () => {
    stats.reload();
    commander.reload();
    tasks.reload();
  };

  return (
    <section>
      <header class="view-head">
        <h1>Queue</h1>
        <button onClick={reload}>Reload</button>
      </header>
      <div class="grid">
        <div class="panel">
          <h2>Stats</h2>
          {stats.error && <ErrorBox error={stats.error} />}
          {stats.data && (
            <div class="stats">
              <div class="stat">
                <span class="big">{stats.data.tasks.total}</span> tasks
              </div>
              {Object.entries(stats.data.tasks.byState).map(([s, n]) => (
                <a class="stat" href={`/queue?state=${s}`}>
                  <span class="big">{n}</span> <StateBadge state={s} />
                </a>
              ))}
              <div class="stat">
                <span class="big">{stats.data.attempts.total}</span> attempts
                {stats.data.attempts.retries > 0 && `, ${stats.data.attempts.retries} retries`}
              </div>
            </div>
          )}
        </div>
        <div class="panel">
          <h2>Commander</h2>
          {commander.error && <ErrorBox error={commander.error} />}
          {commander.data && commander.data.items.length === 0 && (
            <Empty>Nothing needs attention.</Empty>
          )}
          {commander.data && commander.data.items.length > 0 && (
            <ul class="commander">
              {commander.data.items.slice(0, 8).map((item) => (
                <li>
                  <StateBadge state={item.reason} /> {item.task.title}{' '}
                  <span class="muted mono">{item.task.taskId}</span>
                </li>
              ))}
            </ul>
          )}
          {commander.data && commander.data.next.length > 0 && (
            <>
              <h3>Next</h3>
              <pre class="command">{commander.data.next.slice(0, 3).join('\n')}</pre>
            </>
          )}
        </div>
      </div>
      <StateTabs base="/queue" states={TASK_STATES} current={state} label="Task state" />
      {tasks.error && <ErrorBox error={tasks.error} title="Could not list tasks" />}
      {tasks.data?.tasks.length === 0 && (
        <Empty>No tasks{state ? ` in state ${state}` : ''}. Submit one with `queue submit`.</Empty>
      )}
      {tasks.data && tasks.data.tasks.length > 0 && (
        <table class="list">
          <ListHead
            columns={['Task', 'State', 'Priority', 'Latest attempt', 'Updated', 'Actions']}
          />
          <tbody>
            {tasks.data.tasks.map((task) => (
              <TaskRow key={task.taskId} task={task} onChange={reload} />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function TaskRow({
  task,
  onChange,
}: {
  task: Pick<
    Task,
    'taskId' | 'title' | 'queue' | 'state' | 'priority' | 'latestAttempt' | 'updatedAt'
  >;
  onChange: () => void;
}) {
  const attempt = task.latestAttempt;
  const open = task.state === 'dispatched' || task.state === 'running';
  const final = task.state === 'completed' || task.state === 'cancelled';
  return (
    <tr data-task-id={task.taskId}>
      <td>
        {task.title}
        <div class="sub mono">
          {task.queue} · {task.taskId}
        </div>
      </td>
      <td>
        <StateBadge state={task.state} />
      </td>
      <td class="num">{task.priority}</td>
      <td>
        {attempt ? (
          <>
            <StateBadge state={attempt.state} />{' '}
            {attempt.runId && (
              <a href={`/runs/${attempt.runId}`} class="mono">
                {attempt.runId}
              </a>
            )}
            {attempt.failureKind && <div class="sub bad-text">{attempt.failureKind}</div>}
          </>
        ) : (
          <span class="muted">none</span>
        )}
      </td>
      <td>
        <Time at={task.updatedAt} />
      </td>
      <td>
        <div class="row-actions">
          <ConfirmAction
            label="Dispatch"
            question={`Dispatch "${task.title}" now?`}
            disabled={open || final}
            onConfirm={() => api.dispatchTask(task.taskId).then(onChange)}
          />
          <ConfirmAction
            label="Cancel"
            question={`Cancel "${task.title}"?`}
            danger
            disabled={final}
            input={{ label: 'Reason (optional)' }}
            onConfirm={(reason) =>
              api.cancelTask(task.taskId, reason || 'cancelled from the console').then(onChange)
            }
          />
          <button
            disabled={!attempt}
            onClick={() => void api.refreshTask(task.taskId).then(onChange)}
          >
            Refresh
          </button>
        </div>
      </td>
    </tr>
  );
}
