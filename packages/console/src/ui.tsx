// Small building blocks every view shares: loading data, states, errors, times, ids, paging.
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiError } from './api.js';
import { ago, between, clock, duration } from './format.js';

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
  'turn-active': 'live',
  'waiting-runner': 'wait',
  closed: 'muted',
  requested: 'live',
  pass: 'ok',
  fail: 'bad',
  never: 'muted',
};

export function StateBadge({ state }: { state: string | null | undefined }) {
  const s = state ?? 'unknown';
  return <span class={`badge tone-${STATE_TONE[s] ?? 'muted'}`}>{s}</span>;
}

/** A detail page whose record could not be loaded: a 404 says there is none; a way back. */
export function LoadFailed(props: {
  what: string;
  id: string;
  error: ApiError;
  back: { href: string; label: string };
}) {
  const { what, id, error, back } = props;
  return (
    <section>
      <h1>
        {what[0]!.toUpperCase() + what.slice(1)} {id}
      </h1>
      <ErrorBox
        error={error}
        title={error.status === 404 ? `No such ${what}` : `Could not load this ${what}`}
      />
      <p>
        <a href={back.href}>← {back.label}</a>
      </p>
    </section>
  );
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

/** The current time, again every `everyMs` while shown: for durations still running. */
export function useNow(everyMs = 1000, active = true): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!active) return;
    const timer = setInterval(() => setNow(Date.now()), everyMs);
    return () => clearInterval(timer);
  }, [everyMs, active]);
  return now;
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

/** The clock time of an event (to the second), its ISO instant in the element. */
export function Clock({ at }: { at: string }) {
  return (
    <time class="clock" dateTime={at} title={at}>
      {clock(at)}
    </time>
  );
}

/** How long something took, or has taken so far (ticking while it runs). */
export function Duration(props: {
  from: string | null | undefined;
  to: string | null | undefined;
  /** Still running: the end is now. */
  running?: boolean;
  label?: string;
}) {
  const running = props.running === true && !props.to;
  const now = useNow(1000, running);
  const ms = props.to || running ? between(props.from, props.to, now) : null;
  if (ms === null) return <span class="muted">–</span>;
  return (
    <span class={`duration${running ? ' running' : ''}`} title={props.label}>
      {duration(ms)}
      {running && <span class="sr-only"> so far</span>}
    </span>
  );
}

export function Field({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <>
      <dt>{label}</dt>
      <dd>{children}</dd>
    </>
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

/** A table cell that names its column: narrow screens show each row as a card of labelled cells. */
export function Td(props: { label: string; class?: string; children?: ComponentChildren }) {
  return (
    <td data-label={props.label} class={props.class}>
      {/* One box per cell: on a phone the label and this box are the cell's two columns. */}
      <div class="cell">{props.children}</div>
    </td>
  );
}

/** Links that filter a list (the current one marked); an empty value means no parameter. */
export function StateTabs(props: {
  base: string;
  options: { value: string; label: string }[];
  current: string;
  label: string;
}) {
  return (
    <nav class="tabs" aria-label={props.label}>
      {props.options.map(({ value, label }) => (
        <a
          key={value || 'default'}
          href={value ? `${props.base}?state=${value}` : props.base}
          aria-current={value === props.current ? 'page' : undefined}
        >
          {label}
        </a>
      ))}
    </nav>
  );
}

/** Older / newest links of a cursor-paged list, keeping the other query parameters. */
export function Pager(props: {
  base: string;
  query: URLSearchParams;
  nextCursor: string | null | undefined;
  what: string;
}) {
  const at = (cursor: string | null) => {
    const next = new URLSearchParams(props.query);
    if (cursor) next.set('cursor', cursor);
    else next.delete('cursor');
    const qs = next.toString();
    return qs ? `${props.base}?${qs}` : props.base;
  };
  if (!props.nextCursor && !props.query.get('cursor')) return null;
  return (
    <nav class="pager" aria-label={`Pages of ${props.what}`}>
      {props.query.get('cursor') && <a href={at(null)}>← Newest {props.what}</a>}
      {props.nextCursor && (
        <a href={at(props.nextCursor)} rel="next">
          Older {props.what} →
        </a>
      )}
    </nav>
  );
}

/** Put text on the clipboard; where the Clipboard API is missing (plain http), a selection. */
async function copyText(text: string): Promise<void> {
  if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
  const area = document.createElement('textarea');
  area.value = text;
  area.setAttribute('readonly', '');
  area.style.position = 'fixed';
  area.style.opacity = '0';
  document.body.append(area);
  area.select();
  document.execCommand('copy');
  area.remove();
}

/** A small button that copies a value and says so. */
export function CopyButton({ value, what }: { value: string; what: string }) {
  const [copied, setCopied] = useState(false);
  useEffect(() => {
    if (!copied) return;
    const timer = setTimeout(() => setCopied(false), 1500);
    return () => clearTimeout(timer);
  }, [copied]);
  return (
    <>
      <button
        type="button"
        class="copy"
        aria-label={`Copy ${what} ${value}`}
        title={`Copy ${what}`}
        onClick={(e) => {
          e.preventDefault();
          e.stopPropagation();
          void copyText(value).then(() => setCopied(true));
        }}
      >
        {copied ? (
          '✓'
        ) : (
          <svg viewBox="0 0 16 16" width="12" height="12" aria-hidden="true" focusable="false">
            <rect
              x="5"
              y="1.5"
              width="9"
              height="10"
              rx="1.5"
              fill="none"
              stroke="currentColor"
              stroke-width="1.4"
            />
            <path
              d="M3 4.5H2.8A1.3 1.3 0 0 0 1.5 5.8v7.4a1.3 1.3 0 0 0 1.3 1.3h6.4a1.3 1.3 0 0 0 1.3-1.3V13"
              fill="none"
              stroke="currentColor"
              stroke-width="1.4"
            />
          </svg>
        )}
      </button>
      <span class="sr-only" role="status">
        {copied ? `${what} copied` : ''}
      </span>
    </>
  );
}

/** An id: monospace, linked when it has a page, with its copy button. */
export function Id(props: { value: string; what: string; href?: string | undefined }) {
  return (
    <span class="id">
      {props.href ? (
        <a href={props.href} class="mono">
          {props.value}
        </a>
      ) : (
        <span class="mono">{props.value}</span>
      )}
      <CopyButton value={props.value} what={props.what} />
    </span>
  );
}
