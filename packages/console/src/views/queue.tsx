// Queue: the commander overview (what needs attention first), stats by state, and the task
// list, paged, with why each waiting task waits and the actions that can act on it.
import { api, type TaskSummary } from '../api.js';
import {
  Empty,
  ErrorBox,
  Id,
  ListHead,
  Pager,
  StateBadge,
  StateTabs,
  Td,
  Time,
  useLoad,
} from '../ui.js';
import { READER_ID } from './sessions.js';
import { TaskActions } from './task-actions.js';
import { Waiting } from './waiting.js';

// The contracts' entry point carries server code, so only its types reach the browser.
const TABS = [
  { value: '', label: 'all' },
  ...['queued', 'dispatched', 'running', 'completed', 'failed', 'blocked', 'cancelled'].map(
    (value) => ({ value, label: value }),
  ),
];
const PAGE = 50;

export function QueueView({ query }: { query: URLSearchParams }) {
  const state = query.get('state') ?? '';
  const cursor = query.get('cursor') ?? undefined;
  const limit = Number(query.get('limit')) || PAGE;
  const stats = useLoad(() => api.queueStats(), [], 5000);
  const commander = useLoad(() => api.commander(READER_ID), [], 5000);
  const tasks = useLoad(
    () => api.listTasks({ ...(state && { state }), ...(cursor && { cursor }), limit }),
    [query.toString()],
    5000,
  );
  const reload = () => {
    stats.reload();
    commander.reload();
    tasks.reload();
  };

  return (
    <section>
      <header class="view-head">
        <h1>Queue</h1>
        <a href="/schedules">Schedules</a>
        <button onClick={reload}>Reload</button>
      </header>
      <div class="grid">
        <div class="panel">
          <h2>Stats</h2>
          {stats.error && <ErrorBox error={stats.error} />}
          {stats.data && stats.data.paused.length > 0 && (
            <p class="panel waiting-panel" data-paused={stats.data.paused.join(' ')}>
              <span class="badge tone-wait">paused</span> {stats.data.paused.join(', ')}: nothing of{' '}
              {stats.data.paused.length === 1 ? 'it' : 'them'} is dispatched until resumed (queue
              resume &lt;queue&gt;)
            </p>
          )}
          {stats.data && (
            <div class="stats">
              <div class="stat">
                <span class="big">{stats.data.tasks.total}</span> tasks
              </div>
              {Object.entries(stats.data.tasks.byState).map(([s, n]) => (
                <a key={s} class="stat" href={`/queue?state=${s}`}>
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
                <li key={item.task.taskId}>
                  <StateBadge state={item.reason} />{' '}
                  <a href={`/tasks/${item.task.taskId}`}>{item.task.title}</a>{' '}
                  <Waiting waiting={item.task.waiting} />
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
      <StateTabs base="/queue" options={TABS} current={state} label="Task state" />
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
      <Pager base="/queue" query={query} nextCursor={tasks.data?.nextCursor} what="tasks" />
    </section>
  );
}

function TaskRow({ task, onChange }: { task: TaskSummary; onChange: () => void }) {
  const attempt = task.latestAttempt;
  return (
    <tr data-task-id={task.taskId}>
      <Td label="Task" class="primary-cell">
        <a href={`/tasks/${task.taskId}`}>{task.title}</a>
        <div class="sub">
          {task.queue} · <Id value={task.taskId} what="task id" />
        </div>
      </Td>
      <Td label="State">
        <StateBadge state={task.state} />
        {task.waiting && (
          <div>
            <Waiting waiting={task.waiting} />
          </div>
        )}
      </Td>
      <Td label="Priority" class="num">
        {task.priority}
      </Td>
      <Td label="Latest attempt">
        {attempt ? (
          <>
            <StateBadge state={attempt.state} />{' '}
            {attempt.runId && (
              <Id value={attempt.runId} what="run id" href={`/runs/${attempt.runId}`} />
            )}
            {attempt.failureKind && (
              <div class="sub bad-text">
                {attempt.failureKind}
                {attempt.message && `: ${attempt.message}`}
              </div>
            )}
          </>
        ) : (
          <span class="muted">none</span>
        )}
      </Td>
      <Td label="Updated">
        <Time at={task.updatedAt} />
      </Td>
      <Td label="Actions">
        <TaskActions task={task} onChange={onChange} />
      </Td>
    </tr>
  );
}
