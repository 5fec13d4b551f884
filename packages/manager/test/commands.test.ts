import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { runBody, startTestManager, TestRunner, type TestManager } from './helpers.js';

let t: TestManager;
before(async () => {
  t = await startTestManager();
  await t.configureProfile('builtin-a');
});
after(() => t.close());

async function newRun(): Promise<string> {
  const run = await t.api('POST', '/api/v1/runs', runBody());
  assert.equal(run.status, 201, run.raw);
  return run.body.runId;
}

const turn = (runId: string, prompt = 'hello', extra: Record<string, unknown> = {}) =>
  t.api('POST', `/api/v1/runs/${runId}/commands`, { type: 'turn', payload: { prompt }, ...extra });

describe('commands', () => {
  it('creates a turn as accepted and returns it by id', async () => {
    const runId = await newRun();
    const created = await turn(runId, 'write a haiku');
    assert.equal(created.status, 201, created.raw);
    assert.equal(created.body.state, 'accepted');
    assert.equal(created.body.seq, 1);
    assert.match(created.body.payloadHash, /^[0-9a-f]{64}$/);
    const fetched = await t.api('GET', `/api/v1/runs/${runId}/commands/${created.body.commandId}`);
    assert.equal(fetched.status, 200);
    assert.equal(fetched.body.payload.prompt, 'write a haiku');
    const other = await t.api(
      'GET',
      `/api/v1/runs/${await newRun()}/commands/${created.body.commandId}`,
    );
    assert.equal(other.status, 404, 'a command is only found under its own run');
  });

  it('returns the existing command for a repeated idempotency key and refuses a different payload', async () => {
    const runId = await newRun();
    const first = await turn(runId, 'same', { idempotencyKey: 'msg-42' });
    const again = await turn(runId, 'same', { idempotencyKey: 'msg-42' });
    assert.equal(first.status, 201);
    assert.equal(again.status, 200);
    assert.equal(again.body.commandId, first.body.commandId);
    const conflict = await turn(runId, 'different', { idempotencyKey: 'msg-42' });
    assert.equal(conflict.status, 409);
    assert.equal(conflict.body.failureKind, 'idempotency-conflict');
    assert.equal(conflict.body.details.commandId, first.body.commandId);
    const list = await t.api('GET', `/api/v1/runs/${runId}/commands`);
    assert.equal(list.body.commands.length, 1, 'no second command was created');
  });

  it('creates exactly one command when many clients race with one idempotency key', async () => {
    const runId = await newRun();
    const responses = await Promise.all(
      Array.from({ length: 20 }, () => turn(runId, 'race', { idempotencyKey: 'race-key' })),
    );
    const ids = new Set(responses.map((r) => r.body.commandId));
    assert.equal(ids.size, 1);
    assert.equal(responses.filter((r) => r.status === 201).length, 1);
    assert.equal(responses.filter((r) => r.status === 200).length, 19);
  });

  it('validates payloads: prompt for turn and steer, no credentials or history, no profile switch', async () => {
    const runId = await newRun();
    const post = (body: unknown) => t.api('POST', `/api/v1/runs/${runId}/commands`, body);
    for (const [body, kind] of [
      [{ type: 'turn', payload: {} }, 'schema-invalid'],
      [{ type: 'steer', payload: { prompt: '   ' } }, 'schema-invalid'],
      [{ type: 'launch', payload: { prompt: 'x' } }, 'schema-invalid'],
      [{ type: 'turn', payload: { prompt: 'x', cookies: 'a=b' } }, 'schema-invalid'],
      [{ type: 'turn', payload: { prompt: 'x', meta: { sessionToken: 'abc' } } }, 'schema-invalid'],
      [{ type: 'turn', payload: { prompt: 'x', history: [] } }, 'schema-invalid'],
      [
        { type: 'turn', payload: { prompt: 'x', backendProfile: 'builtin-b' } },
        'tenant-policy-denied',
      ],
      [{ type: 'turn', payload: { prompt: 'x'.repeat(300 * 1024) } }, 'schema-invalid'],
    ] as const) {
      const response = await post(body);
      assert.equal(
        response.body.failureKind,
        kind,
        `${JSON.stringify(body).slice(0, 80)} -> ${response.raw.slice(0, 200)}`,
      );
    }
    for (const key of ['prompt', 'message', 'text']) {
      const ok = await post({ type: 'steer', payload: { [key]: 'go on' } });
      assert.equal(ok.status, 201, ok.raw);
    }
  });

  it('moves accepted -> delivered on a runner poll, -> confirmed on ack (run -> running), -> completed on status', async () => {
    const runId = await newRun();
    const created = await turn(runId);
    const runner = new TestRunner(t, 'rnr-flow0001', runId);
    assert.equal((await runner.claim()).status, 200);
    assert.equal((await t.api('GET', `/api/v1/runs/${runId}`)).body.state, 'claimed');

    const polled = await runner.poll(0);
    assert.equal(polled.status, 200);
    assert.equal(polled.body.commands[0].state, 'delivered');
    assert.equal(polled.body.commands[0].runnerId, 'rnr-flow0001');

    const listing = await t.api('GET', `/api/v1/runs/${runId}/commands`);
    assert.equal(
      listing.body.commands[0].state,
      'delivered',
      'a listing without runnerId changes nothing',
    );

    const early = await runner.finish(created.body.commandId, 'completed');
    assert.equal(early.status, 409, 'completed needs an acknowledged command');

    const acked = await runner.ack(created.body.commandId);
    assert.equal(acked.body.state, 'confirmed');
    assert.equal((await t.api('GET', `/api/v1/runs/${runId}`)).body.state, 'running');
    const again = await runner.ack(created.body.commandId);
    assert.equal(again.status, 200, 'a repeated ack returns the command');
    assert.equal(again.body.confirmedAt, acked.body.confirmedAt);
    assert.equal((await runner.ack('cmd-nosuchcommand1')).status, 404);

    const done = await runner.finish(created.body.commandId, 'completed', {
      threadId: 'thr-1',
      turnId: 'turn-1',
    });
    assert.equal(done.status, 200, done.raw);
    assert.equal(done.body.state, 'completed');
    assert.equal(done.body.threadId, 'thr-1');
    assert.equal(
      (await t.api('GET', `/api/v1/runs/${runId}`)).body.state,
      'running',
      'the run stays open after a turn',
    );

    const repeat = await runner.finish(created.body.commandId, 'failed', {
      failureKind: 'backend-failed',
    });
    assert.equal(repeat.body.state, 'completed', 'a terminal command is returned unchanged');
    const late = await runner.ack(created.body.commandId);
    assert.equal(late.status, 409, late.raw);
    assert.equal(late.body.failureKind, 'state-conflict');

    const events = await t.api('GET', `/api/v1/runs/${runId}/events`);
    const terminal = events.body.events.filter((e: any) => e.category === 'terminal_status');
    assert.equal(terminal.length, 1);
    assert.equal(terminal[0].data.status, 'completed');
  });

  it('stores final events with the terminal status in one transaction; a retry adds nothing', async () => {
    const runId = await newRun();
    const created = await turn(runId);
    const commandId = created.body.commandId;
    const runner = new TestRunner(t, 'rnr-final001', runId);
    await runner.claim();
    await runner.poll();
    const finalEvents = [
      { key: 'a1:7', commandId, category: 'backend_status', name: 'turn.usage', data: { n: 1 } },
      {
        key: 'a1:8',
        commandId,
        category: 'assistant_message',
        data: { itemId: 'm1', text: 'all done\u0000', final: true, replyAuthority: true },
      },
    ];

    // Refused as a whole (not yet acknowledged): none of its events is stored either.
    const early = await runner.finish(commandId, 'completed', { events: finalEvents });
    assert.equal(early.status, 409, early.raw);
    const before = await t.api('GET', `/api/v1/runs/${runId}/events?limit=1000`);
    assert.ok(!before.body.events.some((e: any) => e.commandId === commandId));

    await runner.ack(commandId);
    // A client long-polling the result is answered by the commit that makes the command
    // terminal: the reply is there in that same answer.
    const waiting = t.api(
      'GET',
      `/api/v1/runs/${runId}/result?commandId=${commandId}&waitMs=10000`,
    );
    const done = await runner.finish(commandId, 'completed', { events: finalEvents });
    assert.equal(done.status, 200, done.raw);
    assert.equal(done.body.state, 'completed');
    const result = (await waiting).body;
    assert.equal(result.terminalStatus, 'completed', JSON.stringify(result));
    assert.equal(result.reply, 'all done\ufffd', 'U+0000 in event data replaced, as on append');

    const retried = await runner.finish(commandId, 'completed', { events: finalEvents });
    assert.equal(retried.status, 200, retried.raw);
    const events = (await t.api('GET', `/api/v1/runs/${runId}/events?limit=1000`)).body.events;
    const ofTurn = events.filter((e: any) => e.commandId === commandId);
    assert.deepEqual(
      ofTurn.map((e: any) => e.name ?? e.category),
      ['turn.usage', 'assistant_message', 'command.terminal'],
      'each final event once, before the terminal_status event',
    );

    // The append route's rules: no terminal_status from a runner, U+0000 only in event data,
    // and only the lease holder's events.
    const next = (await turn(runId, 'again')).body.commandId;
    await runner.poll(created.body.seq);
    await runner.ack(next);
    const forged = await runner.finish(next, 'completed', {
      events: [{ key: 'a1:9', commandId: next, category: 'terminal_status', data: {} }],
    });
    assert.equal(forged.status, 400, forged.raw);
    const nul = await runner.finish(next, 'failed', {
      message: 'bad\u0000',
      events: [{ key: 'a1:10', commandId: next, category: 'system', data: {} }],
    });
    assert.equal(nul.status, 400, nul.raw);
    const stranger = new TestRunner(t, 'rnr-final002', runId);
    const refused = await stranger.finish(commandId, 'completed', {
      events: [{ key: 'x:1', commandId, category: 'system', data: {} }],
    });
    assert.equal(refused.body.failureKind, 'runner-lease-conflict', refused.raw);
    const after = (await t.api('GET', `/api/v1/runs/${runId}/events?limit=1000`)).body.events;
    assert.equal(after.length, events.length, 'refused requests stored nothing');
  });

  it('ends a command once when terminal reports race their retries and a cancel', async () => {
    for (let round = 0; round < 4; round++) {
      const runId = await newRun();
      const commandId = (await turn(runId)).body.commandId;
      const runner = new TestRunner(t, `rnr-race${round}0001`, runId);
      await runner.claim();
      await runner.poll();
      await runner.ack(commandId);
      await runner.finish(commandId, 'running', { threadId: `thr-race-${round}` });
      const last = { key: `race${round}:1`, commandId, category: 'system', data: { round } };
      const answers = await Promise.all([
        ...Array.from({ length: 6 }, (_, i) =>
          runner.finish(commandId, i % 2 ? 'failed' : 'completed', {
            events: [last],
            ...(i % 2 ? { failureKind: 'backend-failed', message: 'gave up' } : {}),
          }),
        ),
        t.api('POST', `/api/v1/commands/${commandId}/cancel`, { reason: 'race' }),
      ]);
      for (const answer of answers) assert.equal(answer.status, 200, answer.raw);
      const command = (await t.api('GET', `/api/v1/runs/${runId}/commands/${commandId}`)).body;
      const events = (await t.api('GET', `/api/v1/runs/${runId}/events?limit=1000`)).body.events;
      const terminal = events.filter((e: any) => e.category === 'terminal_status');
      assert.equal(terminal.length, 1, 'one terminal_status event whoever won');
      assert.equal(terminal[0].data.status, command.state, 'the event and the command agree');
      assert.ok(
        answers.every((a) => a.body.state === command.state),
        'every answer shows the one outcome',
      );
      assert.ok(events.filter((e: any) => e.key === last.key).length <= 1, 'a key is stored once');
      assert.deepEqual(
        events.map((e: any) => e.seq),
        events.map((_: unknown, i: number) => i + 1),
        'seqs stay contiguous',
      );
      if (command.state !== 'cancelled') {
        assert.equal(terminal[0].data.threadId, `thr-race-${round}`, 'thread from the command');
        assert.equal(terminal[0].data.via, 'runner');
        assert.ok(
          events.findIndex((e: any) => e.key === last.key) <
            events.findIndex((e: any) => e.category === 'terminal_status'),
          "the runner's last event precedes the terminal event",
        );
      }
    }
  });

  it('lets only the lease owner take delivery, acknowledge and report', async () => {
    const runId = await newRun();
    const created = await turn(runId);
    const owner = new TestRunner(t, 'rnr-owner001', runId);
    const stranger = new TestRunner(t, 'rnr-strange1', runId);
    await owner.claim();
    assert.equal((await stranger.poll()).body.failureKind, 'runner-lease-conflict');
    const untouched = await t.api(
      'GET',
      `/api/v1/runs/${runId}/commands/${created.body.commandId}`,
    );
    assert.equal(untouched.body.state, 'accepted', 'a refused poll delivers nothing');
    assert.equal(untouched.body.runnerId, null);
    assert.equal(
      (await stranger.ack(created.body.commandId)).body.failureKind,
      'runner-lease-conflict',
    );
    await owner.poll();
    await owner.ack(created.body.commandId);
    assert.equal(
      (await stranger.finish(created.body.commandId, 'completed')).body.failureKind,
      'runner-lease-conflict',
    );
    assert.equal(
      (await stranger.append([{ key: 'k1', category: 'system', data: {} }])).body.failureKind,
      'runner-lease-conflict',
    );
  });

  it("records a turn's thread and turn ids only for the lease owner of an acknowledged command", async () => {
    const runId = await newRun();
    const created = await turn(runId);
    const id = created.body.commandId;
    const owner = new TestRunner(t, 'rnr-progress', runId);
    const stranger = new TestRunner(t, 'rnr-progres2', runId);
    await owner.claim();
    await owner.poll();
    const early = await owner.finish(id, 'running', { threadId: 'thr-early' });
    assert.equal(early.status, 409, 'progress before the ack is refused');
    assert.equal(early.body.failureKind, 'state-conflict');
    await owner.ack(id);
    const foreign = await stranger.finish(id, 'running', { threadId: 'thr-foreign' });
    assert.equal(foreign.body.failureKind, 'runner-lease-conflict');
    const progress = await owner.finish(id, 'running', { threadId: 'thr-1', turnId: 'turn-1' });
    assert.equal(progress.status, 200, progress.raw);
    assert.equal(progress.body.state, 'confirmed');
    assert.equal(progress.body.threadId, 'thr-1');
    assert.equal(progress.body.turnId, 'turn-1');
    const again = await owner.finish(id, 'running', { turnId: 'turn-2' });
    assert.equal(again.body.threadId, 'thr-1', 'an id not sent is kept');
    assert.equal(again.body.turnId, 'turn-2');
    assert.equal((await owner.finish(id, 'completed')).body.state, 'completed');
    const late = await owner.finish(id, 'running', { threadId: 'thr-late' });
    assert.equal(late.status, 200, 'a late report answers the terminal command');
    assert.equal(late.body.state, 'completed');
    assert.equal(late.body.threadId, 'thr-1', 'and changes nothing');
  });

  it('records failed and blocked outcomes with registered failure kinds only', async () => {
    const runId = await newRun();
    const a = await turn(runId, 'a');
    const b = await turn(runId, 'b');
    const runner = new TestRunner(t, 'rnr-fail0001', runId);
    await runner.claim();
    await runner.poll();
    // delivered -> failed is allowed without an ack (for example, assembly failed).
    const failed = await runner.finish(a.body.commandId, 'failed', {
      failureKind: 'provider-auth-failed',
      message: '401 from provider',
    });
    assert.equal(failed.body.state, 'failed');
    assert.equal(failed.body.failureKind, 'provider-auth-failed');
    const bogus = await runner.finish(b.body.commandId, 'failed', { failureKind: 'made-up-kind' });
    assert.equal(bogus.status, 400);
    const blockedNoKind = await runner.finish(b.body.commandId, 'blocked');
    assert.equal(blockedNoKind.status, 400);
    const blocked = await runner.finish(b.body.commandId, 'blocked', {
      failureKind: 'required-skill-unavailable',
    });
    assert.equal(blocked.body.state, 'blocked');
  });

  it('a command blocked by its assembly blocks the run at once, naming the missing skills', async () => {
    const runId = await newRun();
    const a = await turn(runId, 'a');
    const b = await turn(runId, 'b');
    const runner = new TestRunner(t, 'rnr-block001', runId);
    await runner.claim();
    await runner.poll();
    const details = { required: ['review', 'deploy'], missing: ['deploy'], available: ['review'] };
    const blocked = await runner.finish(a.body.commandId, 'blocked', {
      failureKind: 'required-skill-unavailable',
      message: 'required skill deploy not found',
      details,
    });
    assert.equal(blocked.status, 200, blocked.raw);
    // No run report from the runner: the run is blocked by the command's own report.
    const run = (await t.api('GET', `/api/v1/runs/${runId}`)).body;
    assert.equal(run.state, 'blocked');
    assert.equal(run.failureKind, 'required-skill-unavailable');
    const result = (await t.api('GET', `/api/v1/runs/${runId}/commands/${a.body.commandId}/result`))
      .body;
    assert.equal(result.terminalStatus, 'blocked');
    assert.deepEqual(result.blocker.details, details);
    const other = (await t.api('GET', `/api/v1/runs/${runId}/commands/${b.body.commandId}`)).body;
    assert.equal(other.state, 'blocked', 'the queued command converges with its run');
    const late = await runner.runStatus('blocked', { failureKind: 'required-skill-unavailable' });
    assert.ok(late.status < 500, "the runner's own run report afterwards is harmless");

    // A blocked command of another kind does not end the run.
    const runId2 = await newRun();
    const c = await turn(runId2, 'c');
    const runner2 = new TestRunner(t, 'rnr-block002', runId2);
    await runner2.claim();
    await runner2.poll();
    const oversized = await runner2.finish(c.body.commandId, 'blocked', {
      failureKind: 'secret-unavailable',
      details: { keys: Array.from({ length: 201 }, () => 'k') },
    });
    assert.equal(oversized.status, 400, 'details are bounded');
    await runner2.finish(c.body.commandId, 'blocked', { failureKind: 'secret-unavailable' });
    assert.notEqual((await t.api('GET', `/api/v1/runs/${runId2}`)).body.state, 'blocked');
  });

  it('expires commands that no runner took within their TTL', async () => {
    const short = await startTestManager({ env: { SVC_COMMAND_TTL_MS: '1000' } });
    try {
      await short.configureProfile('builtin-a');
      const run = await short.api('POST', '/api/v1/runs', runBody());
      const created = await short.api('POST', `/api/v1/runs/${run.body.runId}/commands`, {
        type: 'turn',
        payload: { prompt: 'x' },
      });
      // Age the command instead of sleeping.
      await short.manager.store.db
        .updateTable('commands')
        .set({ expires_at: new Date(Date.now() - 1000) })
        .where('command_id', '=', created.body.commandId)
        .execute();
      const fetched = await short.api(
        'GET',
        `/api/v1/runs/${run.body.runId}/commands/${created.body.commandId}`,
      );
      assert.equal(fetched.body.state, 'expired');
      assert.equal(fetched.body.failureKind, 'command-expired');
      const runner = new TestRunner(short, 'rnr-late0001', run.body.runId);
      await runner.claim();
      const polled = await runner.poll();
      assert.equal(
        polled.body.commands[0].state,
        'expired',
        'an expired command is never delivered',
      );
      const result = await short.api(
        'GET',
        `/api/v1/runs/${run.body.runId}/commands/${created.body.commandId}/result`,
      );
      assert.equal(result.body.status, 'expired', result.raw);
      assert.equal(result.body.completed, false);

      // A client long-polling a command's result hears of its expiry when it commits.
      const later = await short.api('POST', `/api/v1/runs/${run.body.runId}/commands`, {
        type: 'turn',
        payload: { prompt: 'y' },
      });
      const started = Date.now();
      const waiting = short.api(
        'GET',
        `/api/v1/runs/${run.body.runId}/result?commandId=${later.body.commandId}&waitMs=20000`,
      );
      await short.manager.store.db
        .updateTable('commands')
        .set({ expires_at: new Date(Date.now() - 1000) })
        .where('command_id', '=', later.body.commandId)
        .execute();
      await short.api('GET', `/api/v1/runs/${run.body.runId}/commands/${later.body.commandId}`);
      const woken = await waiting;
      assert.equal(woken.body.status, 'expired', woken.raw);
      const waited = Date.now() - started;
      assert.ok(waited < 10_000, `the result long-poll returned after ${waited} ms, not at once`);
    } finally {
      await short.close();
    }
  });

  it('refuses new commands on a terminal run', async () => {
    const runId = await newRun();
    await t.api('POST', `/api/v1/runs/${runId}/cancel`, {});
    const refused = await turn(runId);
    assert.equal(refused.status, 409);
    assert.equal(refused.body.failureKind, 'run-terminal');
  });

  it('targets a steer at the active turn', async () => {
    const runId = await newRun();
    const active = await turn(runId);
    const steer = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'steer',
      payload: { prompt: 'shorter please' },
    });
    assert.equal(steer.body.targetCommandId, active.body.commandId);
    assert.equal(steer.body.steerDelivery.acknowledged, false);
    const wrong = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
      type: 'steer',
      payload: { prompt: 'x', targetCommandId: steer.body.commandId },
    });
    assert.equal(wrong.status, 400, 'a steer can only target a turn');
  });

  it('wakes a long-polling runner as soon as a command is created', async () => {
    const runId = await newRun();
    const runner = new TestRunner(t, 'rnr-longpol1', runId);
    await runner.claim();
    const started = Date.now();
    const polling = runner.poll(0, 10_000);
    await new Promise((r) => setTimeout(r, 100));
    await turn(runId, 'wake up');
    const polled = await polling;
    const waited = Date.now() - started;
    assert.equal(polled.body.commands.length, 1);
    assert.ok(waited < 5000, `poll returned after ${waited} ms, not at its 10 s bound`);
  });
});
