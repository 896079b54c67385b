/**
 * limit_req under a bounded burst, differential against nginx: requests
 * past `burst` are refused (503, `limiting requests, excess: N by zone
 * "NAME"`), those within it pass at once with `nodelay` or are delayed
 * (`delaying request, excess: N, by zone "NAME"`) by the time the rate
 * takes to drain their excess. The excess in a line depends on the
 * milliseconds between requests: lines compare with it rounded to a whole
 * request, and the delays within a tolerance.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { differential, httpConf, type SideResult } from '../helpers/differential.js';

/** A request's error-log line with its excess rounded to a whole request, the lines sorted (concurrent requests log in any order). */
function roundedLines<T>(side: SideResult<T>): string[] {
  return side.errorLog
    .map((l) => l.replace(/excess: (\d+\.\d{3})/, (_m, n: string) => `excess: ~${Math.round(Number(n))}`))
    .sort();
}

describe('limit_req (differential)', () => {
  after(cleanup);

  it('refuses the requests past a nodelay burst and logs each refusal', async () => {
    const run = await differential({
      files: { 'html/a': 'a\n' },
      conf: ({ port }) => httpConf(`  limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;
  server {
    listen 127.0.0.1:${port};
    location = /a { limit_req zone=one burst=2 nodelay; }
  }`),
    }, async (s) => {
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) statuses.push((await s.get('/a')).status);
      return statuses;
    });
    assert.deepEqual(run.nginx.result, [200, 200, 200, 503, 503, 503]);
    assert.deepEqual(run.jinx.result, run.nginx.result);
    assert.deepEqual(roundedLines(run.jinx), roundedLines(run.nginx));
  });

  it('delays the requests within the burst by their excess over the rate, and refuses the rest', async () => {
    const run = await differential({
      files: { 'html/a': 'a\n' },
      conf: ({ port }) => httpConf(`  limit_req_zone $binary_remote_addr zone=two:1m rate=5r/s;
  server {
    listen 127.0.0.1:${port};
    location = /a { limit_req zone=two burst=2; }
  }`),
    }, async (s) => {
      const startedMs = Date.now();
      const answers = await Promise.all([0, 1, 2, 3, 4].map(async () => {
        const snap = await s.get('/a');
        return { status: snap.status, ms: Date.now() - startedMs };
      }));
      const passed = answers.filter((a) => a.status === 200).map((a) => a.ms).sort((x, y) => x - y);
      return { refused: answers.filter((a) => a.status === 503).length, passedMs: passed };
    });
    assert.equal(run.nginx.result.refused, 2);
    assert.equal(run.jinx.result.refused, run.nginx.result.refused);
    // one at once, then one per 200 ms of the rate: within 150 ms of nginx's
    assert.equal(run.jinx.result.passedMs.length, run.nginx.result.passedMs.length);
    run.jinx.result.passedMs.forEach((ms, i) => {
      assert.ok(Math.abs(ms - run.nginx.result.passedMs[i]!) < 150, `request ${i + 1} passed after ${ms} ms, nginx's after ${run.nginx.result.passedMs[i]} ms`);
    });
    assert.deepEqual(roundedLines(run.jinx), roundedLines(run.nginx));
  });
});
