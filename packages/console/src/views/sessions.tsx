// Sessions: the list with unread marks for this console's reader, paged, by state.
import { api } from '../api.js';
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

/** The console reads as one user; unread counts are relative to this reader. */
export const READER_ID = 'console';
const TABS = [
  { value: '', label: 'all' },
  { value: 'running', label: 'running' },
  { value: 'idle', label: 'idle' },
  { value: 'unread', label: 'unread' },
  { value: 'terminal', label: 'terminal' },
];
const PAGE = 50;

export function SessionsView({ query }: { query: URLSearchParams }) {
  const state = query.get('state') ?? '';
  const cursor = query.get('cursor') ?? undefined;
  const limit = Number(query.get('limit')) || PAGE;
  const page = useLoad(
    () =>
      api.listSessions({
        readerId: READER_ID,
        // No tab chosen: every session (the API's own default is running and unread only).
        state: state || 'all',
        ...(cursor && { cursor }),
        limit,
      }),
    [query.toString()],
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
      <StateTabs base="/sessions" options={TABS} current={state} label="Session state" />
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
              <tr
                key={s.sessionId}
                class={s.reader?.unread ? 'unread' : ''}
                data-session-id={s.sessionId}
              >
                <Td label="Session" class="primary-cell">
                  <Id value={s.sessionId} what="session id" href={`/sessions/${s.sessionId}`} />
                  <div class="sub">{s.sessionPath}</div>
                </Td>
                <Td label="State">
                  <StateBadge state={s.executionState} />
                </Td>
                <Td label="Unread">
                  {s.reader?.unread ? (
                    <span class="dot" title="unread output">
                      ● <span class="sr-only">unread</span>
                    </span>
                  ) : (
                    <span class="muted">–</span>
                  )}
                </Td>
                <Td label="Profile">{s.backendProfile}</Td>
                <Td label="Last outcome">
                  {s.lastOutcome ? (
                    <StateBadge state={s.lastOutcome} />
                  ) : (
                    <span class="muted">–</span>
                  )}
                </Td>
                <Td label="Updated">
                  <Time at={s.updatedAt} />
                </Td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Pager base="/sessions" query={query} nextCursor={page.data?.nextCursor} what="sessions" />
    </section>
  );
}
