import { ApiError, type ClaimResponse, type RunControlSignals } from '@svc/contracts';
import type { RunnerLog } from './logging.js';
import type { ManagerClient } from './manager-client.js';

/** Thrown when the run ended or the lease went to someone else: stop quietly. */
export class RunnerStop extends Error {
  constructor(
    readonly reason: 'run-terminal' | 'lease-lost',
    message: string,
  ) {
    super(message);
    this.name = 'RunnerStop';
  }
}

/**
 * The manager refuses a job's token (401) once the job or its run has ended. The token worked
 * when the runner registered, so a refusal afterwards is that ending, not a failure: the runner
 * stops quietly, as it does when it sees the run end in a control signal.
 */
export function tokenRetired(error: unknown): RunnerStop | null {
  if (!(error instanceof ApiError) || error.status !== 401) return null;
  return new RunnerStop(
    'run-terminal',
    'the manager no longer accepts this job token: its run or job has ended',
  );
}

/**
 * Claims the run and keeps the lease. A replacement runner waits while an old lease is alive:
 * the manager answers `runner-lease-conflict` with the owner and the expiry, and records the
 * wait; the runner retries at that expiry. Heartbeats extend the lease, report when the agent
 * last did anything (the idle budget), and carry control signals (cancel) back.
 */
export class LeaseKeeper {
  #timer: NodeJS.Timeout | null = null;
  #beating = false;

  constructor(
    private readonly client: ManagerClient,
    private readonly runnerId: string,
    private readonly attemptId: string | null,
    private readonly log: RunnerLog,
  ) {}

  async claim(maxWaitMs: number): Promise<ClaimResponse> {
    const deadline = Date.now() + maxWaitMs;
    for (;;) {
      try {
        return await this.client.claim(this.runnerId, this.attemptId);
      } catch (error) {
        if (error instanceof ApiError && error.failureKind === 'run-terminal')
          throw new RunnerStop('run-terminal', error.message);
        const retired = tokenRetired(error);
        if (retired) throw retired;
        if (!(error instanceof ApiError) || error.failureKind !== 'runner-lease-conflict')
          throw error;
        const retryAfter = Number(error.details?.['retryAfterMs'] ?? 1000);
        if (Date.now() + retryAfter > deadline)
          throw new RunnerStop(
            'lease-lost',
            `run is still leased by another runner; gave up waiting`,
          );
        this.log.info('waiting for the previous runner lease to expire', {
          leaseExpiresAt: error.details?.['leaseExpiresAt'],
          retryAfterMs: retryAfter,
        });
        await new Promise((r) => setTimeout(r, Math.min(Math.max(retryAfter, 100), 5000)));
      }
    }
  }

  /**
   * Heartbeat every `intervalMs`; `onControl` gets the signals; `onStop` when the lease is gone
   * (`lease-lost`) or the manager retired the job's token (`run-terminal`).
   */
  start(
    intervalMs: number,
    activity: () => { at: number; kind: string } | null,
    onControl: (control: RunControlSignals) => void,
    onStop: (stop: RunnerStop) => void,
  ): void {
    this.#timer = setInterval(() => {
      if (this.#beating) return;
      this.#beating = true;
      this.beat(activity())
        .then(onControl)
        .catch((error: unknown) => {
          const retired = tokenRetired(error);
          if (retired) onStop(retired);
          else if (error instanceof ApiError && error.failureKind === 'runner-lease-conflict')
            onStop(new RunnerStop('lease-lost', error.message));
          else
            this.log.warn('heartbeat failed', {
              err: error instanceof Error ? error.message : String(error),
            });
        })
        .finally(() => (this.#beating = false));
    }, intervalMs);
    this.#timer.unref();
  }

  async beat(activity: { at: number; kind: string } | null): Promise<RunControlSignals> {
    return (await this.client.heartbeat(this.runnerId, activity)).control;
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }
}
