import type { ChildProcessByStdio } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { toError } from '@svc/contracts';
import { ByteRing } from './bounded.js';
import { AgentError } from './errors.js';

/**
 * Newline-framed JSON-RPC over a child's stdio, as `codex app-server` speaks it: one JSON
 * object per line, replies without a `"jsonrpc"` field (both forms accepted), and requests
 * flowing both ways (the server asks for approvals). Once the child is gone every pending
 * request is rejected and new sends are refused, so no caller waits forever.
 */

export type JsonRpcId = number | string;

export interface JsonRpcNotification {
  method: string;
  params: unknown;
}

export interface JsonRpcServerRequest {
  id: JsonRpcId;
  method: string;
  params: unknown;
}

export interface JsonRpcOptions {
  /** A line longer than this kills the child (default 32 MiB: a turn summary can be large). */
  maxLineBytes?: number;
  /** Default per-request timeout (default 60 s). */
  requestTimeoutMs?: number;
  /** Bytes of stderr kept for diagnostics (default 64 KiB). */
  stderrBytes?: number;
  /** Called when the protocol breaks (oversized line); default SIGKILL of the child. */
  onFatal?: (error: AgentError) => void;
  /** A listener threw: reported here rather than breaking the read loop. */
  onListenerError?: (error: Error) => void;
}

export type AgentChild = ChildProcessByStdio<Writable, Readable, Readable>;

interface Pending {
  method: string;
  resolve: (value: unknown) => void;
  reject: (error: AgentError) => void;
  timer: NodeJS.Timeout;
}

type Listener<T> = (value: T) => void;

export class JsonRpcClient {
  readonly stderr: ByteRing;
  #child: AgentChild;
  #nextId = 1;
  #pending = new Map<JsonRpcId, Pending>();
  #notificationListeners = new Set<Listener<JsonRpcNotification>>();
  #requestListeners = new Set<Listener<JsonRpcServerRequest>>();
  #closeListeners = new Set<Listener<AgentError>>();
  #closed: AgentError | null = null;
  #chunks: Buffer[] = [];
  #buffered = 0;
  #maxLineBytes: number;
  #timeoutMs: number;
  #options: JsonRpcOptions;
  /** Lines that were not JSON objects (skipped, counted for diagnostics). */
  unparseableLines = 0;

