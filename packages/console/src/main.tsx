// The console's entry: the API key prompt (shown when the manager answers 401), the route
// table, and the not-found page for any other path.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { apiKey, onAuthFailure, type ApiError } from './api.js';
import { onLinkClick, useLocation } from './router.js';
import { Shell } from './shell.js';
import { applyTheme, storedTheme } from './theme.js';
import { NotFoundView } from './views/not-found.js';
import { ProfilesView } from './views/profiles.js';
import { QueueView } from './views/queue.js';
import { SchedulesView } from './views/schedules.js';
import { RunDetailView } from './views/run-detail.js';
import { RunsView } from './views/runs.js';
import { SessionDetailView } from './views/session-detail.js';
import { SessionsView } from './views/sessions.js';
import { TaskView } from './views/task.js';
import './styles.css';

// Before the first paint: no flash of the wrong theme.
applyTheme(storedTheme());

function KeyPrompt({ failure, onSaved }: { failure: ApiError; onSaved: () => void }) {
  const [value, setValue] = useState('');
  const hadKey = apiKey.get() !== null;
  return (
    <form
      class="key-prompt panel"
      onSubmit={(e) => {
        e.preventDefault();
        if (!value.trim()) return;
        apiKey.set(value.trim());
        setValue('');
        onSaved();
      }}
    >
      <h1>{hadKey ? 'The API key was refused' : 'This manager needs an API key'}</h1>
      <p role="alert" class={hadKey ? 'bad-text' : ''}>
        {hadKey
          ? `The manager answered ${failure.failureKind}: ${failure.message}. Check the key and try again.`
          : 'Enter the key the manager was started with (SVC_API_KEY). It is kept for this browser tab only.'}
      </p>
      <label>
        API key
        <input
          type="password"
          autocomplete="off"
          autoFocus
          value={value}
          onInput={(e) => setValue(e.currentTarget.value)}
        />
      </label>
      <div class="actions">
        <button type="submit" class="primary" disabled={!value.trim()}>
          Use this key
        </button>
      </div>
    </form>
  );
}

function decodePart(part: string): string | null {
  try {
    return decodeURIComponent(part);
  } catch {
    return null;
  }
}

function Route({ path, query }: { path: string; query: URLSearchParams }) {
  const parts = path.split('/').slice(1).map(decodePart);
  // A part that is no valid escape (`/runs/%E0`) names nothing: the not-found page, not a crash.
  if (parts.includes(null)) return <NotFoundView path={path} />;
  const [section = '', id] = parts as string[];
  if (parts.length > 2) return <NotFoundView path={path} />;
  if (section === 'runs' && id) return <RunDetailView runId={id} />;
  if (section === 'sessions' && id) return <SessionDetailView sessionId={id} query={query} />;
  if (section === 'tasks' && id) return <TaskView taskId={id} />;
  if (id) return <NotFoundView path={path} />;
  if (section === '' || section === 'runs' || section === 'index.html')
    return <RunsView query={query} />;
  if (section === 'sessions') return <SessionsView query={query} />;
  if (section === 'queue') return <QueueView query={query} />;
  if (section === 'schedules') return <SchedulesView />;
  if (section === 'profiles') return <ProfilesView />;
  return <NotFoundView path={path} />;
}

function App() {
  const { path, query } = useLocation();
  const [authFailure, setAuthFailure] = useState<ApiError | null>(null);
  // A new key remounts the view so every panel loads again with it.
  const [generation, setGeneration] = useState(0);

  useEffect(() => onAuthFailure(setAuthFailure), []);

  return (
    <Shell
      path={path}
      onClick={onLinkClick}
      onForgetKey={() => {
        apiKey.clear();
        setGeneration((g) => g + 1);
      }}
    >
      {authFailure ? (
        <KeyPrompt
          failure={authFailure}
          onSaved={() => {
            setAuthFailure(null);
            setGeneration((g) => g + 1);
          }}
        />
      ) : (
        <Route key={`${generation}:${path}`} path={path} query={query} />
      )}
    </Shell>
  );
}

const root = document.getElementById('app');
if (root) render(<App />, root);
