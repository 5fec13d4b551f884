// Runs: the filterable list, newest first, refreshed every few seconds so states stay live.
import { useState } from 'preact/hooks';
import { api, type RunFilters } from '../api.js';
import { navigate } from '../router.js';
import { Empty, ErrorBox, ListHead, StateBadge, Time, useLoad } from '../ui.js';

const STATES = ['', 'pending', 'claimed', 'running', 'completed', 'failed', 'blocked', 'cancelled'];
const FILTERS = ['tenantId', 'projectId', 'backendProfile', 'sessionId'] as const;
const LABELS: Record<(typeof FILTERS)[number], string> = {
  tenantId: 'Tenant',
  projectId: 'Project',
  backendProfile: 'Profile',
  sessionId: 'Session',
};
const REFRESH_MS = 3000;

export function RunsView({ query }: { query: URLSearchParams }) {
  const filters: RunFilters = {};
  for (const name of [...FILTERS, 'state', 'cursor'] as const) {
    const value = query.get(name);
    if (value) filters[name] = value;
  }
  const [draft, setDraft] = useState<RunFilters>(filters);
  const key = query.toString();
  const page = useLoad(() => api.listRuns({ ...filters, limit: 50 }), [key], REFRESH_MS);

  const apply = (next: RunFilters) => {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(next))
      if (value && name !== 'cursor') params.set(name, String(value));
    navigate(`/runs${params.size ? `?${params.toString()}` : ''}`);
  };

  return (
    <section>
      <header class="view-head">
        <h1>Runs</h1>
        <span class="muted">newest first · refreshes every {REFRESH_MS / 1000}s</span>
      </header>
      <form
        class="filters"
        aria-label="Filter runs"
        onSubmit={(e) => {
          e.preventDefault();
          apply(draft);
        }}
      >
        <label>
          State
          <select
            value={draft.state ?? ''}
            onChange={(e) => {
              const next = { ...draft, state: e.currentTarget.value };
              setDraft(next);
              apply(next);
            }}
          >
            {STATES.map((s) => (
              <option value={s}>{s || 'any'}</option>
            ))}
          </select>
        </label>
        {FILTERS.map((name) => (
          <label>
            {LABELS[name]}
            <input
              name={name}
              value={draft[name] ?? ''}
              placeholder="any"
              onInput={(e) => setDraft({ ...draft, [name]: e.currentTarget.value })}
            />
          </label>
        ))}
        <button type="submit" class="primary">
          Filter
        </button>
        {key && (
          <button
            type="button"
            onClick={() => {
              setDraft({});
              apply({});
            }}
          >
            Clear
          </button>
        )}
      </form>
      {page.error && <ErrorBox error={page.error} title="Could not list runs" />}
      {page.loading && !page.data && <p class="muted">Loading runs…</p>}
      {page.data && page.data.runs.length === 0 && (
        <Empty>
          {key
            ? 'No run matches these filters.'
            : 'No runs yet. Create one with POST /api/v1/runs, `sessions send` or the queue.'}
        </Empty>
      )}
      {page.data && page.data.runs.length > 0 && (
        <table class="list">
          <ListHead
            columns={[
              'Run',
              'State',
              'Tenant / project',
              'Profile',
              'Events',
              'Created',
              'Updated',
            ]}
          />
          <tbody>
            {page.data.runs.map((run) => (
              <tr key={run.runId} data-run-id={run.runId}>
                <td>
                  <a href={`/runs/${run.runId}`} class="mono">
                    {run.runId}
                  </a>
                  {run.failureKind && run.failureKind !== run.state && (
                    <div class="sub bad-text">{run.failureKind}</div>
                  )}
                </td>
                <td>
                  <StateBadge state={run.state} />
                  {run.cancelRequested && run.state !== 'cancelled' && (
                    <span class="sub"> cancelling</span>
                  )}
                </td>
                <td>
                  {run.tenantId} <span class="muted">/</span> {run.projectId}
                </td>
                <td>{run.backendProfile}</td>
                <td class="num">{run.lastSeq}</td>
                <td>
                  <Time at={run.createdAt} />
                </td>
                <td>
                  <Time at={run.updatedAt} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {page.data?.nextCursor && (
        <p>
          <a href={`/runs?${withCursor(query, page.data.nextCursor)}`}>Older runs →</a>
        </p>
      )}
      {filters.cursor && (
        <p>
          <a href={`/runs?${withCursor(query, null)}`}>← Newest runs</a>
        </p>
      )}
    </section>
  );
}

function withCursor(query: URLSearchParams, cursor: string | null): string {
  const next = new URLSearchParams(query);
  if (cursor) next.set('cursor', cursor);
  else next.delete('cursor');
  return next.toString();
}
