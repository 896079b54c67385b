#!/usr/bin/env node
/**
 * Bundles the compiled command line (dist/src/cli/entry.js) with esbuild
 * into one CommonJS file, dist/bundle/jinx.cjs, which bin/jinx runs through
 * dist/src/cli/launch.cjs: node loads one file instead of the ~160 modules
 * of dist/src (240 ms of a trivial start went to loading them). The
 * runtime, the master and the worker are modules the bundle runs only when
 * it serves (the dynamic imports of entry.ts, main.ts and worker.ts become
 * esbuild's lazy `init_…` calls): `jinx -t` runs none of them. pino and
 * sonic-boom are bundled too: as packages, node found and compiled their
 * ~30 files one by one when a master or a worker started (21 ms against 8
 * bundled, measured in a bare node); pino finds the files of its worker
 * threads by path only for transports, which jinx does not use (its error
 * log is a destination stream, src/log/error-log.ts);
 * chevrotain is bundled from the single-file ES module its package ships
 * (src/parser/chevrotain.ts). The bundle sits two levels below the
 * checkout, as dist/src/*.js, so `import.meta.url`-relative paths
 * (package.json in src/version.ts) are the same.
 *
 * Then the code cache (dist/bundle/jinx.cjs.v8cache, read by launch.cts):
 * a child node started with bin/jinx's flags (V8 takes a cache only under
 * the flags it was made with) runs this script with `--code-cache`: it loads the bundle
 * and runs `jinx -t -q --offline` on configurations that use most
 * directives (fixtures/default and a generated one of many server blocks),
 * then serves a few requests (`serveForCache`), so the functions a check, a
 * start and the first requests run are compiled, and writes V8's cache of
 * the compiled script. With the serving part and pino bundled (1.1 MB of
 * cache → 1.7 MB), against the build with neither: a trivial start to its
 * first 200 in 131 ms against 151 without a master, 255 against 267 with
 * one; 1,000 server blocks 338 against 369 ms without a master; `-t` 113
 * against 110 ms; idle RSS 59.2 against 59.0 MiB (bench/startup.ts and
 * bench/proxy.ts, 2026-11-29; pino bundled alone: 150 against 151 ms).
 *
 *   node scripts/bundle.mjs     (part of `npm run build`)
 *   node FLAGS scripts/bundle.mjs --code-cache     (the cache alone, as the first one runs it)
 */
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { request } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
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
/**
 * src/parser/chevrotain.ts loads chevrotain's single-file ES module by URL
 * with a top-level await (so dist/src does not load its lib/src tree, one
 * lodash-es module at a time); a CommonJS bundle has no top-level await, so
 * here that module is the same file, imported statically and bundled.
 */
const chevrotainSingleFile = {
  name: 'chevrotain-single-file',
  setup(b) {
    b.onLoad({ filter: /\/dist\/src\/parser\/chevrotain\.js$/ }, () => ({
      contents: `export * from ${JSON.stringify(join(root, 'node_modules/chevrotain/lib/chevrotain.mjs'))};`,
      loader: 'js',
    }));
  },
};

const outdir = join(root, 'dist/bundle');
const bundleFile = join(outdir, 'jinx.cjs');
/** Writes dist/bundle/jinx.cjs (and its source map) with esbuild. */
async function bundle() {
  rmSync(outdir, { recursive: true, force: true });
  await build({
    entryPoints: [join(root, 'dist/src/cli/entry.js')],
    outfile: bundleFile,
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    // `import.meta.url` of every module is the bundle's URL; `__filename` is the one launch.cts passes
    define: { 'import.meta.url': '__jinxBundleUrl' },
    // the file is the function node's CommonJS loader would wrap it in, so that launch.cts compiles the text as read: a
    // wrapper added there made V8 keep a second, flattened copy of the 1.7 MB source in its heap
    banner: { js: "(function (exports, require, module, __filename, __dirname) {var __jinxBundleUrl = require('node:url').pathToFileURL(__filename).href;" },
    footer: { js: '\n})' },
    // no comments or layout: a smaller source for node to keep (all ASCII, one byte a character); names stay, for stack traces
    minifyWhitespace: true,
    minifySyntax: true,
    // the bundled packages' license comments go to a file beside the bundle (removed when empty)
    legalComments: 'external',
    // jinx.cjs.map, not named in the bundle (node does not read it; the bundle's text, which the code cache is keyed by,
    // stays the same): bench/cpuprofile.ts maps a profile of bin/jinx back to src/ and the packages through it
    sourcemap: 'external',
    sourcesContent: false,
    logLevel: 'warning',
    plugins: [withoutUndiciH2, chevrotainSingleFile],
  });
  for (const f of readdirSync(outdir)) if (f.endsWith('.LEGAL.txt') && statSync(join(outdir, f)).size === 0) rmSync(join(outdir, f));
  // launch.cts reads the bundle as latin1: one byte a character, which holds for ASCII only
  if (readFileSync(bundleFile).some((byte) => byte > 0x7f)) throw new Error(`${bundleFile} has bytes outside ASCII`);
}

