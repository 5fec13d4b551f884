// A run's events as a readable timeline: assistant text streams into one entry per message,
// a tool call is one entry (command, status, exit code) with its output collapsed under it,
// everything else is one line with its data a click away.
import type { EventEnvelope } from '../api.js';
import type { LiveEvents } from '../live.js';
import { renderMarkdown } from '../markdown.js';
import { Empty, ErrorBox, StateBadge } from '../ui.js';

type Entry =
  | {
      kind: 'assistant';
      key: string;
      seq: number;
      text: string;
      streaming: boolean;
      final: boolean;
    }
  | {
      kind: 'tool';
      key: string;
      seq: number;
      toolName: string;
      command: string | null;
      status: string;
      exitCode: number | null;
      output: string | null;
      outputTruncated: boolean;
    }
  | { kind: 'event'; key: string; event: EventEnvelope };

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' ? v : null);

/** Fold the event list into entries; later events of one message or tool update its entry. */
export function entriesOf(events: EventEnvelope[]): Entry[] {
  const entries: Entry[] = [];
  const byKey = new Map<string, Entry>();
  for (const event of events) {
    const d = event.data;
    if (event.category === 'assistant_message') {
      // Progress names the message `streamItemId`, the completed message `itemId`: one entry.
      const item = str(d['itemId']) ?? str(d['streamItemId']);
      const key = `msg:${item ?? event.seq}`;
      const existing = byKey.get(key);
      const part = num(d['part']);
      const text = str(d['text']) ?? '';
      if (existing?.kind === 'assistant') {
        // Parts of a long message append; progress carries the whole text so far.
        existing.text = part && part > 1 ? existing.text + text : text;
        existing.streaming = d['progress'] === true;
        existing.final = d['final'] === true;
        continue;
      }
      const entry: Entry = {
        kind: 'assistant',
        key,
        seq: event.seq,
        text,
        streaming: d['progress'] === true,
        final: d['final'] === true,
      };
      entries.push(entry);
      byKey.set(key, entry);
      continue;
    }
    if (event.category === 'tool_call' || event.category === 'command_output') {
      const item = str(d['itemId']);
      const key = `tool:${item ?? event.seq}`;
      let entry = byKey.get(key);
      if (entry?.kind !== 'tool') {
        entry = {
          kind: 'tool',
          key,
          seq: event.seq,
          toolName: str(d['toolName']) ?? 'tool',
          command: null,
          status: 'started',
          exitCode: null,
          output: null,
          outputTruncated: false,
        };
        entries.push(entry);
        byKey.set(key, entry);
      }
      if (event.category === 'tool_call') {
        entry.toolName = str(d['toolName']) ?? entry.toolName;
        entry.command = str(d['command']) ?? entry.command;
        entry.status = str(d['status']) ?? entry.status;
      } else {
        entry.output = str(d['text']);
        entry.outputTruncated = d['outputTruncated'] === true;
      }
      entry.exitCode = num(d['exitCode']) ?? entry.exitCode;
      continue;
    }
    entries.push({ kind: 'event', key: `ev:${event.seq}`, event });
  }
  return entries;
}

function summary(event: EventEnvelope): string {
  const d = event.data;
  const parts = [
    str(d['failureKind']),
    str(d['agentStatus']),
    str(d['status']),
    str(d['message']) ?? str(d['reason']),
  ].filter((p): p is string => Boolean(p));
  return parts.join(' · ');
}

export function Timeline({ live }: { live: LiveEvents }) {
  const entries = entriesOf(live.events);
  return (
    <div class="timeline" aria-live="polite">
      {live.error && <ErrorBox error={live.error} title="Event stream interrupted" />}
      {entries.length === 0 && !live.error && (
        <Empty>No events yet. They appear here as the runner reports them.</Empty>
      )}
      {entries.map((entry) => {
        if (entry.kind === 'assistant')
          return (
            <article class="entry assistant" key={entry.key} data-category="assistant_message">
              <div class="entry-head">
                <span class="seq">#{entry.seq}</span> assistant
                {entry.streaming && <span class="streaming">typing…</span>}
                {entry.final && <span class="sub">final reply</span>}
              </div>
              <div
                class="markdown"
                // Sanitized by renderMarkdown (marked, then DOMPurify).
                dangerouslySetInnerHTML={{ __html: renderMarkdown(entry.text) }}
              />
            </article>
          );
        if (entry.kind === 'tool')
          return (
            <article class="entry tool" key={entry.key} data-category="tool_call">
              <div class="entry-head">
                <span class="seq">#{entry.seq}</span> {entry.toolName}{' '}
                <StateBadge state={entry.status} />
                {entry.exitCode !== null && (
                  <span class={`exit ${entry.exitCode === 0 ? 'ok-text' : 'bad-text'}`}>
                    exit {entry.exitCode}
                  </span>
                )}
              </div>
              {entry.command && <pre class="command">$ {entry.command}</pre>}
              {entry.output !== null && (
                <details>
                  <summary>
                    output ({entry.output.length} chars{entry.outputTruncated ? ', truncated' : ''})
                  </summary>
                  <pre class="output">{entry.output}</pre>
                </details>
              )}
            </article>
          );
        const { event } = entry;
        return (
          <details class="entry line" key={entry.key} data-category={event.category}>
            <summary>
              <span class="seq">#{event.seq}</span>{' '}
              <span class={`cat cat-${event.category}`}>{event.category}</span>{' '}
              <span class="name">{event.name ?? ''}</span>{' '}
              <span class="muted">{summary(event)}</span>
            </summary>
            <pre class="output">{JSON.stringify(event.data, null, 2)}</pre>
          </details>
        );
      })}
      <div class="stream-mode muted">
        {live.mode === 'stream'
          ? '● live (server-sent events)'
          : live.mode === 'poll'
            ? '● live (polling)'
            : live.mode === 'done'
              ? '■ run ended: every event shown'
              : '○ connecting…'}
      </div>
    </div>
  );
}
