// Light or dark: the system's choice (prefers-color-scheme) unless the reader picked one, which
// this browser remembers (a preference, not a secret: the API key never goes to localStorage).
export type ThemeChoice = 'auto' | 'light' | 'dark';

const KEY = 'svc.theme';
const CHOICES: readonly ThemeChoice[] = ['auto', 'dark', 'light'];

export function storedTheme(): ThemeChoice {
  try {
    const value = localStorage.getItem(KEY);
    return value === 'light' || value === 'dark' ? value : 'auto';
  } catch {
    return 'auto';
  }
}

/** `data-theme` on <html> overrides the media query in styles.css; `auto` removes it. */
export function applyTheme(choice: ThemeChoice): void {
  const root = document.documentElement;
  if (choice === 'auto') delete root.dataset['theme'];
  else root.dataset['theme'] = choice;
  try {
    if (choice === 'auto') localStorage.removeItem(KEY);
    else localStorage.setItem(KEY, choice);
  } catch {
    // storage refused (private mode): the choice lasts for this page
  }
}

export function nextTheme(choice: ThemeChoice): ThemeChoice {
  return CHOICES[(CHOICES.indexOf(choice) + 1) % CHOICES.length] ?? 'auto';
}
