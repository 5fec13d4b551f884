import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  completed,
  created,
  errorBody,
  failedFrame,
  functionCallFrame,
  messageFrames,
  messageItem,
  newId,
  splitDeltas,
  sseFrame,
  type Usage,
} from './fake-provider-wire.js';

import type { RecordedRequest } from './fake-provider-requests.js';

export { functionCallOutput, inputTexts, userTexts } from './fake-provider-requests.js';
export type { RecordedRequest } from './fake-provider-requests.js';

/**
 * A scripted fake of the model provider (OpenAI Responses API) on loopback, for driving the
 * real coding agent in tests. Each model request (`POST /v1/responses`) consumes the next
 * scripted step and is answered as Server-Sent Events exactly as the agent reads them.
 * Compaction requests (see `requestKind`) are answered from their own setting instead, so a
 * test can make compaction unsupported without scripting around it. Every request is recorded
 * so tests can assert what the agent sent.
 */

export type ProviderStep =
  /** An assistant message; `deltas` streams it as that many text deltas first. */
  | {
      kind: 'text';
      text: string | ((request: RecordedRequest) => string);
      deltas?: number;
      /** Pause between frames (ms), to make streaming observable. */
      frameDelayMs?: number;
      usage?: Partial<Usage>;
    }
  /** An `exec_command` function call; the agent runs it and sends its output next request. */
  | {
      kind: 'tool-call';
      command: string;
      callId?: string;
      yieldTimeMs?: number;
      /** More `exec_command` arguments (e.g. `sandbox_permissions`, `justification`). */
      extraArgs?: Record<string, unknown>;
    }
  /**
   * Hold the stream open after `response.created` for `ms` (default: until `release()` or the
   * client goes away), then answer `text` (default: the default reply).
   */
  | { kind: 'stall'; ms?: number; text?: string }
  /** Answer the HTTP request itself with an error status and a realistic JSON body. */
  | {
      kind: 'http-error';
      status: number;
      message?: string;
      body?: unknown;
      headers?: Record<string, string>;
    }
  /** Start a message, then destroy the socket before `response.completed`. */
  | { kind: 'cut'; partialText?: string }
  /** `response.failed` with an error code (`context_length_exceeded`, `insufficient_quota`…). */
  | { kind: 'failed'; code: string; message?: string }
  /** Frames as given, then the stream ends. */
  | { kind: 'raw'; events: ReadonlyArray<Record<string, unknown> & { type: string }> };

/** How compaction requests are answered (default: HTTP 404, as by a provider without it). */
export type CompactBehaviour =
  { kind: 'http-error'; status: number; message?: string } | { kind: 'reply'; summary?: string };

export interface FakeProviderOptions {
  /** Reply when the script has run out (default "ok"). */
  defaultText?: string;
  /** The step for a request when the script has run out (default: a `defaultText` reply). */
  fallback?: (request: RecordedRequest) => ProviderStep;
  compact?: CompactBehaviour;
  /** Loopback port to listen on (default: any free port). */
  port?: number;
  /** Keep only the newest N requests (default: all), for a provider left running for long. */
  keepRequests?: number;
}

interface Waiter {
  kind: RecordedRequest['kind'];
  count: number;
  resolve: (request: RecordedRequest) => void;
}

export class FakeProvider {
  readonly requests: RecordedRequest[] = [];
  #server: Server;
  #script: ProviderStep[] = [];
  /** Scripts of one API key: a request with that key never takes a step of the shared script. */
  #keyed = new Map<string, ProviderStep[]>();
  #waiters: Waiter[] = [];
  #releases = new Set<() => void>();
  #open = new Set<ServerResponse>();
  #defaultText: string;
  #fallback: ((request: RecordedRequest) => ProviderStep) | undefined;
  #keep: number;
  #seen = 0;
  #compact: CompactBehaviour;
  #port = 0;

