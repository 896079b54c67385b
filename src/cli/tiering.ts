/**
 * V8's optimizing compiler (TurboFan) is off while a jinx process starts and
 * on once it serves.
 *
 * A start runs code once: reading, checking and compiling the
 * configuration. TurboFan compiled a few of its loops anyway (on-stack
 * replacement of Chevrotain's 65,536-entry table in
 * `initCharCodeToOptimizedIndexMap`, node's `normalizeString`), and that
 * mapped TurboFan's code and zone memory for good: 3 MiB of the idle RSS of
 * every process, master and worker (61.8 against 58.7 MiB one second after
 * a trivial start; README, "Memory"). Checks that end the process (`-t`,
 * `-T`, `lint`, `explain`, `-s`) never turn it on: `-t` of 1,000 server
 * blocks takes about a third less CPU on Sparkplug's baseline code alone.
 * Requests run as fast as before: TurboFan compiles what they make hot once
 * serving has begun.
 *
 * A `JINX_NODE_FLAGS` that chooses the tiers itself (`--turbofan`,
 * `--no-turbofan`, `--max-opt`, `--opt`, `--jitless`) is left alone. The
 * code cache is taken before the switch (`launch.cts`): V8 keys a cache by
 * its flags, and scripts/bundle.mjs makes the cache without switching.
 */
import { setFlagsFromString } from 'node:v8';

/** Whether node's command line chose V8's tiers: then neither function changes them. */
const tiersChosen = process.execArgv.some((flag) => /^--(no-)?(turbofan|opt|jitless)$|^--max-opt\b/.test(flag));

/** Turns TurboFan off (`--no-turbofan`): called first thing by the command line (`entry.ts`). */
export function startOnBaselineCode(): void {
  if (!tiersChosen) setFlagsFromString('--no-turbofan');
}

/**
 * Turns TurboFan back on (`--turbofan`): called once a process serves (a
 * worker or a lone process listens; a master's workers serve). V8 then
 * optimizes what becomes hot as usual.
 */
export function optimizeFromNowOn(): void {
  if (!tiersChosen) setFlagsFromString('--turbofan');
}
