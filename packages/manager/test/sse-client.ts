/** A small Server-Sent Events reader over fetch, as a browser's EventSource parses the wire. */
export interface SseMessage {
  event: string;
  id: string | undefined;
  data: string;
}

export interface SseStream {
  status: number;
  contentType: string;
  messages: SseMessage[];
  comments: string[];
  /** Resolves with the first message (seen or to come) that matches; rejects after 5 s. */
  next(match: (m: SseMessage) => boolean, timeoutMs?: number): Promise<SseMessage>;
  nextComment(timeoutMs?: number): Promise<string>;
  closed: Promise<void>;
  close(): void;
}

export async function openStream(
  url: string,
  headers: Record<string, string> = {},
): Promise<SseStream> {
  const controller = new AbortController();
  const response = await fetch(url, { headers, signal: controller.signal });
  const messages: SseMessage[] = [];
  const comments: string[] = [];
  const waiters = new Set<() => void>();
  const notify = () => waiters.forEach((w) => w());
  let commentsSeen = 0;

  const closed = (async () => {
    if (!response.body || response.status !== 200) return;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of response.body) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const message: SseMessage = { event: 'message', id: undefined, data: '' };
          const data: string[] = [];
          let isMessage = false;
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim());
            else if (line.startsWith('data: ')) {
              data.push(line.slice(6));
              isMessage = true;
            } else if (line.startsWith('id: ')) message.id = line.slice(4);
            else if (line.startsWith('event: ')) message.event = line.slice(7);
          }
          if (isMessage) messages.push({ ...message, data: data.join('\n') });
          notify();
        }
      }
    } catch {
      // closed by the test
    }
    notify();
  })();

  const until = <T>(probe: () => T | undefined, timeoutMs: number, what: string): Promise<T> =>
    new Promise((resolve, reject) => {
      const check = () => {
        const found = probe();
        if (found === undefined) return;
        waiters.delete(check);
        clearTimeout(timer);
        resolve(found);
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(new Error(`no ${what} within ${timeoutMs} ms; got ${JSON.stringify(messages)}`));
      }, timeoutMs);
      waiters.add(check);
      check();
    });

  return {
    status: response.status,
    contentType: response.headers.get('content-type') ?? '',
    messages,
    comments,
    next: (match, timeoutMs = 5000) => until(() => messages.find(match), timeoutMs, 'message'),
    nextComment: (timeoutMs = 5000) =>
      until(
        () => (comments.length > commentsSeen ? comments[commentsSeen++] : undefined),
        timeoutMs,
        'comment',
      ),
    closed,
    close: () => controller.abort(),
  };
}
