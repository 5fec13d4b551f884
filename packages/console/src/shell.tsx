// The frame around every view: brand, navigation, the jump box, the theme switch, the key help,
// and the keys themselves (g then r/s/q/p, / for the jump box, t for the theme, ? for help).
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { apiKey } from './api.js';
import { KeyHelp } from './help.js';
import { navigate } from './router.js';
import { SearchBox } from './search.js';
import { applyTheme, nextTheme, storedTheme, type ThemeChoice } from './theme.js';

export const NAV = [
  { path: '/runs', label: 'Runs', key: 'r' },
  { path: '/sessions', label: 'Sessions', key: 's' },
  { path: '/queue', label: 'Queue', key: 'q' },
  { path: '/profiles', label: 'Profiles', key: 'p' },
];

const THEME_LABEL: Record<ThemeChoice, string> = {
  auto: '◐ System',
  dark: '☾ Dark',
  light: '☀ Light',
};

/** Which view a path belongs to (a task page and the schedules are part of the queue). */
function sectionOf(path: string): string {
  const first = `/${path.split('/')[1] ?? ''}`;
  return first === '/' ? '/runs' : first === '/tasks' || first === '/schedules' ? '/queue' : first;
}

function useKeys(actions: { help: () => void; theme: () => void }) {
  useEffect(() => {
    let pending = false;
    const onKey = (e: KeyboardEvent) => {
      const target = e.target as HTMLElement | null;
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      if (target?.closest('input, textarea, select, dialog[open]')) return;
      if (pending) {
        pending = false;
        const item = NAV.find((n) => n.key === e.key);
        if (item) navigate(item.path);
        return;
      }
      if (e.key === 'g') pending = true;
      else if (e.key === '?') actions.help();
      else if (e.key === 't') actions.theme();
      else if (e.key === '/') {
        e.preventDefault();
        document.getElementById('jump')?.focus();
      }
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, []);
}

export function Shell(props: {
  path: string;
  onForgetKey: () => void;
  onClick: (event: MouseEvent) => void;
  children: ComponentChildren;
}) {
  const [theme, setTheme] = useState<ThemeChoice>(storedTheme());
  const [help, setHelp] = useState(false);
  const switchTheme = () =>
    setTheme((current) => {
      const next = nextTheme(current);
      applyTheme(next);
      return next;
    });
  useKeys({ help: () => setHelp(true), theme: switchTheme });
  const section = sectionOf(props.path);
  return (
    <div class="shell" onClick={props.onClick}>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href="/runs">
          Agent run service
        </a>
        <nav aria-label="Views">
          {NAV.map((n) => (
            <a
              key={n.path}
              href={n.path}
              aria-current={section === n.path ? 'page' : undefined}
              title={`g ${n.key}`}
            >
              {n.label}
            </a>
          ))}
        </nav>
        <SearchBox />
        <div class="top-actions">
          <button
            type="button"
            class="link"
            aria-label={`Colour theme: ${theme === 'auto' ? 'as the system' : theme}. Switch`}
            title="Colour theme (t)"
            onClick={switchTheme}
          >
            {THEME_LABEL[theme]}
          </button>
          <button
            type="button"
            class="link"
            aria-label="Keyboard help"
            title="Keyboard help (?)"
            onClick={() => setHelp(true)}
          >
            ?
          </button>
          {apiKey.get() && (
            <button type="button" class="link" onClick={props.onForgetKey}>
              Forget key
            </button>
          )}
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        {props.children}
      </main>
      <KeyHelp open={help} onClose={() => setHelp(false)} />
    </div>
  );
}
