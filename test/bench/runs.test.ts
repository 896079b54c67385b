import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { report, type RunFile } from '../../bench/runs.js';

const MiB = 1024 * 1024;

/** A run file of proxy.ts: every server's three rounds at `rps` req/s (×0.9, ×1, ×1.1), its p99 and peak. */
function runFile(protocol: 'h1' | 'h2', servers: Record<string, Record<number, { rps: number; p99Ms: number; peakMiB: number }>>, idleMiB: Record<string, number>): RunFile {
  const runs = [];
  for (const [target, sizes] of Object.entries(servers)) {
    for (const [size, f] of Object.entries(sizes)) {
      for (const [round, factor] of [[0, 0.5], [1, 0.9], [2, 1], [3, 1.1]] as const) {
        runs.push({ target, size: Number(size), round, counted: true, rps: f.rps * factor, p99Ms: f.p99Ms, peakRssBytes: f.peakMiB * MiB });
      }
    }
  }
  return { options: { protocol }, idleRssBytes: Object.fromEntries(Object.entries(idleMiB).map(([t, m]) => [t, m * MiB])), runs };
}

describe('bench/runs.ts: the figures of several proxy bench runs against issue 17', () => {
  const first = runFile('h1', {
    jinx: { 100: { rps: 16000, p99Ms: 10, peakMiB: 120 }, [MiB]: { rps: 700, p99Ms: 200, peakMiB: 140 } },
    bare: { 100: { rps: 20000, p99Ms: 5, peakMiB: 110 }, [MiB]: { rps: 700, p99Ms: 600, peakMiB: 150 } },
    nginx: { 100: { rps: 60000, p99Ms: 2, peakMiB: 11 }, [MiB]: { rps: 700, p99Ms: 150, peakMiB: 14 } },
    fastify: { 100: { rps: 11000, p99Ms: 13, peakMiB: 113 }, [MiB]: { rps: 560, p99Ms: 600, peakMiB: 150 } },
  }, { jinx: 59, nginx: 11, bare: 59, fastify: 70 });
  // a second run on a machine twice as fast: the ratios within each run are what count
  const second = runFile('h1', {
    jinx: { 100: { rps: 36000, p99Ms: 8, peakMiB: 130 }, [MiB]: { rps: 1400, p99Ms: 100, peakMiB: 130 } },
    bare: { 100: { rps: 40000, p99Ms: 5, peakMiB: 110 }, [MiB]: { rps: 1400, p99Ms: 600, peakMiB: 150 } },
    nginx: { 100: { rps: 120000, p99Ms: 2, peakMiB: 11 }, [MiB]: { rps: 1400, p99Ms: 100, peakMiB: 14 } },
    fastify: { 100: { rps: 22000, p99Ms: 13, peakMiB: 113 }, [MiB]: { rps: 1120, p99Ms: 600, peakMiB: 150 } },
  }, { jinx: 61, nginx: 11, bare: 59, fastify: 70 });
  const h2 = runFile('h2', { jinx: { 100: { rps: 18000, p99Ms: NaN, peakMiB: 150 } }, nginx: { 100: { rps: 45000, p99Ms: NaN, peakMiB: 14 } } }, { jinx: 60, nginx: 11 });
  const text = report([first, second, h2]);

  it("prints each server's median over the runs of its per-run median req/s and peak RSS", () => {
    assert.match(text, /100 B:\n\s+jinx\s+26,000 req\/s\s+p99\s+9\.0 ms\s+peak\s+125\.0 MiB/);
    assert.match(text, /h2 100 B:\n\s+jinx\s+18,000 req\/s/);
  });

  it('takes each ratio within a run, then their median', () => {
    // 16000/20000 = 0.80 and 36000/40000 = 0.90: median 0.85 (the pooled medians would give 26000/30000 = 0.87)
    assert.match(text, /jinx\/bare: req\/s 0\.85×/);
    assert.match(text, /idle RSS: jinx 60\.0 MiB, nginx 11\.0 MiB, bare 59\.0 MiB, fastify 70\.0 MiB/);
  });

  it("says which of issue 17's targets the figures meet", () => {
    assert.match(text, /not met\s+peak RSS at most 100 MiB in every scenario: highest 150\.0 MiB/);
    assert.match(text, /met\s+idle RSS at most 60 MiB: 60\.0 MiB/);
    assert.match(text, /met\s+1 MiB req\/s at least 1\.0× fastify: 1\.25×/);
    assert.match(text, /met\s+1 MiB p99 at most 2× nginx's: 1\.17×/);
    assert.match(text, /not met\s+100 B req\/s at least 1\.0× bare: 0\.85×/);
    assert.match(text, /no data\s+h2 100 B req\/s at least 1\.0× bare: no bare in these runs/);
  });
});
