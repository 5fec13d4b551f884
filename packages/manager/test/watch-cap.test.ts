import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runBody, startTestManager, TestRunner, type TestManager } from './helpers.js';
import { openStream, type SseStream } from './sse-client.js';

/**
 * Client long-polls and event streams share one bound per process (SVC_MAX_WATCHES): past it
 * either is refused at once with 429 and Retry-After, each counted; plain reads and the
 * runners' command polls are never refused by it.
 */
const MAX = 4;
let t: TestManager;
before(async () => {
  t = await startTestManager({
    listen: true,
    env: { SVC_MAX_WATCHES: String(MAX), SVC_CLIENT_WAIT_MAX_MS: '20000' },
  });
  await t.configureProfile('builtin-a');
});
after(() => t.close());

async function claimedRun(runnerId: string) {
  const run = await t.api('POST', '/api/v1/runs', runBody());
  const runner = new TestRunner(t, runnerId, run.body.runId);
  assert.equal((await runner.claim()).status, 200);
  const lastSeq: number = (await t.api('GET', `/api/v1/runs/${run.body.runId}`)).body.lastSeq;
  return { runId: run.body.runId as string, runner, lastSeq };
}

/** The value of one series of a counter in the /metrics text. */
async function metric(name: string, labels: string): Promise<number> {
  const text = (await t.api('GET', '/metrics')).raw;
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

const series = (kind: string, outcome: string) => `kind="${kind}",outcome="${outcome}"`;

describe('the shared bound on client watches', () => {
  it('refuses a long-poll or a stream past the bound with 429 and Retry-After, and counts both', async () => {
    const { runId, runner, lastSeq } = await claimedRun('rnr-wcap0001');
    // A turn on a run of its own, whose result a client waits for (this run's runner polls).
    const other = await claimedRun('rnr-wcap0003');
    const commandId: string = (
      await t.api('POST', `/api/v1/runs/${other.runId}/commands`, {
        type: 'turn',
        payload: { prompt: 'wait' },
      })
    ).body.commandId;
    const base = t.manager.url;
    const before = {
      pollAccepted: await metric('svc_client_watches_total', series('long-poll', 'accepted')),
      pollRefused: await metric('svc_client_watches_total', series('long-poll', 'refused')),
      streamRefused: await metric('svc_client_watches_total', series('stream', 'refused')),
    };
    const streams: SseStream[] = [];
    const polls: Promise<Response>[] = [];
    const stop = new AbortController();
    try {
      streams.push(await openStream(`${base}/api/v1/runs/${runId}/events/stream`));
      streams.push(await openStream(`${base}/api/v1/runs/${runId}/events/stream`));
      for (const s of streams) assert.equal(s.status, 200);
      const waitUrl = `${base}/api/v1/runs/${runId}/events?afterSeq=${lastSeq}&waitMs=15000`;
      polls.push(fetch(waitUrl, { signal: stop.signal }), fetch(waitUrl, { signal: stop.signal }));
      // Both long-polls hold their slots once the gauge says so.
      for (let i = 0; i < 100; i++) {
        const text = (await t.api('GET', '/metrics')).raw;
        if (text.includes('svc_open_long_polls{kind="client"} 2')) break;
        await new Promise((r) => setTimeout(r, 20));
      }

      // Every waiting read, each as its OpenAPI document says it may answer.
      const openapi = (await t.api('GET', '/openapi.json')).body;
      for (const [url, path] of [
        [waitUrl, '/api/v1/runs/{runId}/events'],
        [`${base}/api/v1/runs/${runId}/result?waitMs=5000`, '/api/v1/runs/{runId}/result'],
        [
          `${base}/api/v1/runs/${other.runId}/commands/${commandId}/result?waitMs=5000`,
          '/api/v1/runs/{runId}/commands/{commandId}/result',
        ],
        [`${base}/api/v1/runs/${runId}/events/stream`, '/api/v1/runs/{runId}/events/stream'],
      ] as const) {
        assert.ok(openapi.paths[path]?.get?.responses?.['429'], `${path} documents its 429`);
        const refused = await fetch(url);
        assert.equal(refused.status, 429, url);
        assert.equal(refused.headers.get('retry-after'), '2', url);
        const body = (await refused.json()) as any;
        assert.equal(body.failureKind, 'capacity-exceeded');
        assert.equal(body.details.limit, MAX);
        assert.equal(body.details.retryAfterSeconds, 2);
      }

      // Plain reads and the rest of the API go on.
      const read = await fetch(`${base}/api/v1/runs/${runId}/events?afterSeq=0`);
      assert.equal(read.status, 200);
      assert.equal((await fetch(`${base}/api/v1/runs/${runId}`)).status, 200);
      // A runner's command poll is not a client watch: it waits as usual.
      const started = Date.now();
      const poll = await runner.poll(0, 300);
      assert.equal(poll.status, 200, poll.raw);
      assert.ok(Date.now() - started >= 100, 'the runner poll waited');

      assert.equal(
        (await metric('svc_client_watches_total', series('long-poll', 'accepted'))) -
          before.pollAccepted,
        2,
      );
      assert.equal(
        (await metric('svc_client_watches_total', series('long-poll', 'refused'))) -
          before.pollRefused,
        3,
      );
      assert.equal(
        (await metric('svc_client_watches_total', series('stream', 'refused'))) -
          before.streamRefused,
        1,
      );

      // An append answers the waiting long-polls, which frees their slots.
      await runner.append([{ key: 'wake', category: 'system', data: {} }]);
      for (const response of await Promise.all(polls)) assert.equal(response.status, 200);
      const again = await fetch(`${base}/api/v1/runs/${runId}/events?afterSeq=0&waitMs=1000`);
      assert.equal(again.status, 200, 'a freed slot is taken again');
    } finally {
      stop.abort();
      for (const s of streams) s.close();
      await Promise.allSettled(polls);
    }
  });

  it('frees the slot of a client that leaves mid-wait', async () => {
    // The waits and streams of the test before have given their slots back (a server notices
    // a client gone a moment after it left).
    for (let i = 0; i < 250; i++) {
      const text = (await t.api('GET', '/metrics')).raw;
      if (
        text.includes('svc_open_long_polls{kind="client"} 0') &&
        /^svc_open_event_streams 0$/m.test(text)
      )
        break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const { runId, lastSeq } = await claimedRun('rnr-wcap0002');
    const url = `${t.manager.url}/api/v1/runs/${runId}/events?afterSeq=${lastSeq}&waitMs=15000`;
    const leaving = Array.from({ length: MAX }, () => new AbortController());
    const waits = leaving.map((c) => fetch(url, { signal: c.signal }).catch(() => undefined));
    // All of them hold their slots once the gauge says so (a probe of its own would hold one
    // for a moment too, and could see the bound reached before the last of them arrived).
    for (let i = 0; i < 500; i++) {
      const text = (await t.api('GET', '/metrics')).raw;
      if (text.includes(`svc_open_long_polls{kind="client"} ${MAX}`)) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal((await fetch(url.replace('15000', '1'))).status, 429, 'all slots taken');
    for (const c of leaving) c.abort();
    await Promise.all(waits);
    for (let i = 0; i < 100; i++) {
      if ((await fetch(url.replace('15000', '1'))).status === 200) return;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.fail('slots of clients that left were not freed');
  });
});
