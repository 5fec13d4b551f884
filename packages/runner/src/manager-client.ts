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

  claim(runnerId: string, attemptId: string | null): Promise<ClaimResponse> {
    return this.api.request(
      'POST',
      `/api/v1/runs/${this.runId}/claim`,
      { runnerId, attemptId, mode: 'replacement' },
      { retry: true },
    );
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
      { retry: true },
    );
  }

  poll(
    runnerId: string,
    afterSeq: number,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<PollResponse> {
    return this.api.request('GET', `/api/v1/runs/${this.runId}/commands`, undefined, {
      retry: true,
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
      { retry: true },
    );
  }

  commandStatus(commandId: string, body: CommandStatusBody): Promise<Command> {
    return this.api.request('PATCH', `/api/v1/commands/${commandId}/status`, body, { retry: true });
  }

  append(runnerId: string, events: EventInput[]): Promise<EventAppendResponse> {
    return this.api.request(
      'POST',
      `/api/v1/runs/${this.runId}/events`,
      { runnerId, events },
      { retry: true },
    );
  }

  runStatus(body: RunStatusBody): Promise<Run> {
    return this.api.request('PATCH', `/api/v1/runs/${this.runId}/status`, body, { retry: true });
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
      { retry: true },
    );
  }

  getRun(): Promise<Run> {
    return this.api.request('GET', `/api/v1/runs/${this.runId}`, undefined, { retry: true });
  }
}
