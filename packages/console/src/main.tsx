// The console's shell: navigation, the API key prompt (shown when the manager answers 401),
// and the route table. Keyboard: g then r/s/q/p jumps between views.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { apiKey, onAuthFailure, type ApiError } from './api.js';
import { navigate, onLinkClick, useLocation } from './router.js';
import { ProfilesView } from './views/profiles.js';
import { QueueView } from './views/queue.js';
import { RunDetailView } from './views/run-detail.js';
import { RunsView } from './views/runs.js';
import { SessionDetailView, SessionsView } from './views/sessions.js';
import './styles.css';

const NAV = [
  { path: '/runs', label: 'Runs', key: 'r' },
  { path: '/sessions', label: 'Sessions', key: 's' },
  { path: '/queue', label: 'Queue', key: 'q' },
  { path: '/profiles', label: 'Profiles', key: 'p' },
];

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
      <h2>{hadKey ? 'The API key was refused' : 'This manager needs an API key'}</h2>
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

function Route({ path, query }: { path: string; query: URLSearchParams }) {
  const [, section, id] = path.split('/').map(decodeURIComponent);
  if (section === 'runs' && id) return <RunDetailView runId={id} />;
  if (section === 'sessions' && id) return <SessionDetailView sessionId={id} />;
  if (section === 'sessions') return <SessionsView query={query} />;
  if (section === 'queue') return <QueueView query={query} />;
  if (section === 'profiles') return <ProfilesView />;
  return <RunsView query={query} />;
}

function App() {
  const { path, query } = useLocation();
  const [authFailure, setAuthFailure] = useState<ApiError | null>(null);
  // A new key remounts the view so every panel loads again with it.
  const [generation, setGeneration] = useState(0);

  useEffect(() => onAuthFailure(setAuthFailure), []);
  useEffect(() => {
    let pending = false;
    const onKey = (e: KeyboardEvent) => {
      const target = e.target as HTMLElement | null;
      if (target?.closest('input, textarea, select') || e.ctrlKey || e.metaKey || e.altKey) return;
      if (pending) {
        pending = false;
        const item = NAV.find((n) => n.key === e.key);
        if (item) navigate(item.path);
      } else if (e.key === 'g') pending = true;
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, []);

  const section = `/${path.split('/')[1] ?? ''}`;
  return (
    <div class="shell" onClick={onLinkClick}>
      <header class="top">
        <a class="brand" href="/runs">
          Agent run service
        </a>
        <nav aria-label="Views">
          {NAV.map((n) => (
            <a
              href={n.path}
              aria-current={
                section === n.path || (n.path === '/runs' && section === '/') ? 'page' : undefined
              }
              title={`g ${n.key}`}
            >
              {n.label}
            </a>
          ))}
        </nav>
        <span class="spacer" />
        {apiKey.get() && (
          <button
            class="link"
            onClick={() => {
              apiKey.clear();
              setGeneration((g) => g + 1);
            }}
          >
            Forget key
          </button>
        )}
      </header>
      <main>
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
      </main>
    </div>
  );
}

const root = document.getElementById('app');
if (root) render(<App />, root);
