// A button that asks before it acts: operator actions (cancel, interrupt, steer, dispatch) never
// fire on one stray click.
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.js';
import { ErrorBox } from './ui.js';

/**
 * A button that asks before it acts: the first press opens a confirmation with an optional
 * text field; the action runs on Confirm, Escape backs out.
 */
export function ConfirmAction(props: {
  label: string;
  /** Why the action cannot act now (shown beside a disabled button). */
  why?: string | undefined;
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
  // The moment passed (the turn ended meanwhile): the question is withdrawn.
  useEffect(() => {
    if (props.disabled && !busy) setOpen(false);
  }, [props.disabled]);
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
        title={props.disabled ? props.why : undefined}
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