  private constructor(options: FakeProviderOptions) {
    this.#defaultText = options.defaultText ?? 'ok';
    this.#fallback = options.fallback;
    this.#keep = options.keepRequests ?? Number.POSITIVE_INFINITY;
    this.#compact = options.compact ?? { kind: 'http-error', status: 404 };
    this.#server = createServer((req, res) => {
      this.#handle(req, res).catch((error: unknown) => {
        if (!res.headersSent) res.writeHead(500).end(String(error));
        else res.destroy();
      });
    });
  }

  static async start(options: FakeProviderOptions = {}): Promise<FakeProvider> {
    const provider = new FakeProvider(options);
    await new Promise<void>((resolve, reject) => {
      provider.#server.once('error', reject);
      provider.#server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
    });
    provider.#port = (provider.#server.address() as AddressInfo).port;
    return provider;
  }

  /** The base URL to configure (`…/v1`): requests arrive at `POST /v1/responses`. */
  get baseUrl(): string {
    return `http://127.0.0.1:${this.#port}/v1`;
  }

  /** Append steps; each answers one `POST /v1/responses`. */
  enqueue(...steps: ProviderStep[]): this {
    this.#script.push(...steps);
    return this;
  }

  /**
   * Append steps for the requests that carry `apiKey` as their bearer token. With two agents
   * asking one provider, which of them asks next is a race (an agent asks again by itself when
   * a long tool call yields): a keyed script gives each its own steps. Once a key has a script,
   * its requests never take the shared script's steps, even when its own has run out.
   */
  enqueueFor(apiKey: string, ...steps: ProviderStep[]): this {
    const script = this.#keyed.get(apiKey) ?? [];
    script.push(...steps);
    this.#keyed.set(apiKey, script);
    return this;
  }

  /** Forget the steps an earlier test left unused, so a test's script starts clean. */
  dropSteps(): this {
    this.#script.length = 0;
    this.#keyed.clear();
    return this;
  }

  get pendingSteps(): number {
    return this.#script.length;
  }

  setCompact(behaviour: CompactBehaviour): this {
    this.#compact = behaviour;
    return this;
  }

  /** End every stall now (each then answers its text). */
  release(): void {
    for (const release of [...this.#releases]) release();
  }

  /** Requests of one kind (default: model requests). */
  requestsOf(kind: RecordedRequest['kind'] = 'responses'): RecordedRequest[] {
    return this.requests.filter((r) => r.kind === kind);
  }

  /** Resolves with the Nth (1-based) request of `kind`, waiting up to `timeoutMs`. */
  waitForRequest(
    n: number,
    options: { kind?: RecordedRequest['kind']; timeoutMs?: number } = {},
  ): Promise<RecordedRequest> {
    const kind = options.kind ?? 'responses';
    const existing = this.requestsOf(kind)[n - 1];
    if (existing) return Promise.resolve(existing);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        reject(
          new Error(
            `fake provider: request ${n} of kind ${kind} did not arrive within ${options.timeoutMs ?? 10_000} ms (got ${this.requestsOf(kind).length})`,
          ),
        );
      }, options.timeoutMs ?? 10_000);
      const waiter: Waiter = {
        kind,
        count: n,
        resolve: (request) => {
          clearTimeout(timer);
          resolve(request);
        },
      };
      this.#waiters.push(waiter);
    });
  }

  async close(): Promise<void> {
    this.release();
    for (const res of this.#open) res.destroy();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #record(req: IncomingMessage, raw: string): RecordedRequest {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers))
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
    const auth = headers['authorization'];
    let body: unknown = raw;
    try {
      body = raw ? JSON.parse(raw) : null;
    } catch {
      // keep the raw text: a test may want to see what was not JSON
    }
    const kind = requestKind(req.method ?? 'GET', path, headers, body);
    this.#seen += 1;
    const record: RecordedRequest = {
      index: this.#seen,
      kind,
      method: req.method ?? 'GET',
      path,
      headers,
      bearer: auth?.toLowerCase().startsWith('bearer ') ? auth.slice(7) : null,
      body,
      receivedAt: Date.now(),
      respondedAt: null,
    };
    this.requests.push(record);
    if (this.requests.length > this.#keep)
      this.requests.splice(0, this.requests.length - this.#keep);
    const count = this.requestsOf(kind).length;
    for (const waiter of this.#waiters.filter((w) => w.kind === kind && w.count === count)) {
      this.#waiters = this.#waiters.filter((w) => w !== waiter);
      waiter.resolve(record);
    }
    return record;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const record = this.#record(req, Buffer.concat(chunks).toString('utf8'));
    res.once('finish', () => (record.respondedAt = Date.now()));
    if (record.kind === 'compact') return this.#answerCompact(record, res);
    if (record.kind === 'other') return json(res, 404, errorBody(404));
    const keyed = record.bearer === null ? undefined : this.#keyed.get(record.bearer);
    const step = (keyed ? keyed.shift() : this.#script.shift()) ??
      this.#fallback?.(record) ?? { kind: 'text', text: this.#defaultText };
    await this.#answer(step, record, res);
  }

  #answerCompact(request: RecordedRequest, res: ServerResponse): void {
    const behaviour = this.#compact;
    if (behaviour.kind === 'http-error')
      return json(res, behaviour.status, errorBody(behaviour.status, behaviour.message));
    const summary = behaviour.summary ?? 'summary of the conversation so far';
    if (request.path.endsWith('/responses/compact'))
      return json(res, 200, { output: [messageItem(newId('msg'), summary)] });
    const responseId = newId('resp');
    const body = request.body as { input?: unknown[] } | null;
    const remote = (body?.input?.at(-1) as Record<string, unknown> | undefined)?.['type'];
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(sseFrame(created(responseId)));
    if (remote === 'compaction_trigger') {
      // Remote compaction v2 expects exactly one opaque `compaction` item back.
      const item = { type: 'compaction', id: newId('cmp'), encrypted_content: summary };
      res.write(sseFrame({ type: 'response.output_item.done', output_index: 0, item }));
    } else {
      for (const frame of messageFrames(summary, [])) res.write(frame);
    }
    res.end(sseFrame(completed(responseId, { inputTokens: 100, outputTokens: 10 })));
  }

  async #answer(step: ProviderStep, request: RecordedRequest, res: ServerResponse): Promise<void> {
    if (step.kind === 'http-error') {
      const body = step.body ?? errorBody(step.status, step.message);
      return json(res, step.status, body, step.headers);
    }
    const responseId = newId('resp');
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    this.#open.add(res);
    res.on('close', () => this.#open.delete(res));
    res.write(sseFrame(created(responseId)));
    const usage = { inputTokens: 100, outputTokens: 10 };
    switch (step.kind) {
      case 'text': {
        const text = typeof step.text === 'function' ? step.text(request) : step.text;
        const frames = messageFrames(text, step.deltas ? splitDeltas(text, step.deltas) : []);
        for (const frame of frames) {
          if (step.frameDelayMs) await sleep(step.frameDelayMs);
          if (res.destroyed) return;
          res.write(frame);
        }
        res.end(sseFrame(completed(responseId, { ...usage, ...step.usage })));
        return;
      }
      case 'tool-call': {
        const args: Record<string, unknown> = { cmd: step.command, ...step.extraArgs };
        if (step.yieldTimeMs !== undefined) args['yield_time_ms'] = step.yieldTimeMs;
        res.write(functionCallFrame('exec_command', args, step.callId ?? newId('call')));
        res.end(sseFrame(completed(responseId, usage)));
        return;
      }
      case 'stall': {
        await this.#stall(res, step.ms);
        if (res.destroyed) return;
        for (const frame of messageFrames(step.text ?? this.#defaultText, [])) res.write(frame);
        res.end(sseFrame(completed(responseId, usage)));
        return;
      }
      case 'cut': {
        for (const frame of messageFrames(step.partialText ?? 'partial', ['partial']).slice(0, 2))
          res.write(frame);
        // Let the bytes leave before the socket is torn down mid-stream.
        await sleep(20);
        res.socket?.destroy();
        res.destroy();
        return;
      }
      case 'failed':
        res.end(
          sseFrame(failedFrame(responseId, step.code, step.message ?? failureMessage(step.code))),
        );
        return;
      case 'raw':
        for (const event of step.events) res.write(sseFrame(event));
        res.end();
        return;
    }
  }

  #stall(res: ServerResponse, ms: number | undefined): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#releases.delete(done);
        res.off('close', done);
        resolve();
      };
      const timer = ms === undefined ? undefined : setTimeout(done, ms);
      this.#releases.add(done);
      res.on('close', done);
    });
  }
}

