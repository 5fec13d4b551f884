// Recurring schedules: each cron tick submits a task. Next run and the last task it made (a
// link to the task page), read from the schedules API every five seconds.
import { api } from '../api.js';
import { ErrorBox, Id, ListHead, Td, Time, useLoad } from '../ui.js';

export function SchedulesView() {
  const schedules = useLoad(() => api.schedules(), [], 5000);
  return (
    <section>
      <header class="view-head">
        <h1>Schedules</h1>
        <a href="/queue">Queue</a>
      </header>
      {schedules.error && <ErrorBox error={schedules.error} title="Could not list schedules" />}
      {schedules.data && schedules.data.schedules.length === 0 && (
        <p class="muted">
          No schedules. Create one with <code>queue schedules create</code>.
        </p>
      )}
      {schedules.data && schedules.data.schedules.length > 0 && (
        <table class="list">
          <ListHead columns={['Schedule', 'Cron', 'Task', 'Next run', 'Last task']} />
          <tbody>
            {schedules.data.schedules.map((s) => (
              <tr key={s.scheduleId} data-schedule={s.scheduleId}>
                <Td label="Schedule" class="primary-cell">
                  <strong>{s.name ?? s.scheduleId}</strong>
                  <div class="sub mono">{s.scheduleId}</div>
                </Td>
                <Td label="Cron">
                  <code>{s.cron}</code>
                  <div class="sub">{s.timezone}</div>
                </Td>
                <Td label="Task">
                  {typeof s.task['title'] === 'string' ? s.task['title'] : ''}
                  <div class="sub">
                    {s.tenantId} / {s.queue}
                  </div>
                </Td>
                <Td label="Next run">
                  <Time at={s.nextRunAt} />
                </Td>
                <Td label="Last task">
                  {s.lastTaskId ? (
                    <>
                      <Id value={s.lastTaskId} what="task id" href={`/tasks/${s.lastTaskId}`} />
                      {s.lastRunAt && (
                        <div class="sub">
                          tick <Time at={s.lastRunAt} />
                        </div>
                      )}
                    </>
                  ) : (
                    <span class="muted">never fired</span>
                  )}
                  {s.lastError && <div class="sub bad-text">{s.lastError.message}</div>}
                </Td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
