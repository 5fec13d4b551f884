// Sessions: the list with unread marks for this console's reader, and one session's output
// following live (its active or last run's timeline) with a prompt box to send the next turn.
import { useState } from 'preact/hooks';
import { api, ApiError } from '../api.js';
import { useRunEvents } from '../live.js';
import { Empty, ErrorBox, Field, ListHead, StateBadge, StateTabs, Time, useLoad } from '../ui.js';
import { Timeline } from './timeline.js';

/** The console reads as one user; unread counts are relative to this reader. */
export const READER_ID = 'console';
const STATES = ['idle', 'running', 'terminal', 'unread'];

export function SessionsView({ query }: { query: URLSearchParams }) {
  const state = query.get('state') ?? '';
  const page = useLoad(
    () => api.listSessions({ readerId: READER_ID, ...(state && { state }) }),
    [state],
    3000,
  );
  const unread = page.data?.sessions.filter((s) => s.reader?.unread).length ?? 0;
  return (
    <section>
      <header class="view-head">
        <h1>Sessions</h1>
        {page.data && (
          <span class="muted">
            {page.data.sessions.length} shown · {unread} unread
          </span>
        )}
      </header>
      <StateTabs base="/sessions" states={STATES} current={state} label="Session state" />
      {page.error && <ErrorBox error={page.error} title="Could not list sessions" />}
      {page.loading && !page.data && <p class="muted">Loading sessions…</p>}
      {page.data?.sessions.length === 0 && (
        <Empty>
          No sessions{state ? ` in state ${state}` : ''}. Start one with `sessions send`.
        </Empty>
      )}
      {page.data && page.data.sessions.length > 0 && (
        <table class="list">
          <ListHead
            columns={['Session', 'State', 'Unread', 'Profile', 'Last outcome', 'Updated']}
          />
          <tbody>
            {page.data.sessions.map((s) => (
              <tr key={s.sessionId} class={s.reader?.unread ? 'unread' : ''}>
                <td>
                  <a href={`/sessions/${s.sessionId}`} class="mono">
                    {s.sessionId}
                  </a>
                  <div class="sub">{s.sessionPath}</div>
                </td>
                <td>
                  <StateBadge state={s.executionState} />
                </td>
                <td>
                  {s.reader?.unread ? (
                    <span class="dot" title="unread output">
                      ●
                    </span>
                  ) : (
                    ''
                  )}
                </td>
                <td>{s.backendProfile}</td>
                <td>{s.lastOutcome ?? '–'}</td>
                <td>
                  <Time at={s.updatedAt} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

export function SessionDetailView({ sessionId }: { sessionId: string }) {
  const session = useLoad(() => api.getSession(sessionId, READER_ID), [sessionId], 2000);
  const s = session.data;
  const runId = s ? (s.activeRunId ?? s.lastRunId) : null;
  const live = useRunEvents(runId);
  const [prompt, setPrompt] = useState('');
  const [sending, setSending] = useState(false);
  const [sendError, setSendError] = useState<ApiError | null>(null);
  const [sent, setSent] = useState<string | null>(null);

  if (session.error && !s)
    return (
      <section>
        <h1>Session {sessionId}</h1>
        <ErrorBox error={session.error} title="Could not load this session" />
      </section>
    );
  if (!s) return <p class="muted">Loading session…</p>;

  const send = async () => {
    if (!prompt.trim()) return;
    setSending(true);
    setSendError(null);
    try {
      const answer = await api.sendPrompt(s.sessionId, prompt.trim());
      setSent(
        answer.decision === 'steer'
          ? 'Sent as guidance into the running turn.'
          : `Started run ${answer.run?.runId ?? ''}.`,
      );
      setPrompt('');
      session.reload();
    } catch (e) {
      setSendError(e instanceof ApiError ? e : new ApiError(0, 'console-error', String(e), null));
    } finally {
      setSending(false);
    }
  };

  return (
    <section>
      <header class="view-head">
        <h1>
          Session <span class="mono">{s.sessionId}</span>
        </h1>
        <StateBadge state={s.executionState} />
        {s.reader?.unread && (
          <button onClick={() => void api.markRead(s.sessionId, READER_ID).then(session.reload)}>
            Mark read
          </button>
        )}
      </header>
      <div class="panel">
        <dl>
          <Field label="Path">{s.sessionPath}</Field>
          <Field label="Profile">{s.backendProfile}</Field>
          <Field label="Run">
            {runId ? (
              <a href={`/runs/${runId}`} class="mono">
                {runId}
              </a>
            ) : (
              'none yet'
            )}
            {s.activeRunId ? ' (active)' : ''}
          </Field>
          <Field label="Last outcome">{s.lastOutcome ?? '–'}</Field>
          {s.supervisor && <Field label="Next">{s.supervisor.next}</Field>}
        </dl>
      </div>
      <form
        class="panel send"
        onSubmit={(e) => {
          e.preventDefault();
          void send();
        }}
      >
        <label for="prompt">
          Send a prompt{' '}
          <span class="muted">
            (steers the running turn, or starts a new run; Ctrl+Enter sends)
          </span>
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
          {sent && <span class="ok-text">{sent}</span>}
        </div>
        {sendError && <ErrorBox error={sendError} title="Not sent" />}
      </form>
      <h2>Output</h2>
      {runId ? <Timeline live={live} /> : <Empty>No run in this session yet.</Empty>}
    </section>
  );
}
