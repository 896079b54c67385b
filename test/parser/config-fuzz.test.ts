/**
 * `jinx -t` on up to 3,000 mutated configurations (`test/helpers/config-fuzz.ts`:
 * byte flips, deleted and doubled tokens, numbers past nginx's limits,
 * unbalanced braces, up to 5,000 nested blocks, a file including itself, NUL
 * bytes, huge tokens, swapped lines) of the corpus and the default fixture,
 * with a fixed seed: each ends with exit 0 or 1 within its time, without a
 * fault of jinx's, and every `[emerg]` line names FILE:LINE unless it is one
 * nginx prints without a place. Every tenth also goes to the reference
 * nginx 1.30: it must accept and refuse the same ones, and name a place in
 * its first error where jinx does. No case starts after 40 s: on a machine
 * shared with other work the run covers fewer of the cases (about 3,000 fit
 * on an idle 2-core machine).
 */
import { strict as assert } from 'node:assert';
import { existsSync } from 'node:fs';
import { before, describe, it } from 'node:test';
import { runFuzz, sandboxUnavailable, type CaseNote, type FuzzSummary } from '../helpers/config-fuzz.js';

const CASES = 3000;
const ORACLE_CASES = 300;
/** Fewer checked cases than this means the machine is too busy for the run to say much. */
const MIN_CASES = 500;
/**
 * What nginx refuses and jinx accepts, known and listed in README
 * ("Differences from nginx", jinx -t against nginx on mutated files): hash
 * sizes other than the types hash, sizes too large for the machine's memory,
 * stream variables and stream log files.
 */
const KNOWN_DIFFERENCES: readonly RegExp[] = [
  /\| nginx: \[emerg\] could not build (server_names|variables|map|proxy_headers|fastcgi_params)_hash/,
  /\| nginx: \[emerg\] malloc\(\d+\) failed/,
  /\| nginx: \[emerg\] unknown ".*" variable$/,
  /\| nginx: \[emerg\] open\(\) ".*_stream_access\.log" failed/,
];
const show = (notes: readonly CaseNote[]): string => notes.slice(0, 10).map((n) => `#${n.id} ${n.unit} ${n.file} (${n.mutation}): ${n.detail}`).join('\n');

describe('jinx -t on mutated configurations (config fuzzer, seed 1)', { skip: sandboxUnavailable() ?? false }, () => {
  let summary: FuzzSummary;
  before(async () => {
    summary = await runFuzz({ cases: CASES, seed: 1, oracleCases: ORACLE_CASES, timeoutMs: 10_000, budgetMs: 40_000 });
  });

  it(`checks at least ${MIN_CASES} of ${CASES} mutations, every kind of mutation among them, in under a minute`, (t) => {
    t.diagnostic(`${summary.cases} cases in ${summary.ms} ms (slowest ${summary.slowestMs} ms), ${summary.accepted} accepted; `
      + `nginx: ${summary.oracle.agree} of ${summary.oracle.cases} verdicts alike, ${summary.oracle.firstErrorDiffers} with another first error`);
    assert.ok(summary.cases >= MIN_CASES, `only ${summary.cases} cases in ${summary.ms} ms`);
    for (const kind of ['flip', 'delete-token', 'duplicate-token', 'number', 'brace', 'nest', 'self-include', 'nul', 'huge-token', 'line-swap']) {
      assert.ok((summary.byMutation[kind] ?? 0) > 0, `no "${kind}" mutation`);
    }
    assert.ok(summary.accepted > 0 && summary.refused > 0, `${summary.accepted} accepted, ${summary.refused} refused`);
    assert.ok(summary.ms < 60_000, `took ${summary.ms} ms`);
  });

  it('no case hangs (10 s each), ends with a status other than 0 or 1, or meets a fault in jinx', () => {
    assert.equal(summary.hangs.length, 0, show(summary.hangs));
    assert.equal(summary.badStatus.length, 0, show(summary.badStatus));
    assert.equal(summary.crashes.length, 0, show(summary.crashes));
  });

  it('every [emerg] line names FILE:LINE, except the messages nginx prints without a place', () => {
    assert.equal(summary.placeless.length, 0, show(summary.placeless));
  });

  // the cases are as many as the time budget allows, so nginx's verdicts cannot be recorded: this one needs nginx
  it('accepts and refuses what nginx 1.30 does on every tenth case, with a place where nginx names one',
    { skip: existsSync('/opt/nginx-oracle/nginx') && process.env.JINX_NO_NGINX !== '1' ? false : 'no reference nginx 1.30 in /opt/nginx-oracle' }, (t) => {
      assert.ok(summary.oracle.cases + summary.oracle.nginxCrashed >= MIN_CASES / 10 - 1, `${summary.oracle.cases} compared`);
      const known = summary.oracle.disagreements.filter((d) => d.detail.startsWith('jinx: accepted |') && KNOWN_DIFFERENCES.some((k) => k.test(d.detail)));
      if (known.length > 0) t.diagnostic(`known differences (README): ${known.map((d) => `#${d.id} ${d.detail.slice(0, 160)}`).join('; ')}`);
      const unknown = summary.oracle.disagreements.filter((d) => !known.includes(d));
      assert.equal(unknown.length, 0, show(unknown));
      assert.equal(summary.oracle.placeMismatches.length, 0, show(summary.oracle.placeMismatches));
    });
});
