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
  type RunStatusBody,
} from '@svc/contracts';

/**
 * The runner-facing API of the manager. Every call here is idempotent (event keys, same
 * status twice returns the current state), so connection failures and 5xx are retried with
 * backoff for up to about a minute: a manager restart does not lose a runner.
 */
export class ManagerClient {
  readonly api: ApiClient;
  /** From the last granted claim; proves lease ownership on every fenced call. */
  #leaseToken: string | null = null;

  constructor(
    baseUrl: string,
    token: string | null,
    readonly runId: string,
  ) {
    this.api = new ApiClient({
      baseUrl,
      token,
      timeoutMs: 40_000,
      retry: { attempts: 12, baseDelayMs: 100, maxDelayMs: 10_000 },
    });
  }

  register(body: RunnerRegisterBody): Promise<RunnerRegistration> {
    return this.api.request('POST', '/api/v1/runners/register', body, { retry: true });
  }

  async claim(runnerId: string, attemptId: string | null): Promise<ClaimResponse> {
    const granted = await this.api.request<ClaimResponse>(
      'POST',
      `/api/v1/runs/${this.runId}/claim`,
      { runnerId, attemptId, mode: 'replacement' },
      { retry: true },
    );
    this.#leaseToken = granted.leaseToken;
    return granted;
  }

  /** Options of a lease-fenced call: retried, with the lease token header once claimed. */
  #fenced(): { retry: true; headers: Record<string, string> } {
    return {
      retry: true,
      headers: this.#leaseToken ? { 'x-lease-token': this.#leaseToken } : {},
    };
  }

  heartbeat(
    runnerId: string,
    activity: { at: number; kind: string } | null,
  ): Promise<LeaseResponse> {
    return this.api.request(
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
    return this.api.request('GET', `/api/v1/runs/${this.runId}/commands`, undefined, {
      ...this.#fenced(),
      timeoutMs: waitMs + 15_000,
      query: { runnerId, afterSeq, waitMs, limit: 50 },
      ...(signal ? { signal } : {}),
    });
  }

  ack(runnerId: string, commandId: string): Promise<Command> {
    return this.api.request(
      'POST',
      `/api/v1/commands/${commandId}/ack`,
      { runnerId },
      this.#fenced(),
    );
  }

  commandStatus(commandId: string, body: CommandStatusBody): Promise<Command> {
    return this.api.request('PATCH', `/api/v1/commands/${commandId}/status`, body, this.#fenced());
  }

  append(runnerId: string, events: EventInput[]): Promise<EventAppendResponse> {
    return this.api.request(
      'POST',
      `/api/v1/runs/${this.runId}/events`,
      { runnerId, events },
      this.#fenced(),
    );
  }

  runStatus(body: RunStatusBody): Promise<Run> {
    return this.api.request('PATCH', `/api/v1/runs/${this.runId}/status`, body, this.#fenced());
  }

  refreshSessionStorage(
    sessionId: string,
    runnerId: string,
    summary: { sizeBytes: number; filesCount: number; sha256: string },
  ): Promise<unknown> {
    return this.api.request(
      'POST',
      `/api/v1/sessions/${sessionId}/storage/refresh`,
      { runnerId, ...summary },
      this.#fenced(),
    );
  }

  getRun(): Promise<Run> {
    return this.api.request('GET', `/api/v1/runs/${this.runId}`, undefined, { retry: true });
  }
}
