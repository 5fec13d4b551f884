import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runBody, startTestManager, TestRunner, type TestManager } from './helpers.js';

/**
 * The envelope's tool and artifact totals are kept per window and only the new events are
 * read on the next request. Checked against totals worked out from what was appended, after
 * every batch, with several readers at once, across windows (afterSeq) and the aggregation cap,
 * and by a second manager process that never saw the earlier reads.
 */
let t: TestManager;
let second: TestManager;
const CAP = 200;
before(async () => {
  t = await startTestManager({ env: { SVC_RESULT_EVENT_CAP: String(CAP) } });
  await t.configureProfile('builtin-a');
  second = await startTestManager({ store: t.store, env: { SVC_RESULT_EVENT_CAP: String(CAP) } });
});
after(async () => {
  await second.close();
  await t.close();
});

interface Appended {
  seq: number;
  category: string;
  data: Record<string, any>;
}

/** What the envelope must say of the events with afterSeq < seq <= throughSeq. */
function expected(events: Appended[], afterSeq: number, throughSeq: number) {
  const window = events.filter((e) => e.seq > afterSeq && e.seq <= throughSeq);
  const latest = new Map<string, Appended>();
  for (const e of window.filter((e) => e.category === 'tool_call'))
    latest.set(e.data.itemId ?? String(e.seq), e);
  const statusCounts: Record<string, number> = {};
  const exitCodeCounts: Record<string, number> = {};
  for (const e of latest.values()) {
    statusCounts[e.data.status] = (statusCounts[e.data.status] ?? 0) + 1;
    if (typeof e.data.exitCode === 'number')
      exitCodeCounts[e.data.exitCode] = (exitCodeCounts[e.data.exitCode] ?? 0) + 1;
  }
  const recent = [...latest.values()]
    .sort((a, b) => b.seq - a.seq)
    .slice(0, 10)
    .map((e) => e.seq);
  const outputs = window.filter((e) => e.category === 'command_output');
  const diffs = window.filter((e) => e.category === 'diff');
  const refs = [
    ...new Set(window.map((e) => e.data.logRef).filter((r): r is string => !!r)),
  ].sort();
  return {
    tools: { count: latest.size, statusCounts, exitCodeCounts, recent },
    artifacts: {
      outputEvents: outputs.length,
      outputBytes: outputs.reduce((n, e) => n + e.data.originalBytes, 0),
      keptBytes: outputs.reduce((n, e) => n + e.data.keptBytes, 0),
      truncatedOutputs: outputs.filter((e) => e.data.outputTruncated === true).length,
      diffEvents: diffs.length,
      diffBytes: diffs.reduce((n, e) => n + e.data.originalBytes, 0),
      references: refs.slice(0, 10),
    },
  };
}

function actual(envelope: any) {
  const { count, statusCounts, exitCodeCounts, recent } = envelope.toolCallSummary;
  const { outputEvents, outputBytes, keptBytes, truncatedOutputs, diffEvents, diffBytes } =
    envelope.artifactSummary;
  return {
    tools: { count, statusCounts, exitCodeCounts, recent: recent.map((r: any) => r.seq) },
    artifacts: {
      outputEvents,
      outputBytes,
      keptBytes,
      truncatedOutputs,
      diffEvents,
      diffBytes,
      references: envelope.artifactSummary.references,
    },
  };
}

/** A pseudo-random but repeatable event mix: tool calls that move between states, output, diffs. */
function batch(commandId: string, b: number, size: number) {
  let x = b * 7919 + 17;
  const next = (n: number) => (x = (x * 1103515245 + 12345) % 2147483648) % n;
  return Array.from({ length: size }, (_, k) => {
    const item = `tool-${next(40)}`;
    const key = `b${b}-${k}`;
    switch (next(4)) {
      case 0:
        return {
          key,
          commandId,
          category: 'tool_call',
          data: { itemId: item, status: 'started', toolName: 'shell', command: `make ${k}` },
        };
      case 1:
        return {
          key,
          commandId,
          category: 'tool_call',
          data: {
            itemId: item,
            status: next(3) === 0 ? 'failed' : 'completed',
            exitCode: next(3),
            toolName: 'shell',
            command: `make ${k}`,
          },
        };
      case 2:
        return {
          key,
          commandId,
          category: 'command_output',
          data: {
            itemId: item,
            text: 'x',
            originalBytes: 100 + next(5000),
            keptBytes: 100,
            outputTruncated: next(2) === 0,
            ...(next(4) === 0 ? { logRef: `runner.log#${item}` } : {}),
          },
        };
      default:
        return { key, commandId, category: 'diff', data: { diff: '+a', originalBytes: next(900) } };
    }
  });
}

describe('incremental result totals', () => {
  it('match the appended events after every batch, for concurrent readers, windows and a second manager', async () => {
    const run = await t.api('POST', '/api/v1/runs', runBody());
    const runId = run.body.runId as string;
    const runner = new TestRunner(t, 'rnr-totals001', runId);
    await runner.claim();
    const command = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'turn',
      payload: { prompt: 'go' },
    });
    const commandId = command.body.commandId as string;
    await runner.poll();
    await runner.ack(commandId);
    const events: Appended[] = [];
    const read = async (manager: TestManager, afterSeq?: number) =>
      (
        await manager.api(
          'GET',
          afterSeq === undefined
            ? `/api/v1/runs/${runId}/commands/${commandId}/result`
            : `/api/v1/runs/${runId}/result?commandId=${commandId}&afterSeq=${afterSeq}`,
        )
      ).body;

    for (let b = 0; b < 30; b++) {
      const sent = batch(commandId, b, 1 + (b % 4) * 7);
      await runner.append(sent);
      const page = await t.api(
        'GET',
        `/api/v1/runs/${runId}/events?afterSeq=${events.at(-1)?.seq ?? 0}&limit=1000`,
      );
      for (const e of page.body.events)
        if (e.commandId === commandId)
          events.push({ seq: e.seq, category: e.category, data: e.data });
      // Several readers at once on the first manager, one on the second.
      const envelopes = await Promise.all([read(t), read(t), read(t), read(second)]);
      for (const envelope of envelopes) {
        const { afterSeq, throughSeq } = envelope.aggregationWindow;
        assert.deepEqual(actual(envelope), expected(events, afterSeq, throughSeq), `batch ${b}`);
      }
      // A later window of the same scope, read as a client paging past the cap would.
      if (b % 5 === 4) {
        const from = events[Math.floor(events.length / 2)]!.seq;
        const windowed = await read(t, from);
        const { afterSeq, throughSeq } = windowed.aggregationWindow;
        assert.equal(afterSeq, from);
        assert.deepEqual(actual(windowed), expected(events, afterSeq, throughSeq), `window ${b}`);
      }
    }
    // Past the cap the window stops growing: the totals stay those of the capped window.
    const last = await read(t);
    assert.equal(last.eventsCapped, events.at(-1)!.seq > CAP);
    assert.deepEqual(actual(last), expected(events, 0, last.aggregationWindow.throughSeq));
  });
});
