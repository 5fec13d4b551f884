// Runs: the filterable list, newest first, refreshed every few seconds so states stay live.
// Each row says what the run was asked, how long it has taken and how its last turn ended.
import { useState } from 'preact/hooks';
import { api, type Run, type RunFilters } from '../api.js';
import { oneLine } from '../format.js';
import { navigate } from '../router.js';
import { Duration, Empty, ErrorBox, Id, ListHead, Pager, Td, Time, useLoad } from '../ui.js';
import { Outcome, RunState, TERMINAL_RUN } from './outcome.js';

const STATES = ['', 'pending', 'claimed', 'running', 'completed', 'failed', 'blocked', 'cancelled'];
const FILTERS = ['tenantId', 'projectId', 'backendProfile', 'sessionId'] as const;
const LABELS: Record<(typeof FILTERS)[number], string> = {
  tenantId: 'Tenant',
  projectId: 'Project',
  backendProfile: 'Profile',
  sessionId: 'Session',
};
const REFRESH_MS = 3000;
const PAGE = 50;

export function RunsView({ query }: { query: URLSearchParams }) {
  const filters: RunFilters = {};
  for (const name of [...FILTERS, 'state', 'cursor', 'activity', 'lastOutcome'] as const) {
    const value = query.get(name);
    if (value) filters[name] = value;
  }
  const limit = Number(query.get('limit')) || PAGE;
  const [draft, setDraft] = useState<RunFilters>(filters);
  const key = query.toString();
  const page = useLoad(() => api.listRuns({ ...filters, limit }), [key], REFRESH_MS);
  const filtered = FILTERS.some((f) => filters[f]) || Boolean(filters.state);

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
              <option key={s} value={s}>
                {s || 'any'}
              </option>
            ))}
          </select>
        </label>
        {FILTERS.map((name) => (
          <label key={name}>
            {LABELS[name]}
            <input
              name={name}
              value={draft[name] ?? ''}
              placeholder="any"
              onInput={(e) => setDraft({ ...draft, [name]: e.currentTarget.value })}
            />
          </label>
        ))}
        <div class="actions">
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
        </div>
      </form>
      {page.error && <ErrorBox error={page.error} title="Could not list runs" />}
      {page.loading && !page.data && <p class="muted">Loading runs…</p>}
      {page.data && page.data.runs.length === 0 && (
        <Empty>
          {filtered
            ? 'No run matches these filters.'
            : 'No runs yet. Create one with POST /api/v1/runs, `sessions send` or the queue.'}
        </Empty>
      )}
      {page.data && page.data.runs.length > 0 && (
        <table class="list runs">
          <ListHead
            columns={['Run', 'State', 'Last outcome', 'Duration', 'Profile', 'Project', 'Created']}
          />
          <tbody>
            {page.data.runs.map((run) => (
              <RunRow key={run.runId} run={run} />
            ))}
          </tbody>
        </table>
      )}
      <Pager base="/runs" query={query} nextCursor={page.data?.nextCursor} what="runs" />
    </section>
  );
}

function RunRow({ run }: { run: Run }) {
  return (
    <tr data-run-id={run.runId}>
      <Td label="Run" class="primary-cell">
        <Id value={run.runId} what="run id" href={`/runs/${run.runId}`} />
        {run.firstPrompt ? (
          <div class="prompt-line" title={run.firstPrompt}>
            {oneLine(run.firstPrompt)}
          </div>
        ) : (
          <div class="sub">no prompt yet</div>
        )}
      </Td>
      <Td label="State">
        <RunState run={run} />
      </Td>
      <Td label="Last outcome">
        <Outcome run={run} />
      </Td>
      <Td label="Duration" class="num">
        <Duration
          from={run.createdAt}
          to={run.terminalAt}
          running={!TERMINAL_RUN.has(run.state)}
          label="from creation to its end"
        />
      </Td>
      <Td label="Profile">{run.backendProfile}</Td>
      <Td label="Project">
        {run.tenantId} <span class="muted">/</span> {run.projectId}
      </Td>
      <Td label="Created">
        <Time at={run.createdAt} />
      </Td>
    </tr>
  );
}
