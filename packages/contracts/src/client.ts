import { sanitizeUrl } from './redaction.js';

/** A structured failure answered by the manager (`{ failureKind, message, traceId }`). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly failureKind: string,
    message: string,
    readonly traceId: string | null,
    readonly details: Record<string, unknown> | undefined,
    /** The answer's `Retry-After` in ms (503 overloaded, 429), when it had one. */
    readonly retryAfterMs: number | null = null,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** `Retry-After` as delay-seconds or an HTTP date, in ms from now; null when absent or unreadable. */
export function retryAfterMs(header: string | null, now = Date.now()): number | null {
  if (header === null || header.trim() === '') return null;
  const value = header.trim();
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** The manager could not be reached at all (connection refused, DNS, timeout). */
export class UnreachableError extends Error {
  constructor(
    readonly url: string,
    cause: unknown,
  ) {
    super(
      `cannot reach the manager at ${url}: ${cause instanceof Error ? ((cause.cause as Error | undefined)?.message ?? cause.message) : String(cause)}`,
      { cause },
    );
    this.name = 'UnreachableError';
  }
}

export interface RetryPolicy {
  /** Total attempts, first included. */
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
}

export interface ApiClientOptions {
  baseUrl: string;
  token?: string | null;
  timeoutMs?: number;
  retry?: RetryPolicy;
}

export interface RequestOptions {
  /** Retry connection failures and 5xx/503 answers (only for idempotent calls). */
  retry?: boolean;
  timeoutMs?: number;
  signal?: AbortSignal;
  query?: Record<string, string | number | boolean | undefined>;
  /** Extra request headers (for example the runner's `x-lease-token`). */
  headers?: Record<string, string>;
}

const NO_RETRY: RetryPolicy = { attempts: 1, baseDelayMs: 0, maxDelayMs: 0 };

/**
 * JSON over HTTP to the manager's REST API, with the bearer token. Used by the runner and the
 * CLI. The printable address never carries credentials.
 */
export class ApiClient {
  readonly baseUrl: string;
  readonly printableUrl: string;
  readonly #token: string | null;
  readonly #timeoutMs: number;
  readonly #retry: RetryPolicy;

  constructor(options: ApiClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.printableUrl = sanitizeUrl(this.baseUrl);
    this.#token = options.token ?? null;
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#retry = options.retry ?? NO_RETRY;
  }

  async request<T>(
    method: string,
    path: string,
    body?: unknown,
    options: RequestOptions = {},
  ): Promise<T> {
    const policy = options.retry ? this.#retry : NO_RETRY;
    let url = `${this.baseUrl}${path}`;
    if (options.query) {
      const params = new URLSearchParams();
      for (const [k, v] of Object.entries(options.query))
        if (v !== undefined) params.set(k, String(v));
      const qs = params.toString();
      if (qs) url += `${url.includes('?') ? '&' : '?'}${qs}`;
    }
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#once<T>(method, url, body, options);
      } catch (error) {
        const retryable =
          error instanceof UnreachableError ||
          (error instanceof ApiError && (error.status >= 500 || error.status === 429));
        if (!retryable || attempt >= policy.attempts || options.signal?.aborted) throw error;
        const delay =
          Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1)) *
          (0.5 + Math.random() / 2);
        await new Promise((r) => setTimeout(r, delay));
      }
    }
  }

  async #once<T>(method: string, url: string, body: unknown, options: RequestOptions): Promise<T> {
    const signals = [AbortSignal.timeout(options.timeoutMs ?? this.#timeoutMs)];
    if (options.signal) signals.push(options.signal);
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers: {
          accept: 'application/json',
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...(this.#token ? { authorization: `Bearer ${this.#token}` } : {}),
          ...options.headers,
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        signal: AbortSignal.any(signals),
      });
    } catch (error) {
      throw new UnreachableError(this.printableUrl, error);
    }
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!response.ok) {
      const failure = (parsed ?? {}) as {
        failureKind?: string;
        message?: string;
        traceId?: string;
        details?: Record<string, unknown>;
      };
      throw new ApiError(
        response.status,
        failure.failureKind ?? 'http-error',
        failure.message ?? `HTTP ${response.status} from ${method} ${new URL(url).pathname}`,
        failure.traceId ?? response.headers.get('x-request-id'),
        failure.details,
        retryAfterMs(response.headers.get('retry-after')),
      );
    }
    if (parsed === undefined)
      throw new ApiError(
        response.status,
        'empty-response',
        `empty response from ${method} ${new URL(url).pathname}`,
        null,
        undefined,
      );
    return parsed as T;
  }
}
