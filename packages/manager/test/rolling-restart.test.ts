import assert from 'node:assert/strict';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { freePort, realPostgresAvailable } from '@svc/testkit';
import { useReplicas, type Replica } from './manager-process.js';
import { runBody } from './helpers.js';

const skip = (await realPostgresAvailable())
  ? false
  : 'needs a PostgreSQL server for two processes';
/**
 * Far above the drain (delay + timeout below, 9.5 s at most, and a busy machine's exit): a
 * client wait must not decide when it ends.
 */
const CLIENT_WAIT_MS = 20_000;
const DRAIN_DELAY_MS = 1500;
// Above the keep-alive timeout the replica advertises (5 s): an idle connection is left to it.
const DRAIN_TIMEOUT_MS = 8000;

/**
 * The Service in front of the replicas, as kube-proxy makes it: each new connection goes to a
 * replica that is ready now (readiness polled every 100 ms, the endpoints moving a moment after
 * a replica turns unready); a connection stays with its replica until one side closes it.
 */
class Balancer {
  readonly #ready = new Set<number>();
  readonly #sockets = new Set<Socket>();
  #next = 0;
  #timer: NodeJS.Timeout | undefined;
  private constructor(
    readonly server: Server,
    readonly url: string,
    readonly replicas: Replica[],
  ) {}

  static async start(replicas: Replica[]): Promise<Balancer> {
    const server = createServer();
    const port = await freePort();
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    const balancer = new Balancer(server, `http://127.0.0.1:${port}`, replicas);
    server.on('connection', (client) => balancer.#route(client));
    await balancer.#probe();
    balancer.#timer = setInterval(() => void balancer.#probe(), 100);
    return balancer;
  }

  async #probe(): Promise<void> {
    await Promise.all(
      this.replicas.map(async ({ port }) => {
        const ok = await fetch(`http://127.0.0.1:${port}/health/readiness`)
          .then((r) => r.ok)
          .catch(() => false);
        if (ok) this.#ready.add(port);
        else this.#ready.delete(port);
      }),
    );
  }

