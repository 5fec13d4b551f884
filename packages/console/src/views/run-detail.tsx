// One run: its state, what it is doing and for how long, where it came from (session, task),
// its liveness and lease; its turns with their replies; the live event timeline; its runner
// jobs; and the operator's actions (cancel, interrupt, steer), each enabled only when it can
// act and behind a confirmation.
import { api, type ResultEnvelope, type Run } from '../api.js';
import { ConfirmAction } from '../confirm.js';
import { ago } from '../format.js';
import { useRunEvents } from '../live.js';
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
import { commandIdsOf, Turns } from './commands.js';
import { Outcome, RunState, TERMINAL_RUN } from './outcome.js';
import { Timeline } from './timeline.js';

const REFRESH_MS = 2000;

/** The queue task a run serves, as the queue tags its runs. */
export function taskOf(run: Run): { taskId: string; attemptId: string | null } | null {
  const taskId = run.metadata['queueTaskId'];
  const attemptId = run.metadata['queueAttemptId'];
  return typeof taskId === 'string'
    ? { taskId, attemptId: typeof attemptId === 'string' ? attemptId : null }
    : null;
}

export function RunDetailView({ runId }: { runId: string }) {
  const live = useRunEvents(runId);
  const lastSeq = live.events.at(-1)?.seq ?? 0;
  const run = useLoad(() => api.getRun(runId), [runId, lastSeq], REFRESH_MS);
  const result = useLoad(() => api.runResult(runId), [runId, lastSeq], REFRESH_MS);
  // Runner jobs change when a runner claims, leaves or ends a command: reload on those events
  // (not on every streamed delta), and on a slow timer for phases that change without one.
  const runnerMoves = live.events.filter(
    (e) => e.name?.startsWith('runner.') === true || e.category === 'terminal_status',
  ).length;
  const jobs = useLoad(() => api.runnerJobs(runId), [runId, runnerMoves], REFRESH_MS * 2);
  const latestId = run.data?.latestCommandId ?? null;
  const commandIds = commandIdsOf(live.events, latestId);

  if (run.error && !run.data)
    return (
      <LoadFailed
        what="run"
        id={runId}
        error={run.error}
        back={{ href: '/runs', label: 'All runs' }}
      />
    );
  if (!run.data) return <p class="muted">Loading run…</p>;
  const r = run.data;
  const terminal = TERMINAL_RUN.has(r.state);
  // Only a turn a runner holds can be interrupted or steered.
  const turnActive = r.activity === 'turn-active';
  const noTurn = terminal ? 'the run has ended' : 'no turn is running';

  return (
    <section>
      <header class="view-head">
        <h1>
          Run <Id value={r.runId} what="run id" />
        </h1>
        <RunState run={r} />
        <Duration
          from={r.createdAt}
          to={r.terminalAt}
          running={!terminal}
          label="from creation to its end"
        />
      </header>
      {run.error && <ErrorBox error={run.error} title="Refresh failed (showing the last answer)" />}
      <div class="actions bar" aria-label="Run actions">
        <ConfirmAction
          label="Cancel run"
          question={`Cancel run ${r.runId}? The runner stops its turn and the run ends as cancelled.`}
          danger
          disabled={terminal || r.cancelRequested}
          why={terminal ? 'the run has ended' : 'cancel already requested'}
          input={{ label: 'Reason (optional)' }}
          onConfirm={(reason) => api.cancelRun(r.runId, reason || 'cancelled from the console')}
        />
        <ConfirmAction
          label="Interrupt"
          question="Interrupt the current turn? The run stays open for another turn."
          disabled={!turnActive}
          why={noTurn}
          // The manager targets the run's active turn when none is named.
          onConfirm={() => api.createCommand(r.runId, { type: 'interrupt', payload: {} })}
        />
        <ConfirmAction
          label="Steer"
          question="Send guidance into the running turn:"
          disabled={!turnActive}
          why={noTurn}
          input={{ label: 'Guidance', required: true, multiline: true }}
          onConfirm={(prompt) => api.createCommand(r.runId, { type: 'steer', payload: { prompt } })}
        />
        {!turnActive && !terminal && (
          <span class="sub">Interrupt and Steer act on a running turn.</span>
        )}
      </div>
      <div class="grid">
        <RunFacts run={r} />
        <div class="panel">
          <h2>Liveness</h2>
          {result.error && !result.data && <ErrorBox error={result.error} />}
          {result.data ? (
            <Liveness liveness={result.data.liveness} />
          ) : (
            !result.error && <p class="muted">Loading…</p>
          )}
        </div>
      </div>

      <h2>Turns</h2>
      <Turns runId={r.runId} ids={commandIds} tick={lastSeq} />

      <h2 id="events">Events</h2>
      <Timeline live={live} repliesShown label={`Events of run ${r.runId}`} />

      <h2>Runner jobs</h2>
      {jobs.error && <ErrorBox error={jobs.error} />}
      {jobs.data && jobs.data.runnerJobs.length === 0 && <Empty>No runner job launched.</Empty>}
      {jobs.data && jobs.data.runnerJobs.length > 0 && (
        <table class="list">
          <ListHead
            columns={['Job', 'Phase', 'Launcher', 'Exit', 'Failure', 'Started', 'Ran for']}
          />
          <tbody>
            {jobs.data.runnerJobs.map((job) => (
              <tr key={job.runnerJobId}>
                <Td label="Job" class="mono">
                  {job.jobName}
                </Td>
                <Td label="Phase">
                  <StateBadge state={job.phase} />
                </Td>
                <Td label="Launcher">{job.launcher}</Td>
                <Td label="Exit" class="num">
                  {job.exitCode ?? '–'}
                </Td>
                <Td label="Failure">{failureOf(job.terminalSummary)}</Td>
                <Td label="Started">
                  <Time at={job.startedAt} />
                </Td>
                <Td label="Ran for">
                  <Duration
                    from={job.startedAt}
                    to={job.finishedAt}
                    running={!job.finishedAt && Boolean(job.startedAt)}
                  />
                </Td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function failureOf(summary: Record<string, unknown> | null): string {
  if (!summary) return '–';
  const kind = summary['failureKind'];
  const message = summary['message'] ?? summary['reason'];
  return [kind, message].filter((v) => typeof v === 'string' && v).join(': ') || '–';
}

function Liveness({ liveness }: { liveness: ResultEnvelope['liveness'] }) {
  return (
    <dl>
      <Field label="Phase">
        <StateBadge state={liveness.phase} />
      </Field>
      <Field label="Idle budget">
        {liveness.timeoutBudget.state === 'terminal'
          ? `stopped: the command ended (idle limit ${ago(liveness.timeoutBudget.timeoutMs)})`
          : `${liveness.timeoutBudget.state} · ${ago(liveness.timeoutBudget.remainingMs)} left of ${ago(liveness.timeoutBudget.timeoutMs)}`}
      </Field>
      <Field label="Last event">
        {liveness.lastEventAgeMs === null
          ? 'none'
          : `#${liveness.lastSeq}, ${ago(liveness.lastEventAgeMs)} ago`}
      </Field>
      <Field label="Lease">
        {liveness.lease.owner ? (
          <>
            <span class="mono">{liveness.lease.owner}</span>
            {liveness.lease.expired ? ' (expired)' : ''}, heartbeat{' '}
            {liveness.lease.heartbeatAgeMs === null
              ? 'never'
              : `${ago(liveness.lease.heartbeatAgeMs)} ago`}
          </>
        ) : (
          'not held'
        )}
      </Field>
      <Field label="Next">{liveness.recoveryActions[0]?.action ?? '–'}</Field>
    </dl>
  );
}

function RunFacts({ run }: { run: Run }) {
  const task = taskOf(run);
  return (
    <div class="panel">
      <h2>Run</h2>
      <dl>
        <Field label="Last outcome">
          <Outcome run={run} full />
        </Field>
        <Field label="Tenant / project">
          {run.tenantId} / {run.projectId}
        </Field>
        <Field label="Profile">
          {run.backendProfile} <span class="muted">({run.providerId})</span>
        </Field>
        {run.sessionRef && (
          <Field label="Session">
            <Id
              value={run.sessionRef.sessionId}
              what="session id"
              href={`/sessions/${run.sessionRef.sessionId}`}
            />
          </Field>
        )}
        {task && (
          <Field label="Queue task">
            <Id value={task.taskId} what="task id" href={`/tasks/${task.taskId}`} />
            {task.attemptId && <div class="sub">attempt {task.attemptId}</div>}
          </Field>
        )}
        <Field label="Policy">
          {run.executionPolicy.sandbox}, approval {run.executionPolicy.approval}, network{' '}
          {run.executionPolicy.network}
        </Field>
        <Field label="Lease">
          {run.lease.owner ? <span class="mono">{run.lease.owner}</span> : 'none'} · epoch{' '}
          {run.lease.epoch}
          {run.lease.expiresAt && (
            <>
              {' '}
              · expires <Time at={run.lease.expiresAt} />
            </>
          )}
        </Field>
        {run.failureKind && (
          <Field label="Failure">
            <code>{run.failureKind}</code> {run.message}
          </Field>
        )}
        <Field label="Created">
          <Time at={run.createdAt} />
        </Field>
        <Field label="Claimed">
          <Time at={run.claimedAt} />
        </Field>
        <Field label="Ended">
          <Time at={run.terminalAt} />
        </Field>
      </dl>
    </div>
  );
}
