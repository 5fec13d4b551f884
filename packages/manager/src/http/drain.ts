import type { Server } from 'node:http';
import type { Logger } from '../logging.js';
import type { App } from '../routes/common.js';
import type { Wakeups } from '../store/wakeups.js';

/**
 * Graceful shutdown of one replica (SIGTERM): readiness turns false so the Service stops
 * sending new work, responses ask clients to close their connections (their next request
 * opens one to another replica), and the process waits for its requests to finish.
 */
export class DrainState {
  #draining = false;
  #inFlight = 0;
  #idle: Array<() => void> = [];

  get draining(): boolean {
    return this.#draining;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  begin(): void {
    this.#draining = true;
  }

  register(app: App): void {
    app.addHook('onRequest', async (_request, reply) => {
      this.#inFlight += 1;
      // 'close' fires once the response is sent or the client went away, whichever first.
      reply.raw.once('close', () => {
        this.#inFlight -= 1;
        if (this.#inFlight === 0) for (const resolve of this.#idle.splice(0)) resolve();
      });
    });
    app.addHook('onSend', async (_request, reply) => {
      if (this.#draining) reply.header('connection', 'close');
    });
  }

  /** Resolves once no request is in flight, or after `timeoutMs`. */
  idle(timeoutMs: number): Promise<void> {
    if (this.#inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.#idle.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }
}

export interface DrainSteps {
  state: DrainState;
  wakeups: Wakeups;
  server: Server;
  /** Stop taking background work (the scheduler). */
  stopWork: () => Promise<void>;
  /** SVC_DRAIN_DELAY_MS: how long the Service takes to drop an unready replica. */
  delayMs: number;
  /** SVC_DRAIN_TIMEOUT_MS: the longest wait for requests in flight after that. */
  timeoutMs: number;
  logger: Logger;
  close: () => Promise<void>;
}

/**
 * The drain, in the order that loses no request:
 * 1. readiness false, every response says `Connection: close`; requests are still accepted,
 *    since the Service keeps sending some until its endpoints have moved (the delay);
 * 2. every long-poll and event stream, open or accepted meanwhile, is answered with its current
 *    state at the end of the delay at the latest (a wait is capped at the time left), so no
 *    client wait outlives the drain whatever its own cap;
 * 3. then the process waits, bounded by the timeout, until every connection has gone: one
 *    that carries a request is answered with `Connection: close`, and an idle keep-alive
 *    connection is left to the server's own keep-alive timeout, the one its responses
 *    advertised (`Keep-Alive: timeout=…`). A client stops reusing a connection before that
 *    advertised time, so none sends a request on a connection as the server closes it; closing
 *    idle connections any earlier races a client's next request on them (a transport error).
 *    Only what is left at the timeout is closed.
 */
export async function drainReplica(steps: DrainSteps): Promise<void> {
  const { state, wakeups, logger } = steps;
  state.begin();
  const releaseAt = Date.now() + steps.delayMs;
  wakeups.releaseAt(releaseAt);
  logger.info({ delayMs: steps.delayMs }, 'draining: readiness false');
  await steps.stopWork();
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, releaseAt - Date.now())));
  wakeups.releaseAll();
  const deadline = Date.now() + steps.timeoutMs;
  await state.idle(steps.timeoutMs);
  const left = await connectionsGone(steps.server, deadline);
  logger.info({ inFlight: state.inFlight, connections: left }, 'drained: closing');
  await steps.close();
}

/** Resolves with the connections still open once none is, or at the deadline. */
async function connectionsGone(server: Server, deadline: number): Promise<number> {
  const count = () =>
    new Promise<number>((resolve) => server.getConnections((error, n) => resolve(error ? 0 : n)));
  let open = await count();
  while (open > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, Math.min(100, deadline - Date.now())));
    open = await count();
  }
  return open;
}
