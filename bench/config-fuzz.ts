/**
 * How fast the config fuzzer checks its mutations (issue 14 asks for a few
 * thousand in under a minute): runs `runFuzz` (test/helpers/config-fuzz.ts)
 * on 2,500 cases with seed 1 and no reference nginx, and prints the cases,
 * the wall time and the rate. Its correctness is tested by
 * test/parser/config-fuzz.test.ts; its speed is measured here, on a quiet
 * machine.
 *
 *   node dist/bench/config-fuzz.js [--cases N]
 */
import { runFuzz } from '../test/helpers/config-fuzz.js';

const at = process.argv.indexOf('--cases');
const cases = at > 0 ? Number(process.argv[at + 1]) : 2500;
const summary = await runFuzz({ cases, seed: 1, oracleCases: 0, timeoutMs: 10_000 });
console.log(`config fuzzer: ${summary.cases} cases in ${(summary.ms / 1000).toFixed(1)} s (${Math.round(summary.cases / (summary.ms / 1000))} cases/s; target: 2,500 in under 60 s)`);
