// A run's events as a readable timeline: assistant text streams into one entry per message,
// a tool call is one entry (command, status, exit code, how long it took) with its output
// collapsed under it, everything else is one line with its data a click away. Every entry says
// when it happened. The pane follows new output unless the reader scrolled up.
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import type { EventEnvelope } from '../api.js';
import type { LiveEvents } from '../live.js';
import { renderMarkdown } from '../markdown.js';
import { Clock, Duration, Empty, ErrorBox, StateBadge } from '../ui.js';

type Entry =
  | {
      kind: 'assistant';
      key: string;
      seq: number;
      at: string;
      commandId: string | null;
      text: string;
      streaming: boolean;
      final: boolean;
    }
  | {
      kind: 'tool';
      key: string;
      seq: number;
      at: string;
      endedAt: string | null;
      commandId: string | null;
      toolName: string;
      command: string | null;
      status: string;
      exitCode: number | null;
      output: string | null;
      outputTruncated: boolean;
    }
  | { kind: 'event'; key: string; at: string; commandId: string | null; event: EventEnvelope };

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const num = (v: unknown): number | null => (typeof v === 'number' ? v : null);
/** A terminal event that reports one of these reads as a failure, not in the success colour. */
const BAD_STATUS = new Set(['failed', 'blocked', 'expired']);
const ENDED_TOOL = new Set(['completed', 'failed', 'declined', 'cancelled', 'error']);

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
        at: event.observedAt,
        commandId: event.commandId,
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
          at: event.observedAt,
          endedAt: null,
          commandId: event.commandId,
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
        if (ENDED_TOOL.has(entry.status)) entry.endedAt = event.observedAt;
      } else {
        entry.output = str(d['text']);
        entry.outputTruncated = d['outputTruncated'] === true;
      }
      entry.exitCode = num(d['exitCode']) ?? entry.exitCode;
      if (entry.exitCode !== null && !entry.endedAt) entry.endedAt = event.observedAt;
      continue;
    }
    entries.push({
      kind: 'event',
      key: `ev:${event.seq}`,
      at: event.observedAt,
      commandId: event.commandId,
      event,
    });
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

function EntryView(props: { entry: Entry; repliesShown: boolean; ended: boolean }) {
  const { entry, repliesShown } = props;
  if (entry.kind === 'assistant')
    return (
      <article class="entry assistant" data-category="assistant_message">
        <div class="entry-head">
          <Clock at={entry.at} /> assistant
          {entry.streaming && <span class="streaming">typing…</span>}
          {entry.final && <span class="sub">final reply</span>}
        </div>
        {entry.final && repliesShown && entry.commandId ? (
          // The reply is shown once, with its turn; the timeline points there.
          <p class="sub reply-ref">
            Shown with <a href={`#turn-${entry.commandId}`}>its turn</a> above.
          </p>
        ) : (
          <div
            class="markdown"
            // Sanitized by renderMarkdown (marked, then DOMPurify).
            dangerouslySetInnerHTML={{ __html: renderMarkdown(entry.text) }}
          />
        )}
      </article>
    );
  if (entry.kind === 'tool')
    return (
      <article class="entry tool" data-category="tool_call">
        <div class="entry-head">
          <Clock at={entry.at} /> {entry.toolName} <StateBadge state={entry.status} />
          {entry.exitCode !== null && (
            <span class={`exit ${entry.exitCode === 0 ? 'ok-text' : 'bad-text'}`}>
              exit {entry.exitCode}
            </span>
          )}
          <Duration
            from={entry.at}
            to={entry.endedAt}
            running={!props.ended}
            label="how long the tool ran"
          />
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
    <details class="entry line" data-category={event.category}>
      <summary>
        <Clock at={event.observedAt} /> <span class="seq">#{event.seq}</span>{' '}
        <span
          class={`cat cat-${event.category}${BAD_STATUS.has(String(event.data['status'])) ? ' bad-text' : ''}`}
        >
          {event.category}
        </span>{' '}
        <span class="name">{event.name ?? ''}</span> <span class="muted">{summary(event)}</span>
      </summary>
      <pre class="output">{JSON.stringify(event.data, null, 2)}</pre>
    </details>
  );
}

/** Within this many pixels of the end, the reader is "at the end" and the pane follows. */
const FOLLOW_SLACK = 48;

export function Timeline(props: {
  live: LiveEvents;
  /** The turns' cards above show each final reply: the timeline points to them instead. */
  repliesShown?: boolean;
  label?: string;
}) {
  const { live } = props;
  const entries = entriesOf(live.events);
  const pane = useRef<HTMLDivElement>(null);
  const following = useRef(true);
  const lastTop = useRef(0);
  const [behind, setBehind] = useState(false);

  // After each render with new events: keep the end in view, unless the reader scrolled up.
  useLayoutEffect(() => {
    const el = pane.current;
    if (!el) return;
    if (following.current) el.scrollTop = el.scrollHeight;
    else setBehind(true);
  }, [live.events.length]);

  // Anything else that changes the pane while the reader is at the end (an entry that grows or
  // re-renders, the turn’s end) keeps the end in view too.
  useEffect(() => {
    const el = pane.current;
    if (!el) return;
    const observer = new MutationObserver(() => {
      if (following.current) el.scrollTop = el.scrollHeight;
    });
    observer.observe(el, { childList: true, subtree: true, characterData: true });
    return () => observer.disconnect();
  }, []);

  // Only the reader moving up leaves the end; a scroll the layout makes (content that shrinks,
  // an anchor kept in place) does not.
  const onScroll = () => {
    const el = pane.current;
    if (!el) return;
    if (el.scrollHeight - el.scrollTop - el.clientHeight <= FOLLOW_SLACK) {
      following.current = true;
      setBehind(false);
    } else if (el.scrollTop < lastTop.current) following.current = false;
    lastTop.current = el.scrollTop;
  };

  let lastCommand: string | null = null;
  return (
    <div class="timeline-wrap">
      {live.error && <ErrorBox error={live.error} title="Event stream interrupted" />}
      <div
        class="timeline"
        ref={pane}
        role="log"
        aria-label={props.label ?? 'Events'}
        tabIndex={0}
        onScroll={onScroll}
      >
        {entries.length === 0 && !live.error && (
          <Empty>No events yet. They appear here as the runner reports them.</Empty>
        )}
        {entries.map((entry) => {
          const turnChanged = entry.commandId !== null && entry.commandId !== lastCommand;
          if (entry.commandId !== null) lastCommand = entry.commandId;
          return (
            <div key={entry.key} class="entry-wrap">
              {turnChanged && (
                <div class="turn-mark">
                  turn <span class="mono">{entry.commandId}</span>
                </div>
              )}
              <EntryView
                entry={entry}
                repliesShown={props.repliesShown === true}
                ended={live.mode === 'done'}
              />
            </div>
          );
        })}
      </div>
      <div class="timeline-foot">
        <span class="stream-mode muted">
          {live.mode === 'stream'
            ? '● live (server-sent events)'
            : live.mode === 'poll'
              ? '● live (polling)'
              : live.mode === 'done'
                ? '■ run ended: every event shown'
                : '○ connecting…'}
        </span>
        {behind && (
          <button
            type="button"
            class="jump-latest"
            onClick={() => {
              const el = pane.current;
              if (el) el.scrollTop = el.scrollHeight;
              following.current = true;
              setBehind(false);
            }}
          >
            ↓ New output
          </button>
        )}
      </div>
    </div>
  );
}
