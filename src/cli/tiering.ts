/**
 * V8's optimizing compiler (TurboFan) is off while a jinx process reads its
 * configuration and on once it serves; node's own modules load under node's
 * default flags.
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
 * V8 keys a code cache by its flags (`v8.cachedDataVersionTag()`), and node
 * carries one for each of its own modules (net, tls, http …), made under
 * its default flags: a module loaded while `--no-turbofan` is set is
 * compiled again, 35–40 ms for what a serving process loads. So jinx's
 * modules (and node's with them) load through `loadingModules`, with
 * TurboFan's flag at its default; bin/jinx's heap flags are set back to
 * their defaults for the same reason before anything loads (`launch.cts`).
 *
 * A `JINX_NODE_FLAGS` that chooses the tiers itself (`--turbofan`,
 * `--no-turbofan`, `--max-opt`, `--opt`, `--jitless`) is left alone, and so
 * are wasm loop flags it gives. The code cache of jinx's bundle is taken
 * before the switch (`launch.cts`), and scripts/bundle.mjs makes the cache
 * without switching.
 */
import { setFlagsFromString } from 'node:v8';

/** Whether node's command line chose V8's tiers: then no function here changes them. */
const tiersChosen = process.execArgv.some((flag) => /^--(no-)?(turbofan|opt|jitless)$|^--max-opt\b/.test(flag));
/** Whether node's command line chose how V8 optimizes WebAssembly loops: then `optimizeFromNowOn` leaves them. */
const wasmLoopsChosen = process.execArgv.some((flag) => /^--(no-)?wasm-loop-(unrolling|peeling)$/.test(flag));

/** Whether the process serves (`optimizeFromNowOn` was called): TurboFan stays on. */
let serving = false;

/** Turns TurboFan off (`--no-turbofan`): called first thing by the command line (`entry.ts`). */
export function startOnBaselineCode(): void {
  if (!tiersChosen) setFlagsFromString('--no-turbofan');
}

/**
 * Runs `load` (an `import()` of jinx's modules, which require node's own)
 * with TurboFan's flag at its default, so V8 takes node's code cache for
 * what it loads, then turns TurboFan off again unless the process serves.
 * The modules' top-level code runs once, so nothing is optimized meanwhile
 * (what loops at load, like the lexer's table, is built on first use).
 */
export async function loadingModules<T>(load: () => Promise<T>): Promise<T> {
  if (tiersChosen || serving) return load();
  setFlagsFromString('--turbofan');
  try {
    return await load();
  } finally {
    if (!serving) setFlagsFromString('--no-turbofan');
  }
}

/**
 * Turns TurboFan back on (`--turbofan`): called once a process serves (a
 * worker or a lone process listens; a master's workers serve). V8 then
 * optimizes what becomes hot as usual.
 *
 * And `--no-wasm-loop-unrolling --no-wasm-loop-peeling`: undici parses
 * responses with llhttp compiled to WebAssembly; when it gets hot V8
 * compiles it again with TurboFan on a thread of its own, which took 35 MiB
 * for 150 ms (a peak of 108 against 94 MiB at the start of HTTP/2 load),
 * 8–25 MiB without unrolling and peeling its loops, for the same requests a
 * second. `--liftoff-only` (llhttp never recompiled) took the rest of that
 * peak away but cost 3–10% of the requests a second at 100 B, 16 KiB and
 * over HTTP/2 (README, Memory); `--no-wasm-tier-up` does not stop the
 * recompile. The peak is once per process, when load first comes. Set here,
 * not on bin/jinx's command line, as they change V8's flags (above); V8
 * reads them when it compiles WebAssembly with TurboFan, under load.
 */
export function optimizeFromNowOn(): void {
  serving = true;
  if (!tiersChosen) setFlagsFromString('--turbofan');
  if (!wasmLoopsChosen) setFlagsFromString('--no-wasm-loop-unrolling --no-wasm-loop-peeling');
}
