import {
  ApiClient,
  type ClaimResponse,
  type Command,
  type CommandStatusBody,
  type EventAppendResponse,
  type EventInput,
  type LeaseResponse,
  type PollResponse,
  type Run,
  type RunnerRegisterBody,
  type RunnerRegistration,
  type RequestOptions,
  type RunStatusBody,
} from '@svc/contracts';
import { BACKOFF, withRetry, type CallKind } from './retry.js';
import { ThrottleLog } from './throttling.js';

/**
 * The runner-facing API of the manager. Every call here is idempotent (event keys, same
 * status twice returns the current state), so a call the manager could not answer (refused
 * for load, 5xx, timeout, no connection) is tried again under the runner's one retry policy
 * (retry.ts): a manager restart or overload does not lose a runner. Each retry is noted in
 * `throttling`. An append is tried once here: the event sink owns its retries (it re-batches).
 */
export class ManagerClient {
  readonly api: ApiClient;
  readonly throttling = new ThrottleLog();
  /** From the last granted claim; proves lease ownership on every fenced call. */
  #leaseToken: string | null = null;

  constructor(
    baseUrl: string,
    token: string | null,
    readonly runId: string,
  ) {
    this.api = new ApiClient({ baseUrl, token });
  }

  /** One call under the retry policy of its kind. */
  #call<T>(
    kind: CallKind,
    method: string,
    path: string,
    body?: unknown,
    options: RequestOptions = {},
  ): Promise<T> {
    return withRetry(
      kind,
      (timeoutMs) =>
        this.api.request<T>(method, path, body, {
          ...options,
          timeoutMs: timeoutMs + (options.timeoutMs ?? 0),
        }),
      {
        ...(options.signal ? { signal: options.signal } : {}),
        onRetry: (note) => this.throttling.note(note),
        onRecovered: () => this.throttling.recovered(),
      },
    );
  }

  register(body: RunnerRegisterBody): Promise<RunnerRegistration> {
    return this.#call('control', 'POST', '/api/v1/runners/register', body);
  }

  async claim(runnerId: string, attemptId: string | null): Promise<ClaimResponse> {
    const granted = await this.#call<ClaimResponse>(
      'lease',
      'POST',
      `/api/v1/runs/${this.runId}/claim`,
      { runnerId, attemptId, mode: 'replacement' },
    );
    this.#leaseToken = granted.leaseToken;
    return granted;
  }

  /** Options of a lease-fenced call: the lease token header once claimed. */
  #fenced(): { headers: Record<string, string> } {
    return { headers: this.#leaseToken ? { 'x-lease-token': this.#leaseToken } : {} };
  }

  heartbeat(
    runnerId: string,
    activity: { at: number; kind: string } | null,
  ): Promise<LeaseResponse> {
    return this.#call(
      'lease',
      'PATCH',
      `/api/v1/runs/${this.runId}/lease`,
      {
        runnerId,
        ...(activity
          ? { lastActivityAt: new Date(activity.at).toISOString(), lastActivityKind: activity.kind }
          : {}),
      },
      this.#fenced(),
    );
  }

  poll(
    runnerId: string,
    afterSeq: number,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<PollResponse> {
    return this.#call('poll', 'GET', `/api/v1/runs/${this.runId}/commands`, undefined, {
      ...this.#fenced(),
      // Added to the policy's timeout: the wait itself is not a slow answer.
      timeoutMs: waitMs,
      query: { runnerId, afterSeq, waitMs, limit: 50 },
      ...(signal ? { signal } : {}),
    });
  }

  ack(runnerId: string, commandId: string): Promise<Command> {
    return this.#call(
      'control',
      'POST',
      `/api/v1/commands/${commandId}/ack`,
      { runnerId },
      this.#fenced(),
    );
  }

  commandStatus(commandId: string, body: CommandStatusBody): Promise<Command> {
    return this.#call(
      'control',
      'PATCH',
      `/api/v1/commands/${commandId}/status`,
      body,
      this.#fenced(),
    );
  }

  /** One attempt, with the events policy's timeout (event-sink.ts retries). */
  appendOnce(runnerId: string, events: EventInput[]): Promise<EventAppendResponse> {
    return this.api.request(
      'POST',
      `/api/v1/runs/${this.runId}/events`,
      { runnerId, events },
      { ...this.#fenced(), timeoutMs: BACKOFF.events.timeoutMs },
    );
  }

  runStatus(body: RunStatusBody): Promise<Run> {
    return this.#call(
      'control',
      'PATCH',
      `/api/v1/runs/${this.runId}/status`,
      body,
      this.#fenced(),
    );
  }

  refreshSessionStorage(
    sessionId: string,
    runnerId: string,
    summary: { sizeBytes: number; filesCount: number; sha256: string },
  ): Promise<unknown> {
    return this.#call(
      'control',
      'POST',
      `/api/v1/sessions/${sessionId}/storage/refresh`,
      { runnerId, ...summary },
      this.#fenced(),
    );
  }

  getRun(): Promise<Run> {
    return this.#call('control', 'GET', `/api/v1/runs/${this.runId}`);
  }
}