  constructor(child: AgentChild, options: JsonRpcOptions = {}) {
    this.#child = child;
    this.#options = options;
    this.#maxLineBytes = options.maxLineBytes ?? 32 * 1024 * 1024;
    this.#timeoutMs = options.requestTimeoutMs ?? 60_000;
    this.stderr = new ByteRing(options.stderrBytes ?? 64 * 1024);
    child.stdout.on('data', (chunk: Buffer) => this.#onData(chunk));
    child.stderr.on('data', (chunk: Buffer) => this.stderr.push(chunk));
    // A write after the child died raises EPIPE here; the exit handler reports it.
    child.stdin.on('error', () => undefined);
    child.on('exit', (code, signal) => {
      const reason = new AgentError(
        'agent-exited',
        `agent exited (code ${code ?? 'none'}, signal ${signal ?? 'none'})`,
      );
      // Lines the agent wrote just before exiting may still be in the pipe: read them first
      // (bounded wait: a grandchild holding the pipe open must not delay the close).
      if (child.stdout.readableEnded) return this.close(reason);
      const timer = setTimeout(() => this.close(reason), 200);
      child.stdout.once('end', () => {
        clearTimeout(timer);
        this.close(reason);
      });
    });
    child.on('error', (error) =>
      this.close(
        new AgentError('spawn-failed', `agent process error: ${error.message}`, { cause: error }),
      ),
    );
  }

  get closed(): AgentError | null {
    return this.#closed;
  }

  /**
   * Stop reading the child's output (true) or read on (false). While stopped, its pipe fills
   * and the child waits on its writes: backpressure from a consumer that cannot keep up.
   */
  pauseReading(paused: boolean): void {
    if (paused) this.#child.stdout.pause();
    else this.#child.stdout.resume();
  }

  get pendingCount(): number {
    return this.#pending.size;
  }

  request(method: string, params: unknown, options: { timeoutMs?: number } = {}): Promise<unknown> {
    if (this.#closed) return Promise.reject(this.#refusal(method));
    const id = this.#nextId++;
    const timeoutMs = options.timeoutMs ?? this.#timeoutMs;
    return new Promise<unknown>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new AgentError('request-timeout', `${method}: no reply within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#pending.set(id, { method, resolve, reject, timer });
      this.#write({ id, method, params });
    });
  }

  notify(method: string, params?: unknown): void {
    if (this.#closed) throw this.#refusal(method);
    this.#write(params === undefined ? { method } : { method, params });
  }

  /** Answer a server-to-client request. Ignored once closed (nobody is listening). */
  respond(id: JsonRpcId, result: unknown): void {
    if (!this.#closed) this.#write({ id, result });
  }

  respondError(id: JsonRpcId, code: number, message: string): void {
    if (!this.#closed) this.#write({ id, error: { code, message } });
  }

  onNotification(listener: Listener<JsonRpcNotification>): () => void {
    this.#notificationListeners.add(listener);
    return () => this.#notificationListeners.delete(listener);
  }

  onServerRequest(listener: Listener<JsonRpcServerRequest>): () => void {
    this.#requestListeners.add(listener);
    return () => this.#requestListeners.delete(listener);
  }

  onClose(listener: Listener<AgentError>): () => void {
    if (this.#closed) {
      listener(this.#closed);
      return () => undefined;
    }
    this.#closeListeners.add(listener);
    return () => this.#closeListeners.delete(listener);
  }

  /** Reject everything pending and refuse new sends; the first reason wins. */
  close(reason: AgentError): void {
    if (this.#closed) return;
    this.#closed = reason;
    for (const [id, pending] of this.#pending) {
      clearTimeout(pending.timer);
      this.#pending.delete(id);
      pending.reject(
        new AgentError(reason.kind, `${pending.method}: ${reason.message}`, { cause: reason }),
      );
    }
    for (const listener of this.#closeListeners) this.#call(listener, reason);
    this.#closeListeners.clear();
  }

  #refusal(method: string): AgentError {
    const reason = this.#closed ?? new AgentError('agent-exited', 'closed');
    return new AgentError(reason.kind, `${method} refused: ${reason.message}`, { cause: reason });
  }

  #write(message: Record<string, unknown>): void {
    this.#child.stdin.write(`${JSON.stringify(message)}\n`);
  }

  #onData(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(0x0a, start);
      if (newline < 0) break;
      const piece = chunk.subarray(start, newline);
      const line = this.#chunks.length > 0 ? Buffer.concat([...this.#chunks, piece]) : piece;
      this.#chunks = [];
      this.#buffered = 0;
      start = newline + 1;
      if (line.length > this.#maxLineBytes) return this.#overflow(line.length);
      if (line.length > 0) this.#onLine(line.toString('utf8'));
      if (this.#closed) return;
    }
    if (start < chunk.length) {
      this.#chunks.push(chunk.subarray(start));
      this.#buffered += chunk.length - start;
      if (this.#buffered > this.#maxLineBytes) this.#overflow(this.#buffered);
    }
  }

  #overflow(bytes: number): void {
    this.#chunks = [];
    this.#buffered = 0;
    const error = new AgentError(
      'protocol-error',
      `agent output line exceeds ${this.#maxLineBytes} bytes (${bytes} buffered); agent killed`,
    );
    this.close(error);
    this.#child.stdout.removeAllListeners('data');
    if (this.#options.onFatal) this.#options.onFatal(error);
    else this.#child.kill('SIGKILL');
  }

  #onLine(line: string): void {
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      this.unparseableLines++;
      return;
    }
    if (message === null || typeof message !== 'object' || Array.isArray(message)) {
      this.unparseableLines++;
      return;
    }
    const record = message as Record<string, unknown>;
    const id = record['id'];
    const method = record['method'];
    const hasId = typeof id === 'number' || typeof id === 'string';
    if (typeof method === 'string') {
      if (hasId) {
        const request = { id, method, params: record['params'] };
        for (const listener of this.#requestListeners) this.#call(listener, request);
        // Nobody to answer: refuse rather than leave the agent blocked on it.
        if (this.#requestListeners.size === 0)
          this.respondError(id, -32601, `${method} not supported`);
      } else {
        const notification = { method, params: record['params'] };
        for (const listener of this.#notificationListeners) this.#call(listener, notification);
      }
      return;
    }
    if (!hasId) {
      this.unparseableLines++;
      return;
    }
    const pending = this.#pending.get(id);
    if (!pending) return; // timed out earlier; the late reply has nobody to go to
    this.#pending.delete(id);
    clearTimeout(pending.timer);
    const error = record['error'];
    if (error !== undefined && error !== null) {
      const e = error as Record<string, unknown>;
      const code = typeof e['code'] === 'number' ? e['code'] : undefined;
      const text = typeof e['message'] === 'string' ? e['message'] : JSON.stringify(error);
      pending.reject(
        new AgentError('rpc-error', text, code === undefined ? {} : { rpcCode: code }),
      );
    } else {
      pending.resolve(record['result']);
    }
  }

  #call<T>(listener: Listener<T>, value: T): void {
    try {
      listener(value);
    } catch (error) {
      this.#options.onListenerError?.(toError(error));
    }
  }
}