  #route(client: Socket): void {
    const ready = [...this.#ready];
    const port = ready[this.#next++ % Math.max(1, ready.length)];
    if (port === undefined) {
      client.destroy();
      return;
    }
    const upstream = connect(port, '127.0.0.1');
    this.#sockets.add(client).add(upstream);
    const forget = () => this.#sockets.delete(client) && this.#sockets.delete(upstream);
    client.pipe(upstream).pipe(client);
    // A reset on one side is a reset on the other: the client sees what the replica did.
    client.on('error', () => upstream.destroy()).on('close', forget);
    upstream.on('error', () => client.destroy()).on('close', () => client.end());
  }

  async close(): Promise<void> {
    clearInterval(this.#timer);
    for (const socket of this.#sockets) socket.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

describe('a rolling restart under load', { skip }, () => {
  const { replicas, start: startReplica } = useReplicas('rolling', {
    SVC_SCHEDULER: 'off',
    SVC_DRAIN_DELAY_MS: String(DRAIN_DELAY_MS),
    SVC_DRAIN_TIMEOUT_MS: String(DRAIN_TIMEOUT_MS),
  });

  it('answers every request, long-poll and stream of a SIGTERMed replica: no transport error, no 5xx', async () => {
    const a = await startReplica();
    await startReplica();
    const lb = await Balancer.start(replicas);
    const errors: string[] = [];
    const statuses = new Map<number, number>();
    let stopping = false;
    const count = (status: number) => statuses.set(status, (statuses.get(status) ?? 0) + 1);

    const send = async (path: string, init: RequestInit = {}) => {
      if (stopping) return { status: -1, body: undefined };
      try {
        const response = await fetch(`${lb.url}${path}`, {
          ...init,
          headers: { 'content-type': 'application/json', ...init.headers },
        });
        const text = await response.text();
        count(response.status);
        return { status: response.status, body: text ? JSON.parse(text) : undefined };
      } catch (error) {
        const cause = (error as { cause?: { code?: string; message?: string } }).cause;
        errors.push(
          `${init.method ?? 'GET'} ${path}: ${cause?.code ?? cause?.message ?? String(error)}`,
        );
        return { status: 0, body: undefined };
      }
    };

    const runs: Array<{ runId: string; runnerId: string; leaseToken: string }> = [];
    for (let i = 0; i < 3; i += 1) {
      const run = await send('/api/v1/runs', { method: 'POST', body: JSON.stringify(runBody()) });
      assert.equal(run.status, 201, JSON.stringify(run.body));
      const runnerId = `rnr-roll-${i}-0001`;
      const claim = await send(`/api/v1/runs/${run.body.runId}/claim`, {
        method: 'POST',
        body: JSON.stringify({ runnerId, mode: 'ordinary' }),
      });
      assert.equal(claim.status, 200, JSON.stringify(claim.body));
      runs.push({ runId: run.body.runId, runnerId, leaseToken: claim.body.leaseToken });
    }

    let longPollsAnswered = 0;
    let streamsEnded = 0;
    const loops: Array<Promise<void>> = [];
    const loop = (body: () => Promise<void>) =>
      loops.push(
        (async () => {
          while (!stopping) await body();
        })(),
      );
    let n = 0;
    for (const run of runs) {
      // Plain requests: reads and command writes.
      loop(async () => {
        await send(`/api/v1/runs/${run.runId}`);
        await send(`/api/v1/runs/${run.runId}/commands`, {
          method: 'POST',
          body: JSON.stringify({
            type: 'turn',
            payload: { prompt: 'load' },
            idempotencyKey: `roll-${(n += 1)}`,
          }),
        });
      });
      // Client long-polls that nothing answers before their wait ends.
      loop(async () => {
        const page = await send(
          `/api/v1/runs/${run.runId}/events?afterSeq=100000&waitMs=${CLIENT_WAIT_MS}`,
        );
        if (page.status === 200) longPollsAnswered += 1;
      });
      loop(async () => {
        await send(`/api/v1/runs/${run.runId}/result?waitMs=${CLIENT_WAIT_MS}`);
      });
      // The runner's command long-poll, after the last command it saw.
      let seen = 0;
      loop(async () => {
        const page = await send(
          `/api/v1/runs/${run.runId}/commands?afterSeq=${seen}&runnerId=${run.runnerId}&waitMs=${CLIENT_WAIT_MS}`,
          { headers: { 'x-lease-token': run.leaseToken } },
        );
        if (page.status === 200) seen = Math.max(seen, page.body.lastCommandSeq);
      });
      // An event stream, reconnecting whenever the server ends it.
      loop(async () => {
        try {
          const response = await fetch(`${lb.url}/api/v1/runs/${run.runId}/events/stream`);
          count(response.status);
          await response.text();
          streamsEnded += 1;
        } catch (error) {
          errors.push(`event stream: ${String((error as { cause?: Error }).cause ?? error)}`);
        }
      });
    }

    try {
      await underLoad();
    } finally {
      // A failed assertion must not leave the load running (the file would never end).
      stopping = true;
      for (const r of replicas) if (r.child.exitCode === null) r.child.kill('SIGKILL');
      await lb.close();
    }

    assert.deepEqual(errors, [], 'no request ended without an HTTP answer');
    const failures = [...statuses].filter(([status]) => status >= 500);
    assert.deepEqual(failures, [], `statuses: ${JSON.stringify([...statuses])}`);
    assert.ok((statuses.get(201) ?? 0) > 10, 'commands were written throughout');
    assert.ok(longPollsAnswered >= runs.length, 'the long-polls open at SIGTERM were answered');
    assert.ok(streamsEnded >= runs.length, 'the streams open at SIGTERM ended cleanly');

    async function underLoad(): Promise<void> {
      await new Promise((r) => setTimeout(r, 1000));
      const signalled = Date.now();
      a.child.kill('SIGTERM');
      assert.equal(await a.exited, 0, 'the replica exits cleanly once drained');
      const drainedIn = Date.now() - signalled;
      // The drain, not the clients' waits, decided when the replica ended.
      assert.ok(drainedIn < CLIENT_WAIT_MS, `drained in ${drainedIn} ms`);
      await new Promise((r) => setTimeout(r, 500));
      stopping = true;
      // The waits and streams still open on the other replica end with its own drain.
      replicas[1]!.child.kill('SIGTERM');
      // A stream or wait that a drain fails to end would hold its loop for its whole time.
      const bound = DRAIN_DELAY_MS + DRAIN_TIMEOUT_MS + 5000;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(loops),
        new Promise((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`load still open ${bound} ms after the drain`)),
            bound,
          );
        }),
      ]);
      clearTimeout(timer);
      assert.equal(await replicas[1]!.exited, 0);
    }
  });
});
