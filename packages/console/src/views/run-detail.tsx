// One run: its state, profile, liveness and lease; its commands with their result envelopes;
// the live event timeline; its runner jobs; and the operator's actions (cancel, interrupt,
// steer), each behind a confirmation.
import { useMemo } from 'preact/hooks';
import { api, type Command, type ResultEnvelope, type Run } from '../api.js';
import { useRunEvents } from '../live.js';
import { renderMarkdown } from '../markdown.js';
import {
  ago,
  ConfirmAction,
  Empty,
  ErrorBox,
  Field,
  ListHead,
  StateBadge,
  Time,
  useLoad,
} from '../ui.js';
import { Timeline } from './timeline.js';

const REFRESH_MS = 2000;
const TERMINAL = new Set(['completed', 'failed', 'blocked', 'cancelled']);

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

  // Commands are named by their events and by the run record; fetch each with its result.
  const commandIds = useMemo(() => {
    const ids = new Set<string>();
    for (const e of live.events) if (e.commandId) ids.add(e.commandId);
    if (run.data?.latestCommandId) ids.add(run.data.latestCommandId);
    return [...ids];
  }, [live.events, run.data?.latestCommandId]);

  if (run.error && !run.data)
    return (
      <section>
        <h1>Run {runId}</h1>
        <ErrorBox error={run.error} title="Could not load this run" />
        <p>
          <a href="/runs">← All runs</a>
        </p>
      </section>
    );
  if (!run.data) return <p class="muted">Loading run…</p>;
  const r = run.data;
  const liveness = result.data?.liveness;
  const terminal = TERMINAL.has(r.state);

  return (
    <section>
      <header class="view-head">
        <h1>
          Run <span class="mono">{r.runId}</span>
        </h1>
        <StateBadge state={r.state} />
        {r.cancelRequested && !terminal && <span class="sub">cancel requested</span>}
      </header>
      {run.error && <ErrorBox error={run.error} title="Refresh failed (showing the last answer)" />}
      <div class="actions bar" aria-label="Run actions">
        <ConfirmAction
          label="Cancel run"
          question={`Cancel run ${r.runId}? The runner stops its turn and the run ends as cancelled.`}
          danger
          disabled={terminal}
          input={{ label: 'Reason (optional)' }}
          onConfirm={(reason) => api.cancelRun(r.runId, reason || 'cancelled from the console')}
        />
        <ConfirmAction
          label="Interrupt"
          question="Interrupt the current turn? The run stays open for another turn."
          disabled={terminal || commandIds.length === 0}
          // The manager targets the run's active turn when none is named.
          onConfirm={() => api.createCommand(r.runId, { type: 'interrupt', payload: {} })}
        />
        <ConfirmAction
          label="Steer"
          question="Send guidance into the running turn:"
          disabled={terminal}
          input={{ label: 'Guidance', required: true, multiline: true }}
          onConfirm={(prompt) => api.createCommand(r.runId, { type: 'steer', payload: { prompt } })}
        />
      </div>
      <div class="grid">
        <RunFacts run={r} />
        <div class="panel">
          <h2>Liveness</h2>
          {result.error && !result.data && <ErrorBox error={result.error} />}
          {liveness ? (
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
          ) : (
            !result.error && <p class="muted">Loading…</p>
          )}
        </div>
      </div>

      <h2>Commands</h2>
      {commandIds.length === 0 ? (
        <Empty>No commands yet. Send a turn with POST /api/v1/runs/{r.runId}/commands.</Empty>
      ) : (
        commandIds.map((id) => (
          <CommandCard key={id} runId={r.runId} commandId={id} tick={lastSeq} />
        ))
      )}

      <h2>Events</h2>
      <Timeline live={live} />

      <h2>Runner jobs</h2>
      {jobs.error && <ErrorBox error={jobs.error} />}
      {jobs.data && jobs.data.runnerJobs.length === 0 && <Empty>No runner job launched.</Empty>}
      {jobs.data && jobs.data.runnerJobs.length > 0 && (
        <table class="list">
          <ListHead
            columns={['Job', 'Phase', 'Launcher', 'Exit', 'Failure', 'Started', 'Finished']}
          />
          <tbody>
            {jobs.data.runnerJobs.map((job) => (
              <tr key={job.runnerJobId}>
                <td class="mono">{job.jobName}</td>
                <td>
                  <StateBadge state={job.phase} />
                </td>
                <td>{job.launcher}</td>
                <td class="num">{job.exitCode ?? '–'}</td>
                <td>{failureOf(job.terminalSummary)}</td>
                <td>
                  <Time at={job.startedAt} />
                </td>
                <td>
                  <Time at={job.finishedAt} />
                </td>
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

function RunFacts({ run }: { run: Run }) {
  return (
    <div class="panel">
      <h2>Run</h2>
      <dl>
        <Field label="Tenant / project">
          {run.tenantId} / {run.projectId}
        </Field>
        <Field label="Profile">
          {run.backendProfile} <span class="muted">({run.providerId})</span>
        </Field>
        <Field label="Policy">
          {run.executionPolicy.sandbox}, approval {run.executionPolicy.approval}, network{' '}
          {run.executionPolicy.network}
        </Field>
        {run.sessionRef && (
          <Field label="Session">
            <a href={`/sessions/${run.sessionRef.sessionId}`} class="mono">
              {run.sessionRef.sessionId}
            </a>
          </Field>
        )}
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
        <Field label="Ended">
          <Time at={run.terminalAt} />
        </Field>
      </dl>
    </div>
  );
}

function CommandCard(props: { runId: string; commandId: string; tick: number }) {
  const command = useLoad(
    () => api.getCommand(props.runId, props.commandId),
    [props.commandId, props.tick],
  );
  const result = useLoad(
    () => api.commandResult(props.runId, props.commandId),
    [props.commandId, props.tick],
  );
  const c: Command | null = command.data;
  const res: ResultEnvelope | null = result.data;
  return (
    <article class="panel command-card" data-command-id={props.commandId}>
      <div class="entry-head">
        <span class="mono">{props.commandId}</span> {c && <strong>{c.type}</strong>}{' '}
        <StateBadge state={c?.state} />
        {res?.terminalStatus && <span class="sub">result: {res.terminalStatus}</span>}
      </div>
      {command.error && <ErrorBox error={command.error} />}
      {c && typeof c.payload['prompt'] === 'string' && (
        <blockquote class="prompt">{c.payload['prompt']}</blockquote>
      )}
      {res && (
        <>
          {res.reply ? (
            <div
              class="markdown reply"
              // Sanitized by renderMarkdown (marked, then DOMPurify).
              dangerouslySetInnerHTML={{ __html: renderMarkdown(res.reply) }}
            />
          ) : (
            <p class="muted">{res.completed ? 'No reply.' : 'Waiting for the reply…'}</p>
          )}
          {res.blocker && (
            <p class="bad-text">
              blocked: <code>{res.blocker.failureKind}</code> {res.blocker.message}
            </p>
          )}
          {res.failureKind && !res.blocker && (
            <p class="bad-text">
              <code>{res.failureKind}</code>
            </p>
          )}
          <details>
            <summary>
              Result envelope ({res.toolCallSummary.count} tool calls, {res.eventCount} events)
            </summary>
            <pre class="output">{JSON.stringify(res, null, 2)}</pre>
          </details>
        </>
      )}
    </article>
  );
}
