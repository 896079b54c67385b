/**
 * `LevelMerge` (`src/config/spec.ts`): a module's merge made once for a
 * level and the levels below it that set none of the slots it read, made
 * again at a level that sets one, and never shared from a level whose
 * result read a slot that does not inherit and was set there.
 */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { ConfigScope } from '../../src/config/scope.js';
import { ConfChain, LevelConf, LevelMerge, listSlot, slot } from '../../src/config/spec.js';
import { VariableRegistry } from '../../src/config/variables.js';

const loc = { file: 'nginx.conf', line: 1 };
const scope = new ConfigScope('/p/', '/p/', new VariableRegistry([]), { lookup: () => undefined }, true);

const level = slot('level', 1);
const other = slot('other', 'x');
const ownOnly = slot('own only', false, false);
const entries = listSlot<string>('entries');

/** Below a main level: http → server → location → nested location, each level's settings given by `set`. */
function chains(set: ((l: LevelConf) => void)[]): ConfChain[] {
  const out: ConfChain[] = [];
  let parent: ConfChain | undefined = new ConfChain(new LevelConf(), undefined);
  for (const s of set) {
    const conf = new LevelConf();
    s(conf);
    parent = new ConfChain(conf, parent);
    out.push(parent);
  }
  return out;
}

describe('LevelMerge', () => {
  it('a level that sets none of what the merge read shares the result of the level above', () => {
    let runs = 0;
    const merge = new LevelMerge((c) => {
      runs++;
      return { level: c.get(level), entries: c.list(entries) };
    });
    const [http, server, location] = chains([(l) => l.set(level, 5, loc), (l) => l.set(other, 'y', loc), () => undefined]);
    // the innermost first: the levels above are merged first, outermost first
    const innermost = merge.of(location!, scope);
    assert.equal(merge.of(server!, scope), innermost);
    assert.equal(merge.of(http!, scope), innermost);
    assert.deepEqual(innermost, { level: 5, entries: [] });
    // one merge for the three levels
    assert.equal(runs, 1);
  });

  it('a level that sets a slot the merge read gets its own, and so do the levels below it', () => {
    let runs = 0;
    const merge = new LevelMerge((c) => {
      runs++;
      return { level: c.get(level), entries: c.list(entries) };
    });
    const [http, server, location, nested] = chains([
      (l) => l.set(level, 5, loc), (l) => l.append(entries, 'a', loc), (l) => l.set(level, 7, loc), () => undefined,
    ]);
    assert.deepEqual(merge.of(http!, scope), { level: 5, entries: [] });
    assert.deepEqual(merge.of(server!, scope), { level: 5, entries: ['a'] });
    assert.deepEqual(merge.of(location!, scope), { level: 7, entries: ['a'] });
    assert.equal(merge.of(nested!, scope), merge.of(location!, scope));
    assert.equal(runs, 3);
  });

  it('the top of the tree (main) is not merged for a level below it: what a merge keeps is not kept for main', () => {
    const kept: number[] = [];
    const merge = new LevelMerge((c) => {
      kept.push(c.get(level));
      return c.get(level);
    });
    const [http] = chains([(l) => l.set(level, 5, loc)]);
    assert.equal(merge.of(http!, scope), 5);
    assert.deepEqual(kept, [5]);
  });

  it('a result that read a non-inheriting slot set at its level is not shared below', () => {
    const merge = new LevelMerge((c) => ({ own: c.get(ownOnly), level: c.get(level) }));
    const [server, location] = chains([(l) => l.set(ownOnly, true, loc), () => undefined]);
    assert.deepEqual(merge.of(server!, scope), { own: true, level: 1 });
    assert.deepEqual(merge.of(location!, scope), { own: false, level: 1 });
  });

  it('a merge reads the same through a chain after the merge map leaves out non-inheriting slots', () => {
    const [http, server] = chains([(l) => l.set(level, 3, loc), (l) => l.set(ownOnly, true, loc)]);
    assert.equal(server!.get(level), 3);
    assert.equal(server!.get(ownOnly), true);
    assert.equal(http!.get(ownOnly), false);
  });
});
