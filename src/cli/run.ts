/**
 * The program `bin/jinx` starts node on: the command line (`main`) with
 * the arguments after the script, its result as the exit code.
 */
import { main } from './main.js';

process.exitCode = await main(process.argv.slice(2));
