// A run's events as they arrive. The Server-Sent Events stream is read with fetch (EventSource
// cannot send the Authorization header); it resumes from the last seq seen. Where the stream
// route is absent the events are polled instead, so the timeline works against any manager.
import { useEffect, useState } from 'preact/hooks';
import { api, authHeaders, failureOf, type ApiError, type EventEnvelope } from './api.js';

export interface LiveEvents {
  events: EventEnvelope[];
  error: ApiError | null;
  /** `stream` while the SSE connection is open, `poll` when falling back, `done` once the
   * run ended and every event arrived, `idle` before. */
  mode: 'idle' | 'stream' | 'poll' | 'done';
}

const POLL_MS = 1000;
const RETRY_MS = 2000;
const RESUME_MS = 100;
/** Events kept in memory per page; older ones stay in the store, reachable through the API. */
const MAX_EVENTS = 5000;

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });

/** Parse complete frames out of an SSE buffer (event name, data); returns the unparsed rest. */
export function parseFrames(
  buffer: string,
  onFrame: (event: string, data: string) => void,
): string {
  const frames = buffer.split(/\r?\n\r?\n/);
  const rest = frames.pop() ?? '';
  for (const frame of frames) {
    const lines = frame.split(/\r?\n/);
    const event =
      lines
        .find((line) => line.startsWith('event:'))
        ?.slice(6)
        .trim() ?? 'message';
    const data = lines
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).replace(/^ /, ''))
      .join('\n');
    if (data) onFrame(event, data);
  }
  return rest;
}

async function stream(
  runId: string,
  afterSeq: () => number,
  push: (events: EventEnvelope[]) => void,
  setMode: (mode: LiveEvents['mode']) => void,
  signal: AbortSignal,
): Promise<'unsupported' | 'ended' | 'finished'> {
  const response = await fetch(`/api/v1/runs/${encodeURIComponent(runId)}/events/stream`, {
    headers: {
      accept: 'text/event-stream',
      'last-event-id': String(afterSeq()),
      ...authHeaders(),
    },
    signal,
  });
  if (response.status === 404 || response.status === 405) {
    const failure = await failureOf(response);
    // A missing run is a real answer; a missing route means an older manager.
    if (failure.message.includes('no route')) return 'unsupported';
    throw failure;
  }
  if (!response.ok) throw await failureOf(response);
  if (!response.body) return 'unsupported';
  setMode('stream');
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let finished = false;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return finished ? 'finished' : 'ended';
    buffer = parseFrames(buffer + value, (event, data) => {
      // `end`: the run is terminal and every event was sent; nothing more will come.
      if (event === 'end') {
        finished = true;
        return;
      }
      try {
        const parsed = JSON.parse(data) as EventEnvelope | { events?: EventEnvelope[] };
        if ('seq' in parsed) push([parsed]);
        else if (Array.isArray(parsed.events)) push(parsed.events);
      } catch {
        // heartbeats and other non-event frames
      }
    });
  }
}

export function useRunEvents(runId: string | null): LiveEvents {
  const [state, setState] = useState<LiveEvents>({ events: [], error: null, mode: 'idle' });

  useEffect(() => {
    setState({ events: [], error: null, mode: 'idle' });
    if (!runId) return;
    const controller = new AbortController();
    const { signal } = controller;
    let lastSeq = 0;
    const push = (batch: EventEnvelope[]) => {
      const fresh = batch.filter((e) => e.seq > lastSeq);
      if (fresh.length === 0) return;
      lastSeq = fresh[fresh.length - 1]?.seq ?? lastSeq;
      setState((s) => ({
        ...s,
        error: null,
        events: [...s.events, ...fresh].slice(-MAX_EVENTS),
      }));
    };
    const setMode = (mode: LiveEvents['mode']) => setState((s) => ({ ...s, mode }));

    const poll = async () => {
      setMode('poll');
      while (!signal.aborted) {
        try {
          const page = await api.events(runId, lastSeq, signal);
          push(page.events);
          if (page.hasMore) continue;
        } catch (error) {
          if (signal.aborted) return;
          setState((s) => ({ ...s, error: error as ApiError }));
        }
        await sleep(POLL_MS, signal);
      }
    };

    const follow = async () => {
      while (!signal.aborted) {
        let wait = RETRY_MS;
        try {
          const outcome = await stream(runId, () => lastSeq, push, setMode, signal);
          if (outcome === 'unsupported') return poll();
          if (outcome === 'finished') return setMode('done');
          // The server ends a stream after its bounded lifetime: resume at once.
          wait = RESUME_MS;
        } catch (error) {
          if (signal.aborted) return;
          setState((s) => ({ ...s, error: error as ApiError, mode: 'idle' }));
        }
        await sleep(wait, signal);
      }
    };
    void follow();
    return () => controller.abort();
  }, [runId]);

  return state;
}
