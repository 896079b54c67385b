/**
 * `jinx -t` on 2,500 mutated configurations (`test/helpers/config-fuzz.ts`:
 * byte flips, deleted and doubled tokens, numbers past nginx's limits,
 * unbalanced braces, up to 5,000 nested blocks, a file including itself, NUL
 * bytes, huge tokens, swapped lines) of the corpus and the default fixture,
 * with a fixed seed: each ends with exit 0 or 1 within its time, without a
 * fault of jinx's, and every `[emerg]` line names FILE:LINE unless it is one
 * nginx prints without a place. On 250 of them the reference nginx 1.30
 * runs too: it must accept and refuse the same ones, and name a place in
 * its first error where jinx does.
 */
import { strict as assert } from 'node:assert';
import { existsSync } from 'node:fs';
import { before, describe, it } from 'node:test';
import { runFuzz, sandboxUnavailable, type CaseNote, type FuzzSummary } from '../helpers/config-fuzz.js';

const CASES = 2500;
const ORACLE_CASES = 250;
const show = (notes: readonly CaseNote[]): string => notes.slice(0, 10).map((n) => `#${n.id} ${n.unit} ${n.file} (${n.mutation}): ${n.detail}`).join('\n');

describe('jinx -t on mutated configurations (config fuzzer, seed 1)', { skip: sandboxUnavailable() ?? false }, () => {
  let summary: FuzzSummary;
  before(async () => {
    summary = await runFuzz({ cases: CASES, seed: 1, oracleCases: ORACLE_CASES, timeoutMs: 10_000 });
  });

  // (how fast: bench/config-fuzz.ts)
  it(`checks ${CASES} mutations, every kind of mutation among them`, () => {
    assert.equal(summary.cases, CASES);
    for (const kind of ['flip', 'delete-token', 'duplicate-token', 'number', 'brace', 'nest', 'self-include', 'nul', 'huge-token', 'line-swap']) {
      assert.ok((summary.byMutation[kind] ?? 0) > 0, `no "${kind}" mutation`);
    }
    assert.ok(summary.accepted > 0 && summary.refused > 0, `${summary.accepted} accepted, ${summary.refused} refused`);
  });

  it('no case hangs (10 s each), ends with a status other than 0 or 1, or meets a fault in jinx', () => {
    assert.equal(summary.hangs.length, 0, show(summary.hangs));
    assert.equal(summary.badStatus.length, 0, show(summary.badStatus));
    assert.equal(summary.crashes.length, 0, show(summary.crashes));
  });

  it('every [emerg] line names FILE:LINE, except the messages nginx prints without a place', () => {
    assert.equal(summary.placeless.length, 0, show(summary.placeless));
  });

  it(`accepts and refuses what nginx 1.30 does on ${ORACLE_CASES} of them, with a place where nginx names one`,
    { skip: existsSync('/opt/nginx-oracle/nginx') ? false : 'no reference nginx 1.30 in /opt/nginx-oracle' }, () => {
      assert.ok(summary.oracle.cases + summary.oracle.nginxCrashed >= ORACLE_CASES * 0.9, `${summary.oracle.cases} compared`);
      assert.equal(summary.oracle.disagreements.length, 0, show(summary.oracle.disagreements));
      assert.equal(summary.oracle.placeMismatches.length, 0, show(summary.oracle.placeMismatches));
    });
});
