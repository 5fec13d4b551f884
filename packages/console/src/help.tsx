// `?` opens this: every key the console answers to. A native modal dialog, so focus stays in
// it and Escape closes it.
import { useEffect, useRef } from 'preact/hooks';

export const KEYS: [string, string][] = [
  ['g r', 'Runs'],
  ['g s', 'Sessions'],
  ['g q', 'Queue'],
  ['g p', 'Provider profiles'],
  ['/', 'Jump to a run, session or task id'],
  ['t', 'Switch the colour theme (system, dark, light)'],
  ['?', 'This help'],
  ['Esc', 'Close a dialog, leave a field'],
];

export function KeyHelp({ open, onClose }: { open: boolean; onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const el = dialog.current;
    if (!el) return;
    if (open && !el.open) el.showModal();
    if (!open && el.open) el.close();
  }, [open]);
  return (
    <dialog ref={dialog} class="help" aria-labelledby="help-title" onClose={onClose}>
      <h2 id="help-title">Keyboard</h2>
      <table class="keys">
        <tbody>
          {KEYS.map(([keys, what]) => (
            <tr key={keys}>
              <th scope="row">
                {keys.split(' ').map((k) => (
                  <kbd key={k}>{k}</kbd>
                ))}
              </th>
              <td>{what}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <div class="actions">
        <button class="primary" autoFocus onClick={onClose}>
          Close
        </button>
      </div>
    </dialog>
  );
}