/** A configuration of `count` server blocks with the directives most configurations use, to compile for the cache. */
function manyServers(count) {
  const servers = Array.from({ length: count }, (_, i) => `  server {
    listen 127.0.0.1:${18000 + (i % 4)}${i === 0 ? ' default_server' : ''};
    server_name s${i}.test *.s${i}.test;
    root html;
    location / { try_files $uri $uri/ =404; }
    location = /exact { return 200 "s${i}\\n"; }
    location ^~ /static/ { expires 1h; add_header X-Static yes; }
    location ~ \\.php$ { fastcgi_pass 127.0.0.1:9000; fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name; }
    location /api/ {
      proxy_pass http://backend;
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_http_version 1.1;
      if ($request_method = POST) { return 405; }
    }
  }`);
  return `events {}
http {
  types { text/html html; text/css css; application/javascript js; }
  default_type application/octet-stream;
  access_log off;
  upstream backend { server 127.0.0.1:18080; keepalive 8; }
  map $http_upgrade $connection_upgrade { default upgrade; '' close; }
${servers.join('\n')}
}
`;
}

/**
 * Serves a few requests in this process (`master_process off`, on unix
 * sockets: no port to find free), so that the cache holds what a server
 * compiles as it starts and answers: the runtime, the error and access
 * logs (pino), the HTTP/1.x front, the proxy and undici. A proxied request
 * and one answered by `return`, then a graceful stop.
 */
async function serveForCache(exports, prefix) {
  const front = join(prefix, 'front.sock');
  const back = join(prefix, 'back.sock');
  mkdirSync(join(prefix, 'logs'), { recursive: true });
  writeFileSync(join(prefix, 'nginx.conf'), `master_process off;
daemon off;
pid logs/nginx.pid;
error_log logs/error.log;
events {}
http {
  access_log logs/access.log;
  ${['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `${t}_temp_path logs/${t}_temp;`).join('\n  ')}
  upstream backend { server unix:${back}; keepalive 2; }
  server { listen unix:${front}; location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; } location = /direct { return 200 "direct\\n"; } }
  server { listen unix:${back}; location / { return 200 "back\\n"; } }
}
`);
  let ended;
  const served = exports.run(['-q', '-p', `${prefix}/`, '-c', 'nginx.conf']).then((status) => (ended = status));
  const get = (path) => new Promise((resolve, reject) => {
    const req = request({ socketPath: front, path, headers: { host: 'cache.test' } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`GET ${path} for the code cache: ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end();
  });
  let tries = 0;
  for (;;) {
    try {
      await get('/');
      break;
    } catch (err) {
      if (ended !== undefined) throw new Error(`jinx did not serve for the code cache: status ${ended}`);
      if (++tries > 200) throw err;
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  for (const path of ['/', '/again', '/direct']) await get(path);
  process.kill(process.pid, 'SIGQUIT');
  const status = await served;
  if (status !== 0) throw new Error(`jinx serving for the code cache: status ${status}`);
}

/**
 * Writes the code cache: the bundle loaded without a cache, `-t` run on the
 * configurations and a few requests served (V8 compiles what runs), then
 * the script's cached data.
 * jinx changes V8's flags after it has taken the cache (`--no-turbofan`
 * while it reads a configuration, WebAssembly flags once it serves,
 * src/cli/tiering.ts); V8 keys a cache by its flags, and one made after
 * such a change would carry flags no start has: here they are left out.
 */
async function writeCodeCache() {
  const require = createRequire(import.meta.url);
  // launch.cjs sets the heap flags back to their defaults as it loads, as in bin/jinx; the tiers stay as they are
  const { loadBundle, CODE_CACHE_FILE } = require(join(root, 'dist/src/cli/launch.cjs'));
  const v8 = require('node:v8');
  v8.setFlagsFromString = () => undefined;
  const { exports, script } = loadBundle(false);
  const dir = mkdtempSync(join(tmpdir(), 'jinx-cache-'));
  try {
    cpSync(join(root, 'fixtures/default'), join(dir, 'default'), { recursive: true });
    mkdirSync(join(dir, 'many'));
    writeFileSync(join(dir, 'many/nginx.conf'), manyServers(200));
    for (const prefix of [join(dir, 'default'), join(dir, 'many')]) {
      const status = await exports.run(['-t', '-q', '--offline', '-p', `${prefix}/`, '-c', 'nginx.conf']);
      if (status !== 0) throw new Error(`jinx -t of ${prefix}/nginx.conf for the code cache: status ${status}`);
    }
    await serveForCache(exports, join(dir, 'serve'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  writeFileSync(CODE_CACHE_FILE, script.createCachedData());
}
/**
 * The node flags bin/jinx starts node with (its `node_flags='…'` line): V8
 * keys a code cache by its flags, so the cache is made in a node started
 * with the same ones (a child running this script with `--code-cache`).
 */
function binJinxNodeFlags() {
  const m = /^node_flags='([^']*)'$/m.exec(readFileSync(join(root, 'bin/jinx'), 'utf8'));
  if (m === null) throw new Error("bin/jinx has no node_flags='…' line");
  return m[1].split(' ').filter((f) => f !== '');
}

if (process.argv.includes('--code-cache')) {
  await writeCodeCache();
} else {
  await bundle();
  const made = spawnSync(process.execPath, [...binJinxNodeFlags(), fileURLToPath(import.meta.url), '--code-cache'], { stdio: 'inherit' });
  if (made.status !== 0) throw new Error(`making the code cache: status ${made.status ?? made.signal}`);
}
