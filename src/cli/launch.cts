/**
 * The script bin/jinx starts node on (dist/src/cli/launch.cjs): it loads
 * jinx's bundle (dist/bundle/jinx.cjs, esbuild's CommonJS bundle of
 * `entry.ts`, scripts/bundle.mjs) with V8's code cache of it
 * (dist/bundle/jinx.cjs.v8cache, made by the build), runs the command line
 * on the arguments after the script and exits with its status.
 *
 * Why: node spends 25–45 ms of every start compiling jinx's code (the
 * bundle's top level, then each function the first time it runs). With the
 * code cache V8 takes that compiled code from the cache instead: `jinx -t`
 * of a trivial configuration about 160 → 105 ms, and every master and
 * worker start the same. node 20 has no code cache for ES modules
 * (`module.enableCompileCache` is node 22), hence a CommonJS bundle run
 * through `vm.Script` with `cachedData`.
 *
 * V8 takes a cache only when it was made by the same V8 with the same
 * flags, for the same source (`cachedDataRejected` otherwise): a node of
 * another version, `JINX_NODE_FLAGS`, or a bundle rebuilt without its cache
 * compiles the source as it would without one, so the cache changes speed,
 * never behaviour. The cache is only read here, never written (the checkout
 * may be read-only, and several processes start at once).
 *
 * The bundle file is the function node's CommonJS loader would wrap a
 * module in, `(function (exports, require, module, __filename, __dirname)
 * {…})`, compiled as read: node reads a file this size as a string outside
 * V8's heap, which V8 compiles from in place, where a wrapper added here
 * made a second, flattened copy inside the heap (1.7 MB, kept for the
 * functions compiled later; idle RSS −1.5 MiB without it).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import type { Script } from 'node:vm';

/**
 * Sets V8's heap-size flags (bin/jinx's `--max-semi-space-size`,
 * `--initial-old-space-size`, `--max-old-space-size`, or a
 * `JINX_NODE_FLAGS` one) back to their defaults once node has started.
 * V8 sized the heap from them when node created it (`Heap::ConfigureHeap`)
 * and reads them nowhere after, but it keys every code cache by its flags
 * (`v8.cachedDataVersionTag()`): node's cache of its own modules, made under
 * its defaults, was refused while they were set, and node compiled each
 * module jinx loads (net, tls, http …: 35–40 ms of every process, a master
 * start two of them). The heap keeps the sizes it was made with (a test
 * reads its limit in a serving worker, test/cli/launch.test.ts).
 */
function unsetHeapSizeFlags(): void {
  setFlagsFromString('--max-semi-space-size=0 --initial-old-space-size=0 --max-old-space-size=0');
}

unsetHeapSizeFlags();
// node's vm module loads after the flags are set back (an import would load it before)
const vm = require('node:vm') as typeof import('node:vm');

/** What the bundle exports (`src/cli/entry.ts`). */
interface BundleExports {
  run(argv: readonly string[]): Promise<number>;
}

/** The bundle, loaded and run once, and the script it was compiled from (for `createCachedData`). */
export interface LoadedBundle {
  readonly exports: BundleExports;
  readonly script: Script;
  /** Whether V8 took the code cache (false when there was none). */
  readonly cacheAccepted: boolean;
}

/** The bundle's file. */
export const BUNDLE_FILE = join(__dirname, '../../bundle/jinx.cjs');
/** Its code cache: `Script#createCachedData` after a warm-up run (scripts/bundle.mjs). */
export const CODE_CACHE_FILE = `${BUNDLE_FILE}.v8cache`;

/**
 * Compiles and runs the bundle as node runs a CommonJS module (its
 * `require` resolves from the bundle's place), with the code cache unless
 * `withCache` is false.
 * @throws the error of reading the bundle (ENOENT when it was not built)
 */
export function loadBundle(withCache = true): LoadedBundle {
  // all ASCII (esbuild escapes the rest; scripts/bundle.mjs checks): latin1 reads it without UTF-8's validation
  const source = readFileSync(BUNDLE_FILE, 'latin1');
  let cachedData: Buffer | undefined;
  if (withCache) {
    try {
      cachedData = readFileSync(CODE_CACHE_FILE);
    } catch {
      cachedData = undefined;
    }
  }
  // the file is `(function (exports, require, module, __filename, __dirname) {…})` (scripts/bundle.mjs)
  const script = new vm.Script(source, { filename: BUNDLE_FILE, cachedData });
  const module = { exports: {} as BundleExports };
  const wrapper = script.runInThisContext() as (e: object, r: NodeJS.Require, m: object, f: string, d: string) => void;
  wrapper(module.exports, createRequire(BUNDLE_FILE), module, BUNDLE_FILE, join(BUNDLE_FILE, '..'));
  return { exports: module.exports, script, cacheAccepted: cachedData !== undefined && !script.cachedDataRejected };
}

if (require.main === module) {
  loadBundle().exports.run(process.argv.slice(2)).then((status) => { process.exitCode = status; });
}