/**
 * Compaction requests: the legacy unary `POST /v1/responses/compact`, and streamed
 * `/v1/responses` requests the agent marks `request_kind: "compaction"` in its turn metadata
 * header (local summaries, and remote compaction v2 whose input ends with a
 * `compaction_trigger` item).
 */
function requestKind(
  method: string,
  path: string,
  headers: Record<string, string>,
  body: unknown,
): RecordedRequest['kind'] {
  if (method !== 'POST') return 'other';
  if (path.endsWith('/responses/compact')) return 'compact';
  if (!path.endsWith('/responses')) return 'other';
  let metadata: unknown = null;
  try {
    metadata = JSON.parse(headers['x-codex-turn-metadata'] ?? 'null');
  } catch {
    // not JSON: not a compaction marker
  }
  if ((metadata as Record<string, unknown> | null)?.['request_kind'] === 'compaction')
    return 'compact';
  const input = (body as { input?: unknown } | null)?.input;
  const last: unknown = Array.isArray(input) ? input[input.length - 1] : undefined;
  if ((last as Record<string, unknown> | undefined)?.['type'] === 'compaction_trigger')
    return 'compact';
  return 'responses';
}

function failureMessage(code: string): string {
  switch (code) {
    case 'context_length_exceeded':
      return 'Your input exceeds the context window of this model. Please adjust your input and try again.';
    case 'insufficient_quota':
      return 'You exceeded your current quota, please check your plan and billing details.';
    default:
      return `response failed: ${code}`;
  }
}

function json(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
