/**
 * `LineIndex` (src/parser/lines.ts): the line of an offset as nginx counts
 * lines (one more after each LF), whatever the order of the lookups.
 */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { LineIndex } from '../../src/parser/lines.js';

/** The line by counting the LFs before `offset`. */
const counted = (text: string, offset: number): number => text.slice(0, offset).split('\n').length;

describe('LineIndex', () => {
  const text = Array.from({ length: 300 }, (_, i) => `${'x'.repeat(i % 7)}${i % 11 === 0 ? '\r' : ''}\n`).join('') + 'last';

  it('gives the line of every offset read in order, backwards, and by far jumps (a block closing far below its "{")', () => {
    const idx = new LineIndex(text);
    const offsets = [
      ...Array.from({ length: text.length + 2 }, (_, i) => i),
      ...Array.from({ length: text.length + 2 }, (_, i) => text.length + 1 - i),
      ...Array.from({ length: 500 }, (_, i) => (i * 7919) % (text.length + 1)),
    ];
    for (const o of offsets) assert.equal(idx.lineAt(o), counted(text, o), `offset ${o}`);
  });

  it('a text without LF is line 1 throughout; a lone CR does not end a line', () => {
    const idx = new LineIndex('a\rb c');
    assert.deepEqual([0, 2, 4, 9].map((o) => idx.lineAt(o)), [1, 1, 1, 1]);
  });
});
