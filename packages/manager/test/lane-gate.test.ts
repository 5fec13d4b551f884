import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { LaneGate, STUCK_BUDGETS } from '../src/http/lane-gate.js';

/**
 * A lane's places and its queue: a request is served, or refused at once; a request the gate
 * lets queue is not refused later for a guess that was off, only when the places are stuck.
 */
describe('a lane gate', () => {
  const BUDGET = 40;

  it('gives free places at once and no more than it has', () => {
    const gate = new LaneGate(2, BUDGET);
    assert.equal(gate.enter(), true);
    assert.equal(gate.enter(), true);
    assert.equal(gate.busy, 2);
    const third = gate.enter();
    assert.ok(third instanceof Promise, 'the third waits for a place');
    gate.close();
  });

  it('serves a queued request whose place comes after its budget instead of refusing it then', async () => {
    const gate = new LaneGate(1, BUDGET);
    assert.equal(gate.enter(), true);
    const queued = gate.enter();
    assert.ok(queued instanceof Promise, 'a place freed just now: it may queue');
    let outcome: boolean | undefined;
    void queued.then((v) => (outcome = v));
    await sleep(BUDGET * 2);
    assert.equal(outcome, undefined, 'still waiting past the budget, not refused');
    const started = performance.now();
    gate.leave(BUDGET * 2);
    assert.equal(await queued, true, 'served when the place came');
    assert.ok(performance.now() - started < BUDGET);
    assert.equal(gate.busy, 1);
    gate.close();
  });

  it('refuses at once while every place is held and none came free within the budget', async () => {
    const gate = new LaneGate(2, BUDGET);
    assert.equal(gate.enter(), true);
    assert.equal(gate.enter(), true);
    await sleep(BUDGET * 1.5);
    const started = performance.now();
    assert.equal(gate.enter(), false, 'refused on arrival, not after a wait');
    assert.ok(performance.now() - started < 5);
    // A place comes free: the lane takes requests again.
    gate.leave(BUDGET * 1.5);
    assert.equal(gate.enter(), true);
    gate.close();
  });

  it('refuses newcomers at once once the head of the line has waited the budget', async () => {
    const gate = new LaneGate(1, BUDGET);
    assert.equal(gate.enter(), true);
    const head = gate.enter();
    assert.ok(head instanceof Promise);
    await sleep(BUDGET * 1.5);
    assert.equal(gate.enter(), false);
    gate.leave(BUDGET * 1.5);
    assert.equal(await head, true);
    gate.close();
  });

  it('refuses a queued request only once its places have been stuck for many budgets', async () => {
    const gate = new LaneGate(1, BUDGET);
    assert.equal(gate.enter(), true);
    const started = performance.now();
    const queued = gate.enter();
    assert.ok(queued instanceof Promise);
    assert.equal(await queued, false);
    const waited = performance.now() - started;
    assert.ok(waited >= BUDGET * STUCK_BUDGETS - 2, `refused after ${waited.toFixed(0)} ms`);
    assert.equal(gate.queued, 0);
    gate.close();
  });

  it('refuses at once a request that could not get a place within the budget by the line ahead', async () => {
    const gate = new LaneGate(1, BUDGET);
    assert.equal(gate.enter(), true);
    // A place held about three budgets (the mean moves by a 32nd of each hold): the next in
    // line would wait past the budget, though a place came free a moment ago.
    gate.leave(BUDGET * 3 * 32);
    assert.equal(gate.enter(), true);
    assert.equal(gate.enter(), false);
    gate.close();
  });
});
