import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { TurnBudget } from '../../src/runtime/turn-budget.js';

describe('turns of the event loop shared by response bodies', () => {
  it('lets a turn move body bytes up to its budget, then tells the response that crossed it to wait', () => {
    const turns = new TurnBudget(100);
    assert.equal(turns.spend(60), true);
    assert.equal(turns.spend(39), true);
    assert.equal(turns.spend(1), false);
    assert.equal(turns.spend(10), false);
  });

  it('gives the next turn a fresh budget', async () => {
    const turns = new TurnBudget(100);
    assert.equal(turns.spend(150), false);
    await nextTurn();
    assert.equal(turns.spend(50), true);
  });

  it('resumes waiting responses in a later turn, first paused first, as many as that turn\'s budget takes', async () => {
    const turns = new TurnBudget(100);
    const resumed: string[] = [];
    turns.spend(100);
    for (const name of ['a', 'b', 'c', 'd']) {
      turns.wait(() => {
        resumed.push(name);
        // each resumed response reads 40 bytes in its turn
        if (!turns.spend(40)) turns.wait(() => resumed.push(`${name} again`));
      });
    }
    assert.deepEqual(resumed, [], 'nothing resumes in the turn that spent the budget');
    await nextTurn();
    assert.deepEqual(resumed, ['a', 'b', 'c'], 'a, b and c spent 120 bytes: d waits for the turn after');
    await nextTurn();
    assert.deepEqual(resumed, ['a', 'b', 'c', 'd', 'c again']);
  });
});
