/**
 * The program `bin/jinx` starts node on: the command line (`main`) with
 * the arguments after the script, its result as the exit code. A worker of
 * jinx's master takes signals before anything else loads (`early-signals.ts`).
 */
import cluster from 'node:cluster';
import { trapEarlySignals } from './early-signals.js';

if (cluster.isWorker) trapEarlySignals();
const { main } = await import('./main.js');
process.exitCode = await main(process.argv.slice(2));
