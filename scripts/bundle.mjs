#!/usr/bin/env node
/**
 * Bundles the compiled command line (dist/src/cli/run.js) with esbuild into
 * dist/bundle/, which bin/jinx runs: node loads a handful of files instead of
 * the ~160 modules of dist/src (240 ms of a trivial start went to loading
 * them). The runtime, the master and the worker stay chunks of their own,
 * loaded only to serve (the dynamic imports of run.ts, main.ts and
 * worker.ts): `jinx -t` loads none of them. pino and sonic-boom stay
 * packages (pino starts its workers by file path); chevrotain is imported by
 * URL at run time (src/parser/chevrotain.ts). The bundle sits two levels
 * below the checkout, as dist/src/*.js, so `import.meta.url`-relative paths
 * (package.json in src/version.ts) are the same.
 *
 *   node scripts/bundle.mjs     (part of `npm run build`)
 */
import { readdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/**
 * undici's HTTP/2 client (lib/dispatcher/client-h2.js) loads node:http2 when
 * the bundle loads: 2.3 MiB of resident memory in a bare node, 0.8 MiB of
 * jinx's idle RSS (measured), for code jinx never runs. jinx's upstream connections offer only `http/1.1` in ALPN
 * (no `allowH2`), so undici never picks HTTP/2; the stub put in its place
 * fails the connection (502) should that ever change.
 */
const withoutUndiciH2 = {
  name: 'without-undici-h2',
  setup(b) {
    b.onResolve({ filter: /^\.\/client-h2\.js$/ }, (args) =>
      (args.importer.includes('/node_modules/undici/') ? { path: 'undici-client-h2', namespace: 'jinx-stub' } : undefined));
    b.onLoad({ filter: /.*/, namespace: 'jinx-stub' }, () => ({
      contents: "module.exports = function connectH2() { throw new Error('jinx does not speak HTTP/2 to upstream servers') }",
      loader: 'js',
    }));
  },
};
const outdir = join(root, 'dist/bundle');
rmSync(outdir, { recursive: true, force: true });
await build({
  entryPoints: [join(root, 'dist/src/cli/run.js')],
  outdir,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external: ['pino', 'sonic-boom', 'chevrotain'],
  // the CommonJS packages bundled (commander, undici …) call require() for node's modules
  banner: { js: "import { createRequire as __jinxCreateRequire } from 'node:module'; const require = __jinxCreateRequire(import.meta.url);" },
  // no comments or layout: smaller sources for node to keep (all ASCII, one byte a character); names stay, for stack traces
  minifyWhitespace: true,
  minifySyntax: true,
  // the bundled packages' license comments go to a file beside their chunk (empty ones removed below)
  legalComments: 'external',
  logLevel: 'warning',
  plugins: [withoutUndiciH2],
});
for (const f of readdirSync(outdir)) if (f.endsWith('.LEGAL.txt') && statSync(join(outdir, f)).size === 0) rmSync(join(outdir, f));
