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
 * backoff: up to about a minute until the run is claimed, then for as long as the lease would
 * last (`keepLease`), at most a heartbeat interval apart. A manager restart or outage shorter
 * than the lease does not lose a runner; a longer one ends it, and the run is replaced.
 */
export class ManagerClient {
  api: ApiClient;
  /** From the last granted claim; proves lease ownership on every fenced call. */
  #leaseToken: string | null = null;

  constructor(
    private readonly baseUrl: string,
    private readonly token: string | null,
    readonly runId: string,
  ) {
    this.api = new ApiClient({
      baseUrl,
      token,
      timeoutMs: 40_000,
      retry: { attempts: 12, baseDelayMs: 100, maxDelayMs: 10_000 },
    });
  }

  /** From the claim on: retry each call while the lease it keeps would still be valid. */
  keepLease(leaseTtlMs: number, heartbeatIntervalMs: number): void {
    this.api = new ApiClient({
      baseUrl: this.baseUrl,
      token: this.token,
      timeoutMs: 40_000,
      retry: {
        attempts: Number.MAX_SAFE_INTEGER,
        baseDelayMs: 100,
        maxDelayMs: Math.min(10_000, Math.max(250, heartbeatIntervalMs)),
        budgetMs: leaseTtlMs,
      },
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
