/**
 * The entry of the bundle bin/jinx runs (dist/bundle/jinx.cjs, made by
 * scripts/bundle.mjs, loaded by `launch.cts`). A worker of jinx's master
 * takes signals before anything else loads (`early-signals.ts`); the
 * command line (`main.ts`) and what it loads come after.
 */
import cluster from 'node:cluster';
import { trapEarlySignals } from './early-signals.js';
import { loadingModules, startOnBaselineCode } from './tiering.js';

/** The command line on `argv` (the arguments after the script); resolves to the exit status. */
export async function run(argv: readonly string[]): Promise<number> {
  if (cluster.isWorker) trapEarlySignals();
  startOnBaselineCode();
  const { main } = await loadingModules(() => import('./main.js'));
  return main(argv);
}
