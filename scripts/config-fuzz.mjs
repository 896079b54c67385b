#!/usr/bin/env node
// The config fuzzer (test/helpers/config-fuzz.ts) from the command line, as root:
//
//     npm run -s build && node scripts/config-fuzz.mjs [--cases N] [--seed N] [--oracle N] [--budget MS] [--timeout MS] [--show]
//
// makes the sandbox (unshare: read-only mounts but a temp directory, a network
// namespace with loopback only), runs the cases in it, removes the temp
// directory and prints the summary as JSON (--show: also every case's lines).
// `--oracle N` sends N of the cases to /opt/nginx-oracle/nginx as well.
// Inside the sandbox it is started again with `--inside ROOT`.
import { runFuzz, runInside, sandboxUnavailable } from '../dist/test/helpers/config-fuzz.js';

const argv = process.argv.slice(2);
const value = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : fallback;
};
const opts = {
  cases: value('--cases', 3000), seed: value('--seed', 1), oracleCases: value('--oracle', 0),
  timeoutMs: value('--timeout', 10_000), budgetMs: value('--budget', 3_600_000), show: argv.includes('--show'),
};
const inside = argv.indexOf('--inside');
if (inside >= 0) {
  process.stdout.write(JSON.stringify(await runInside(argv[inside + 1], opts)) + '\n');
} else {
  const why = sandboxUnavailable();
  if (why) {
    process.stderr.write(`${why}\n`);
    process.exitCode = 1;
  } else {
    process.stdout.write(JSON.stringify(await runFuzz(opts), null, 1) + '\n');
  }
}
