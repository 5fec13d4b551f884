import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { LaneGate } from '../src/http/lane-gate.js';

/**
 * A lane's places and its queue: a request gets a place, waits in line for at most the
 * budget, or is refused at once when it could not get one within the budget anyway.
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

  it('refuses a queued request whose place does not come within its budget, then', async () => {
    const gate = new LaneGate(1, BUDGET);
    assert.equal(gate.enter(), true);
    const started = performance.now();
    const queued = gate.enter();
    assert.ok(queued instanceof Promise, 'a place came free a moment ago: it may queue');
    assert.equal(await queued, false);
    const waited = performance.now() - started;
    assert.ok(waited >= BUDGET - 2 && waited < BUDGET * 4, `refused after ${waited.toFixed(0)} ms`);
    assert.equal(gate.queued, 0);
    gate.close();
  });

  it('serves a queued request when its place comes within the budget', async () => {
    const gate = new LaneGate(1, BUDGET);
    assert.equal(gate.enter(), true);
    const queued = gate.enter();
    assert.ok(queued instanceof Promise);
    await sleep(BUDGET / 4);
    gate.leave(BUDGET / 4);
    assert.equal(await queued, true);
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

  it('lets a burst after a quiet spell queue: a lane that just filled is not stuck', async () => {
    const gate = new LaneGate(2, BUDGET);
    await sleep(BUDGET * 1.5);
    assert.equal(gate.enter(), true);
    assert.equal(gate.enter(), true);
    const third = gate.enter();
    assert.ok(third instanceof Promise, 'queued, not refused: no place has had time to come free');
    gate.leave(1);
    assert.equal(await third, true);
    gate.close();
  });

  it('refuses at once a request that could not get a place within the budget by the line ahead', () => {
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
