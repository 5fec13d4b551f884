// One session: its facts, a prompt box for the next turn, every run it had with each run's
// turns (newest first, paged), and its active or last run's events following live.
import { useState } from 'preact/hooks';
import { api, ApiError, type EventEnvelope, type Run, type Session } from '../api.js';
import { useRunEvents } from '../live.js';
import {
  Duration,
  Empty,
  ErrorBox,
  Field,
  Id,
  LoadFailed,
  Pager,
  StateBadge,
  Time,
  useLoad,
} from '../ui.js';
import { commandIdsOf, Turns, useRunCommandIds } from './commands.js';
import { RunState, TERMINAL_RUN } from './outcome.js';
import { taskOf } from './run-detail.js';
import { READER_ID } from './sessions.js';
import { Timeline } from './timeline.js';

const RUNS_PER_PAGE = 10;

export function SessionDetailView({
  sessionId,
  query,
}: {
  sessionId: string;
  query: URLSearchParams;
}) {
  const session = useLoad(() => api.getSession(sessionId, READER_ID), [sessionId], 2000);
  const s = session.data;
  const liveRunId = s ? (s.activeRunId ?? s.lastRunId) : null;
  const live = useRunEvents(liveRunId);
  const lastSeq = live.events.at(-1)?.seq ?? 0;
  const cursor = query.get('cursor') ?? undefined;
  const runs = useLoad(
    () => api.listRuns({ sessionId, limit: RUNS_PER_PAGE, ...(cursor && { cursor }) }),
    [sessionId, cursor, s?.version, lastSeq > 0 ? liveRunId : null],
    5000,
  );

  if (session.error && !s)
    return (
      <LoadFailed
        what="session"
        id={sessionId}
        error={session.error}
        back={{ href: '/sessions', label: 'All sessions' }}
      />
    );
  if (!s) return <p class="muted">Loading session…</p>;

  return (
    <section>
      <header class="view-head">
        <h1>
          Session <Id value={s.sessionId} what="session id" />
        </h1>
        <StateBadge state={s.executionState} />
        {s.reader?.unread && (
          <button onClick={() => void api.markRead(s.sessionId, READER_ID).then(session.reload)}>
            Mark read
          </button>
        )}
      </header>
      <SessionFacts session={s} />
      <SendBox session={s} onSent={session.reload} />

      <h2>Runs and turns</h2>
      {runs.error && <ErrorBox error={runs.error} title="Could not list the session's runs" />}
      {runs.data && runs.data.runs.length === 0 && <Empty>No run in this session yet.</Empty>}
      {runs.data?.runs.map((run) => (
        <SessionRun
          key={run.runId}
          run={run}
          liveEvents={run.runId === liveRunId ? live.events : null}
          tick={run.runId === liveRunId ? lastSeq : 'static'}
        />
      ))}
      <Pager
        base={`/sessions/${s.sessionId}`}
        query={query}
        nextCursor={runs.data?.nextCursor}
        what="runs"
      />

      <h2 id="output">Output {liveRunId && <span class="sub">of run {liveRunId}</span>}</h2>
      {liveRunId ? (
        <Timeline live={live} repliesShown label={`Events of run ${liveRunId}`} />
      ) : (
        <Empty>No run in this session yet.</Empty>
      )}
    </section>
  );
}

function SessionFacts({ session: s }: { session: Session }) {
  return (
    <div class="panel">
      <dl>
        <Field label="Path">{s.sessionPath}</Field>
        <Field label="Profile">{s.backendProfile}</Field>
        <Field label="Tenant / project">
          {s.tenantId} / {s.projectId}
        </Field>
        <Field label="Active run">
          {s.activeRunId ? (
            <Id value={s.activeRunId} what="run id" href={`/runs/${s.activeRunId}`} />
          ) : (
            <span class="muted">none</span>
          )}
        </Field>
        <Field label="Last outcome">
          {s.lastOutcome ? <StateBadge state={s.lastOutcome} /> : <span class="muted">–</span>}
        </Field>
        {s.supervisor && <Field label="Next">{s.supervisor.next}</Field>}
        <Field label="Created">
          <Time at={s.createdAt} />
        </Field>
        <Field label="Updated">
          <Time at={s.updatedAt} />
        </Field>
      </dl>
    </div>
  );
}

/** One run of the session with its turns; the live run's turns follow its events. */
function SessionRun(props: { run: Run; liveEvents: EventEnvelope[] | null; tick: unknown }) {
  const { run } = props;
  const task = taskOf(run);
  const loaded = useRunCommandIds(
    run.runId,
    run.latestCommandId,
    props.liveEvents ? 'live' : run.latestCommandId,
  );
  const ids = props.liveEvents ? commandIdsOf(props.liveEvents, run.latestCommandId) : loaded.ids;
  return (
    <section class="session-run" data-run-id={run.runId} aria-label={`Run ${run.runId}`}>
      <div class="entry-head run-head">
        <Id value={run.runId} what="run id" href={`/runs/${run.runId}`} />
        <RunState run={run} />
        <Duration from={run.createdAt} to={run.terminalAt} running={!TERMINAL_RUN.has(run.state)} />
        <Time at={run.createdAt} />
        {task && (
          <span>
            task <Id value={task.taskId} what="task id" href={`/tasks/${task.taskId}`} />
          </span>
        )}
      </div>
      {loaded.error && <ErrorBox error={loaded.error} />}
      <Turns runId={run.runId} ids={ids} tick={props.tick} empty="No turns in this run." />
    </section>
  );
}

function SendBox({ session: s, onSent }: { session: Session; onSent: () => void }) {
  const [prompt, setPrompt] = useState('');
  const [sending, setSending] = useState(false);
  const [sendError, setSendError] = useState<ApiError | null>(null);
  const [sent, setSent] = useState<string | null>(null);
  const send = async () => {
    if (!prompt.trim()) return;
    setSending(true);
    setSendError(null);
    try {
      const answer = await api.sendPrompt(s.sessionId, prompt.trim());
      setSent(
        answer.decision === 'steer'
          ? 'Sent as guidance into the running turn.'
          : `Started a turn in run ${answer.run?.runId ?? ''}.`,
      );
      setPrompt('');
      onSent();
    } catch (e) {
      setSendError(e instanceof ApiError ? e : new ApiError(0, 'console-error', String(e), null));
    } finally {
      setSending(false);
    }
  };
  return (
    <form
      class="panel send"
      onSubmit={(e) => {
        e.preventDefault();
        void send();
      }}
    >
      <label for="prompt">
        Send a prompt{' '}
        <span class="muted">(steers the running turn, or starts a new one; Ctrl+Enter sends)</span>
      </label>
      <textarea
        id="prompt"
        rows={3}
        value={prompt}
        onInput={(e) => setPrompt(e.currentTarget.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) void send();
        }}
      />
      <div class="actions">
        <button type="submit" class="primary" disabled={sending || !prompt.trim()}>
          {sending ? 'Sending…' : 'Send'}
        </button>
        {sent && (
          <span class="ok-text" role="status">
            {sent}
          </span>
        )}
      </div>
      {sendError && <ErrorBox error={sendError} title="Not sent" />}
    </form>
  );
}
