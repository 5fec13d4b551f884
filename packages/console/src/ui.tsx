// Small building blocks every view shares: loading data, states, errors, confirmations.
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.js';

export interface Loaded<T> {
  data: T | null;
  error: ApiError | null;
  loading: boolean;
  reload: () => void;
}

/** Load once and again every `refreshMs` (when given) while the view is shown. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[], refreshMs?: number): Loaded<T> {
  const [state, setState] = useState<{ data: T | null; error: ApiError | null; loading: boolean }>({
    data: null,
    error: null,
    loading: true,
  });
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((n) => n + 1), []);
  useEffect(() => {
    let live = true;
    const run = () =>
      load().then(
        (data) => live && setState({ data, error: null, loading: false }),
        (error: unknown) =>
          live &&
          setState((s) => ({
            data: s.data,
            error:
              error instanceof ApiError
                ? error
                : new ApiError(0, 'console-error', String(error), null),
            loading: false,
          })),
      );
    void run();
    const timer = refreshMs ? setInterval(() => void run(), refreshMs) : undefined;
    return () => {
      live = false;
      if (timer) clearInterval(timer);
    };
    // The caller names the inputs that make a new load necessary.
  }, [...deps, tick]);
  return { ...state, reload };
}

const STATE_TONE: Record<string, string> = {
  completed: 'ok',
  succeeded: 'ok',
  ok: 'ok',
  running: 'live',
  claimed: 'live',
  starting: 'live',
  dispatched: 'live',
  delivered: 'live',
  confirmed: 'live',
  active: 'live',
  pending: 'wait',
  queued: 'wait',
  accepted: 'wait',
  idle: 'wait',
  failed: 'bad',
  expired: 'bad',
  blocked: 'warn',
  cancelled: 'muted',
  terminal: 'muted',
};

export function StateBadge({ state }: { state: string | null | undefined }) {
  const s = state ?? 'unknown';
  return <span class={`badge tone-${STATE_TONE[s] ?? 'muted'}`}>{s}</span>;
}

export function ErrorBox({ error, title }: { error: ApiError; title?: string }) {
  const hint =
    error.failureKind === 'auth-failed'
      ? 'The API key was refused. Enter the key the manager was started with.'
      : error.failureKind === 'unreachable'
        ? 'Is the manager running? The page retries on its own.'
        : null;
  return (
    <div class="error" role="alert">
      <strong>{title ?? 'Request failed'}</strong> <code>{error.failureKind}</code>: {error.message}
      {hint && <div class="hint">{hint}</div>}
      {error.traceId && <div class="trace">trace {error.traceId}</div>}
    </div>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <div class="empty">{children}</div>;
}

/** Time as the operator reads it: relative when recent, the full instant on hover. */
export function Time({ at }: { at: string | null | undefined }) {
  if (!at) return <span class="muted">–</span>;
  const ms = Date.now() - Date.parse(at);
  const text =
    ms < 0
      ? `in ${ago(-ms)}`
      : ms < 45_000
        ? 'just now'
        : ms < 86_400_000
          ? `${ago(ms)} ago`
          : new Date(at).toLocaleString();
  return (
    <time dateTime={at} title={at}>
      {text}
    </time>
  );
}

export function ago(ms: number): string {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m}m`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}

export function Field({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <>
      <dt>{label}</dt>
      <dd>{children}</dd>
    </>
  );
}

/**
 * A button that asks before it acts: the first press opens a confirmation with an optional
 * text field; the action runs on Confirm, Escape backs out.
 */
export function ConfirmAction(props: {
  label: string;
  question: string;
  danger?: boolean;
  input?: { label: string; required?: boolean; multiline?: boolean };
  disabled?: boolean;
  onConfirm: (text: string) => Promise<unknown>;
}) {
  const [open, setOpen] = useState(false);
  const [text, setText] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const first = useRef<HTMLElement | null>(null);
  useEffect(() => {
    if (open) first.current?.focus();
  }, [open]);
  const confirm = async () => {
    if (props.input?.required && !text.trim()) return;
    setBusy(true);
    setError(null);
    try {
      await props.onConfirm(text.trim());
      setOpen(false);
      setText('');
    } catch (e) {
      setError(e instanceof ApiError ? e : new ApiError(0, 'console-error', String(e), null));
    } finally {
      setBusy(false);
    }
  };
  if (!open)
    return (
      <button
        class={props.danger ? 'danger' : ''}
        disabled={props.disabled}
        onClick={() => setOpen(true)}
      >
        {props.label}
      </button>
    );
  return (
    <div
      class="confirm"
      role="dialog"
      aria-label={props.question}
      onKeyDown={(e) => {
        if (e.key === 'Escape') setOpen(false);
      }}
    >
      <p>{props.question}</p>
      {props.input && (
        <label>
          {props.input.label}
          {props.input.multiline ? (
            <textarea
              ref={(el) => void (first.current = el)}
              value={text}
              rows={3}
              onInput={(e) => setText(e.currentTarget.value)}
            />
          ) : (
            <input
              ref={(el) => void (first.current = el)}
              value={text}
              onInput={(e) => setText(e.currentTarget.value)}
              onKeyDown={(e) => {
                if (e.key === 'Enter') void confirm();
              }}
            />
          )}
        </label>
      )}
      <div class="actions">
        <button
          ref={(el) => {
            if (!props.input) first.current = el;
          }}
          class={props.danger ? 'danger' : 'primary'}
          disabled={busy || (props.input?.required === true && !text.trim())}
          onClick={() => void confirm()}
        >
          {busy ? 'Working…' : `Confirm ${props.label.toLowerCase()}`}
        </button>
        <button onClick={() => setOpen(false)} disabled={busy}>
          Back
        </button>
      </div>
      {error && <ErrorBox error={error} />}
    </div>
  );
}

/** The header row of a list table. */
export function ListHead({ columns }: { columns: string[] }) {
  return (
    <thead>
      <tr>
        {columns.map((c) => (
          <th key={c}>{c}</th>
        ))}
      </tr>
    </thead>
  );
}

/** Links that filter a list by state (`all` first), the current one marked. */
export function StateTabs(props: {
  base: string;
  states: string[];
  current: string;
  label: string;
}) {
  return (
    <nav class="tabs" aria-label={props.label}>
      {['', ...props.states].map((s) => (
        <a
          key={s || 'all'}
          href={s ? `${props.base}?state=${s}` : props.base}
          aria-current={s === props.current ? 'page' : undefined}
        >
          {s || 'all'}
        </a>
      ))}
    </nav>
  );
}
