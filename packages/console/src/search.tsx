// The jump box: any run, session or task id goes straight to its page. An id with a known
// prefix is opened at once (the page says when it does not exist); any other id (tasks may
// carry their own) is looked up as each kind in turn.
import { useState } from 'preact/hooks';
import { ApiError, api } from './api.js';
import { navigate } from './router.js';

const ID = /^[a-z][a-z0-9]{0,15}-[a-z0-9-]{4,80}$/;
const PAGES: Record<string, string> = { run: '/runs/', ses: '/sessions/', tsk: '/tasks/' };

const exists = (probe: Promise<unknown>) =>
  probe.then(
    () => true,
    (error: unknown) => {
      if (error instanceof ApiError && error.status === 404) return false;
      throw error;
    },
  );

export async function pageOf(raw: string): Promise<string | { problem: string }> {
  const id = raw.trim().toLowerCase();
  if (!ID.test(id))
    return { problem: `"${raw.trim()}" is not an id (ids look like run-…, ses-… or tsk-…)` };
  const prefix = id.slice(0, id.indexOf('-'));
  const page = PAGES[prefix];
  if (page) return `${page}${id}`;
  if (prefix === 'cmd') return { problem: 'a command is shown on its run’s page: jump to the run' };
  const [run, session, task] = await Promise.all([
    exists(api.getRun(id)),
    exists(api.getSession(id, 'console')),
    exists(api.getTask(id)),
  ]);
  if (run) return `/runs/${id}`;
  if (session) return `/sessions/${id}`;
  if (task) return `/tasks/${id}`;
  return { problem: `no run, session or task has the id ${id}` };
}

export function SearchBox() {
  const [value, setValue] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const go = async () => {
    if (!value.trim()) return;
    setBusy(true);
    setProblem(null);
    try {
      const target = await pageOf(value);
      if (typeof target === 'string') {
        setValue('');
        navigate(target);
      } else setProblem(target.problem);
    } catch (error) {
      setProblem(error instanceof Error ? error.message : String(error));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form
      class="search"
      role="search"
      onSubmit={(e) => {
        e.preventDefault();
        void go();
      }}
    >
      <input
        id="jump"
        type="search"
        aria-label="Jump to a run, session or task id"
        placeholder="Jump to id…  ( / )"
        autocomplete="off"
        spellcheck={false}
        value={value}
        disabled={busy}
        onInput={(e) => {
          setValue(e.currentTarget.value);
          setProblem(null);
        }}
        onKeyDown={(e) => {
          if (e.key === 'Escape') {
            setValue('');
            setProblem(null);
            e.currentTarget.blur();
          }
        }}
      />
      {problem && (
        <p class="search-problem" role="alert">
          {problem}
        </p>
      )}
    </form>
  );
}
