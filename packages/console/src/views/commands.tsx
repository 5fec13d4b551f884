// A run's turns (its commands): each card says what was asked, when, how long it took, how it
// ended (with the failure's message) and the reply, rendered once, as sanitized Markdown.
import { useMemo } from 'preact/hooks';
import { api, type Command, type EventEnvelope, type ResultEnvelope } from '../api.js';
import { renderMarkdown } from '../markdown.js';
import { Clock, Duration, Empty, ErrorBox, Id, StateBadge, useLoad } from '../ui.js';
import { TERMINAL_COMMAND } from './outcome.js';

/** The run's command ids, oldest first: as its events name them, plus its latest command. */
export function commandIdsOf(events: EventEnvelope[], latest: string | null | undefined): string[] {
  const ids = new Set<string>();
  for (const e of events) if (e.commandId) ids.add(e.commandId);
  if (latest) ids.add(latest);
  return [...ids];
}

/** A run's command ids from its first page of events, for runs that are not followed live. */
export function useRunCommandIds(runId: string, latest: string | null, reloadKey: unknown) {
  const page = useLoad(() => api.events(runId, 0, undefined, 1000), [runId, reloadKey]);
  const ids = useMemo(() => commandIdsOf(page.data?.events ?? [], latest), [page.data, latest]);
  return { ids, error: page.error, loading: page.loading && !page.data };
}

export function Turns(props: { runId: string; ids: string[]; tick: unknown; empty?: string }) {
  if (props.ids.length === 0)
    return (
      <Empty>
        {props.empty ?? `No turns yet. Send one with POST /api/v1/runs/${props.runId}/commands.`}
      </Empty>
    );
  return (
    <div class="turns">
      {props.ids.map((id) => (
        <CommandCard key={id} runId={props.runId} commandId={id} tick={props.tick} />
      ))}
    </div>
  );
}

function Failure({ command, result }: { command: Command | null; result: ResultEnvelope | null }) {
  const kind = command?.failureKind ?? result?.blocker?.failureKind ?? result?.failureKind;
  const message = command?.message ?? result?.blocker?.message ?? null;
  if (!kind && !message) return null;
  const state = command?.state ?? result?.terminalStatus ?? 'failed';
  return (
    <p class="failure" role="note">
      <strong>
        {state === 'blocked' ? 'Blocked' : state === 'cancelled' ? 'Cancelled' : 'Failed'}
      </strong>
      {kind && (
        <>
          {' '}
          <code>{kind}</code>
        </>
      )}
      {message && <>: {message}</>}
    </p>
  );
}

export function CommandCard(props: { runId: string; commandId: string; tick: unknown }) {
  // An ended command with its result read changes no more: it stops reloading.
  const command = useLoad(
    () => api.getCommand(props.runId, props.commandId),
    [props.commandId, props.tick],
  );
  const c: Command | null = command.data;
  const ended = c !== null && TERMINAL_COMMAND.has(c.state);
  const result = useLoad(
    () => api.commandResult(props.runId, props.commandId),
    [props.commandId, ended ? 'ended' : props.tick],
  );
  const res: ResultEnvelope | null = result.data;
  const waiting = c !== null && !ended;
  const prompt = c && typeof c.payload['prompt'] === 'string' ? c.payload['prompt'] : null;
  return (
    <article
      class="panel command-card"
      id={`turn-${props.commandId}`}
      data-command-id={props.commandId}
      data-state={c?.state}
    >
      <div class="entry-head">
        {c && <strong>{c.type}</strong>} <StateBadge state={c?.state} />
        {c && <Clock at={c.createdAt} />}
        {c && (
          <Duration
            from={c.createdAt}
            to={c.terminalAt}
            running={waiting}
            label="from sent to ended"
          />
        )}
        <span class="spacer" />
        <Id value={props.commandId} what="command id" />
      </div>
      {command.error && <ErrorBox error={command.error} />}
      {prompt !== null && <blockquote class="prompt">{prompt}</blockquote>}
      {res?.reply ? (
        <div
          class="markdown reply"
          // Sanitized by renderMarkdown (marked, then DOMPurify).
          dangerouslySetInnerHTML={{ __html: renderMarkdown(res.reply) }}
        />
      ) : waiting ? (
        <p class="muted waiting">{c?.type === 'turn' ? 'Waiting for the reply…' : 'Waiting…'}</p>
      ) : ended && c?.state === 'completed' && c.type === 'turn' ? (
        <p class="muted">No reply.</p>
      ) : null}
      {ended && <Failure command={c} result={res} />}
      {res && (
        <details>
          <summary>
            Result envelope ({res.toolCallSummary.count} tool calls, {res.eventCount} events)
          </summary>
          <pre class="output">{JSON.stringify(res, null, 2)}</pre>
        </details>
      )}
    </article>
  );
}
