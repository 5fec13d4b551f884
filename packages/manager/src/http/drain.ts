import type { App } from '../routes/common.js';

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
