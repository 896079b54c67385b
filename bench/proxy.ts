/**
 * Proxy throughput benchmark: jinx against the reference nginx on the same
 * reverse-proxy configuration, one process each, measured with wrk.
 *
 *   npx tsc -p . && node dist/bench/proxy.js [--duration 10] [--rounds 5] …
 *
 * One upstream (a second nginx serving static files, or a node:http server
 * with --upstream node) answers a 100-byte and a 16 KiB body. jinx and nginx
 * both proxy to it with `keepalive 64`. After a warm-up of each, wrk runs
 * against them interleaved (jinx, nginx, jinx, nginx …) for every round and
 * body size; the medians of requests/s and p99 latency and the ratio
 * jinx/nginx are printed. CPU time of every process is read from /proc around
 * each run, so a saturated load generator or a busy machine shows up.
 *
 * Exit status: 0 when everything ran (whatever the ratio), 1 when something
 * could not be started or measured, 2 when a proxy answered with errors under
 * load (its figures are then not a throughput of the proxy).
 * See bench/README.md.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { connect as http2Connect } from 'node:http2';
import { request as httpsRequest } from 'node:https';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { summarizeProfile, formatSummary } from './cpuprofile.js';
import { parseWrk, type WrkResult } from './wrk.js';
import {
  JINX, median, MiB, ROOT, childPids, freePort, hasCommand, interrupted, makeTemp, parseSize, removeTemp, rssSampler, sleep, start, stop, stopAll, treeRssBytes, waitListening, type Proc,
} from './procs.js';

const USAGE = `usage: node dist/bench/proxy.js [options]

  --duration S      seconds per measured wrk run (default 10)
  --warmup S        seconds of warm-up per server and body size (default 5)
  --rounds N        measured runs per server and body size (default 5)
  --connections N   wrk -c, h2load -c (default 64 with h1, 8 with h2)
  --threads N       wrk -t (default 2)
  --sizes LIST      body sizes in bytes, k and m suffixes allowed (default 100,16k; 1m for 1 MiB)
  --targets LIST    servers to measure: jinx,nginx,bare,fastify,jinx-status,jinx-limit,jinx-base
                    (default jinx,nginx); bare is the smallest node:http + undici proxy (with h2,
                    node:http2 + undici), the ceiling of jinx's design; fastify is fastify with @fastify/http-proxy
                    (HTTP/1.1 only); jinx-status is jinx with a stub_status location beside the
                    proxied one (what the status page costs the proxied requests); jinx-limit
                    is jinx with limit_req (rate 1000000r/s, so none is refused) on every
                    proxied request; jinx-base is the jinx of --jinx-base
  --jinx-base PATH  another jinx's bin/jinx for the jinx-base target (e.g. a checkout of the
                    branch before a change, built), to compare two versions in one run
  --upstream KIND   nginx (default), node (node:http), or fastcgi (a node FastCGI server: the
                    servers under test use fastcgi_pass with fastcgi_keep_conn on; jinx and nginx
                    targets only)
  --protocol P      h1 (default: HTTP/1.1 over plain TCP, measured with wrk), https
                    (HTTP/1.1 over TLS, measured with wrk; jinx and nginx targets only) or h2
                    (HTTP/2 over TLS, \`http2 on\`, measured with h2load; no fastify target)
  --streams N       with h2: h2load -m, concurrent streams per connection (default 8:
                    64 requests in flight, as with h1 and within the upstream's keepalive 64)
  --sut-cpus LIST   taskset CPU list for jinx and nginx (default 0)
  --aux-cpus LIST   taskset CPU list for the upstream and wrk (default 1)
  --no-pin          do not use taskset
  --workers N       jinx and nginx run nginx's process model, a master and N worker
                    processes (master_process on; worker_processes N); without it one
                    process each (master_process off). Give the servers N CPUs
                    (--sut-cpus, or --no-pin): run with --workers 1 and --workers 2 to
                    see how throughput grows with workers
  --nginx PATH      reference nginx (default /opt/nginx-oracle/nginx, else /usr/sbin/nginx)
  --max-other PCT   a round in which other processes took more than PCT% of a core
                    from the servers' CPU (the whole machine when unpinned) is run
                    again (default 20): the machine may be shared
  --retries N       how many times a round is run again at most (default 2)
  --quiet-wait S    before a round, wait up to S seconds for the machine to be
                    below --max-other (default 60; 0 with a negative --nice)
  --nice N          run the servers, the upstream and wrk under nice -n N (default 0;
                    negative values need root and take CPU from everything else)
  --node-flags STR  extra node flags for jinx (bin/jinx's JINX_NODE_FLAGS), e.g. "--max-semi-space-size=64"
  --profile DIR     run every node server (jinx, bare, fastify) under --cpu-prof, write its
                    profiles to DIR/TARGET (one per process) and print their top functions
  --settle S        also read each server's idle RSS S seconds after it listens (before any
                    request): V8's memory reducer makes its first full collection about 8 s
                    after a start, which frees what reading the configuration left
  --gc              run every jinx under --trace-gc-nvp and report, per request, the heap bytes it
                    allocated, the bytes its scavenges promoted and the GC pauses (figures that
                    hold on a busy machine: allocation does not depend on the CPU left to it)
  --json FILE       write every run's figures and each server's idle RSS to FILE
                    (bench/runs.ts reads several such files: medians over runs)
  --keep            keep the temporary prefix directory
  -h, --help        this text`;

interface Options {
  durationS: number;
  warmupS: number;
  rounds: number;
  connections: number;
  threads: number;
  sizes: number[];
  targets: Target[];
  upstream: 'nginx' | 'node' | 'fastcgi';
  protocol: 'h1' | 'https' | 'h2';
  streams: number;
  /** `--workers`: a master and this many workers; undefined: one process (`master_process off`). */
  workers: number | undefined;
  sutCpus: string | undefined;
  auxCpus: string | undefined;
  nginx: string;
  nodeFlags: string[];
  /** `--jinx-base`: the bin/jinx of the jinx-base target. */
  jinxBase: string | undefined;
  maxOther: number;
  nice: number;
  retries: number;
  quietWaitS: number;
  profileDir: string | undefined;
  /** `--gc`: jinx's GC trace is read for allocation and pauses per request. */
  gc: boolean;
  /** `--settle`: seconds after listening at which the idle RSS is read again (0: not). */
  settleS: number;
  json: string | undefined;
  keep: boolean;
}

type Target = 'jinx' | 'nginx' | 'bare' | 'fastify' | 'jinx-status' | 'jinx-limit' | 'jinx-base';
const TARGETS: readonly Target[] = ['jinx', 'nginx', 'bare', 'fastify', 'jinx-status', 'jinx-limit', 'jinx-base'];

function positive(name: string, v: string | undefined, dflt: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} wants a positive number, not "${v}"`);
  return n;
}

function options(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string' }, warmup: { type: 'string' }, rounds: { type: 'string' },
      connections: { type: 'string' }, threads: { type: 'string' }, sizes: { type: 'string' },
      targets: { type: 'string' }, upstream: { type: 'string' }, 'sut-cpus': { type: 'string' },
      'aux-cpus': { type: 'string' }, 'no-pin': { type: 'boolean' }, nginx: { type: 'string' },
      'node-flags': { type: 'string' }, profile: { type: 'string' }, gc: { type: 'boolean' }, settle: { type: 'string' }, json: { type: 'string' },
      'max-other': { type: 'string' }, retries: { type: 'string' }, 'quiet-wait': { type: 'string' },
      nice: { type: 'string' }, protocol: { type: 'string' }, streams: { type: 'string' }, workers: { type: 'string' }, 'jinx-base': { type: 'string' },
      keep: { type: 'boolean' }, help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    process.exit(0);
  }
  const targets = (values.targets ?? 'jinx,nginx').split(',').map((t) => t.trim());
  for (const t of targets) if (!(TARGETS as string[]).includes(t)) throw new Error(`unknown target "${t}"`);
  const jinxBase = values['jinx-base'] === undefined ? undefined : resolve(values['jinx-base']);
  if (targets.includes('jinx-base') && (jinxBase === undefined || !existsSync(jinxBase))) throw new Error('the jinx-base target needs --jinx-base PATH (a built jinx\'s bin/jinx)');
  const upstream = values.upstream ?? 'nginx';
  if (upstream !== 'nginx' && upstream !== 'node' && upstream !== 'fastcgi') throw new Error(`--upstream is nginx, node or fastcgi, not "${upstream}"`);
  if (upstream === 'fastcgi' && (targets.includes('fastify') || targets.includes('bare'))) throw new Error('--upstream fastcgi measures jinx and nginx only: leave out bare and fastify');
  const protocol = values.protocol ?? 'h1';
  if (protocol !== 'h1' && protocol !== 'https' && protocol !== 'h2') throw new Error(`--protocol is h1, https or h2, not "${protocol}"`);
  if (protocol === 'h2' && targets.includes('fastify')) throw new Error('the fastify target speaks HTTP/1.1 only: leave it out with --protocol h2');
  if (protocol === 'https' && (targets.includes('fastify') || targets.includes('bare'))) throw new Error('--protocol https measures jinx and nginx only: leave out bare and fastify');
  const nginx = values.nginx ?? ['/opt/nginx-oracle/nginx', '/usr/sbin/nginx'].find((p) => existsSync(p));
  if (!nginx) throw new Error('no reference nginx: install one or pass --nginx PATH');
  const pin = !values['no-pin'] && hasCommand('taskset');
  if (!values['no-pin'] && !pin) process.stderr.write('bench: taskset not found, processes are not pinned\n');
  return {
    durationS: positive('duration', values.duration, 10),
    warmupS: values.warmup === '0' ? 0 : positive('warmup', values.warmup, 5),
    rounds: Math.round(positive('rounds', values.rounds, 5)),
    connections: Math.round(positive('connections', values.connections, protocol === 'h2' ? 8 : 64)),
    threads: Math.round(positive('threads', values.threads, 2)),
    sizes: (values.sizes ?? '100,16k').split(',').map(parseSize),
    targets: targets as Target[],
    upstream,
    protocol,
    streams: Math.round(positive('streams', values.streams, 8)),
    workers: values.workers === undefined ? undefined : Math.round(positive('workers', values.workers, 1)),
    sutCpus: pin ? values['sut-cpus'] ?? '0' : undefined,
    auxCpus: pin ? values['aux-cpus'] ?? '1' : undefined,
    nginx,
    nodeFlags: (values['node-flags'] ?? '').split(/\s+/).filter(Boolean),
    jinxBase,
    maxOther: positive('max-other', values['max-other'], 20),
    nice: values.nice === undefined ? 0 : Number(values.nice),
    retries: values.retries === '0' ? 0 : Math.round(positive('retries', values.retries, 2)),
    // with --nice the servers get their CPU anyway: waiting for others to go quiet only wastes time
    quietWaitS: values['quiet-wait'] === '0' ? 0 : positive('quiet-wait', values['quiet-wait'], values.nice !== undefined && Number(values.nice) < 0 ? 0 : 60),
    profileDir: values.profile === undefined ? undefined : resolve(values.profile),
    gc: values.gc ?? false,
    settleS: values.settle === undefined ? 0 : positive('settle', values.settle, 0),
    json: values.json,
    keep: values.keep ?? false,
  };
}

/** GET through a server (over TLS with `tls`); resolves to status and body length. */
/** GET over HTTP/1.1, or with `h2` over HTTP/2 with TLS (as h2load measures): the status and the body's length. */
function get(port: number, path: string, protocol: Options['protocol']): Promise<{ status: number; length: number }> {
  return new Promise((res, rej) => {
    let length = 0;
    if (protocol === 'h2') {
      const session = http2Connect(`https://127.0.0.1:${port}`, { rejectUnauthorized: false });
      session.on('error', rej);
      session.setTimeout(5000, () => session.destroy(new Error('timed out')));
      const stream = session.request({ ':path': path });
      let status = 0;
      stream.on('response', (h) => { status = Number(h[':status']); });
      stream.on('data', (c: Buffer) => { length += c.length; });
      stream.on('end', () => { session.close(); res({ status, length }); });
      stream.on('error', rej);
      return;
    }
    const request = protocol === 'https' ? httpsRequest : httpRequest;
    const req = request({ host: '127.0.0.1', port, path, agent: false, timeout: 5000, rejectUnauthorized: false }, (resp) => {
      resp.on('data', (c: Buffer) => { length += c.length; });
      resp.on('end', () => res({ status: resp.statusCode ?? 0, length }));
      resp.on('error', rej);
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', rej);
    req.end();
  });
}

// ------------------------------------------------------------------ configs

const bodyPath = (size: number): string => `/body-${size}`;

/** Everything nginx writes goes under `dir`; `workers`: a master and that many workers, else one process. */
function mainBlock(dir: string, workers?: number): string {
  return `daemon off;
master_process ${workers === undefined ? 'off' : 'on'};
worker_processes ${workers ?? 1};
pid ${dir}/nginx.pid;
error_log ${dir}/logs/error.log warn;
events { worker_connections 4096; }
`;
}

function tempPaths(dir: string): string {
  return ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `  ${t}_temp_path ${dir}/${t}_temp;`).join('\n');
}

/**
 * The upstream nginx: as cheap as nginx gets, since it shares a CPU with wrk.
 * Small bodies come from `return 200` (no file I/O), large ones from a static
 * file with sendfile and a cached descriptor (a `return` string cannot exceed
 * nginx's 4 KiB configuration buffer). Keep-alive connections live forever.
 */
function upstreamNginxConf(dir: string, port: number, sizes: readonly number[]): string {
  const locations = sizes.filter((n) => n <= 2048).map((n) => `    location = ${bodyPath(n)} { return 200 "${'x'.repeat(n)}"; }\n`).join('');
  return `${mainBlock(dir)}http {
  access_log off;
${tempPaths(dir)}
  keepalive_requests 1000000;
  keepalive_timeout 300s;
  server {
    listen 127.0.0.1:${port} backlog=4096;
    root ${dir}/html;
    open_file_cache max=64;
    sendfile on;
    default_type application/octet-stream;
${locations}  }
}
`;
}

/** What a jinx target adds to the proxied configuration: nothing, a stub_status location, or a limit_req no request reaches. */
type Extra = 'none' | 'status' | 'limit';

/**
 * The configuration under test, the same file for jinx and nginx; with
 * `tls` (`--protocol https` and `h2`) the server listens with TLS, the
 * certificate and key in `tls.dir`, and with `tls.http2` (`h2`) has
 * `http2 on`; `extra` adds a `location = /stub_status { stub_status; }`
 * beside the proxied one (no log reads `$connections_*`), or a `limit_req`.
 * With `fastcgi` the location passes requests to a FastCGI server instead.
 */
function proxyConf(
  dir: string, port: number, upstreamPort: number, workers: number | undefined, tls?: { dir: string; http2: boolean }, extra: Extra = 'none', fastcgi = false,
): string {
  // h2load does not reconnect: a connection closed after keepalive_requests (1000) would end its share of the run
  const tlsLines = tls
    ? `${tls.http2 ? '\n    http2 on;\n    keepalive_requests 1000000;' : ''}\n    ssl_certificate ${tls.dir}/cert.pem;\n    ssl_certificate_key ${tls.dir}/key.pem;`
    : '';
  return `${mainBlock(dir, workers)}http {
  access_log off;
${tempPaths(dir)}
  upstream backend {
    server 127.0.0.1:${upstreamPort};
    keepalive 64;
  }${extra === 'limit' ? '\n  limit_req_zone $binary_remote_addr zone=bench:1m rate=1000000r/s;' : ''}
  server {
    listen 127.0.0.1:${port}${tls ? ' ssl' : ''} backlog=4096;${tlsLines}
    location / {
      ${fastcgi ? 'fastcgi_pass backend;\n      fastcgi_keep_conn on;\n      fastcgi_param SCRIPT_NAME $uri;' : 'proxy_pass http://backend;\n      proxy_http_version 1.1;\n      proxy_set_header Connection "";'}${extra === 'limit' ? '\n      limit_req zone=bench burst=1000000 nodelay;' : ''}
    }${extra === 'status' ? '\n    location = /stub_status { stub_status; }' : ''}
  }
}
`;
}

/** The node:http upstream (--upstream node): bodies from memory, keep-alive forever. */
const NODE_UPSTREAM = `
const http = require('node:http');
const [port, ...sizes] = process.argv.slice(1).map(Number);
const bodies = new Map(sizes.map((s) => ['/body-' + s, Buffer.alloc(s, 'x')]));
const server = http.createServer({ keepAliveTimeout: 300000 }, (req, res) => {
  const b = bodies.get(req.url);
  if (!b) { res.writeHead(404, { 'content-length': 0 }); res.end(); return; }
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': b.length });
  res.end(b);
});
server.listen(port, '127.0.0.1');
process.on('SIGQUIT', () => { server.closeAllConnections(); server.close(() => process.exit(0)); });
`;

/**
 * The FastCGI server (--upstream fastcgi): for each request, the body its
 * `SCRIPT_NAME` names (`/body-N`) from memory, in STDOUT records of 8 KiB
 * (what PHP's output buffer sends at a time), then END_REQUEST; the
 * connection stays open for the next request (fastcgi_keep_conn).
 */
const FASTCGI_UPSTREAM = `
const net = require('node:net');
const [port, ...sizes] = process.argv.slice(1).map(Number);
const record = (type, content) => {
  const pad = (8 - (content.length % 8)) % 8;
  return Buffer.concat([Buffer.from([1, type, 0, 1, content.length >> 8, content.length & 255, pad, 0]), content, Buffer.alloc(pad)]);
};
const answer = (size) => {
  const out = Buffer.concat([Buffer.from('Content-Type: application/octet-stream\\r\\nContent-Length: ' + size + '\\r\\n\\r\\n'), Buffer.alloc(size, 'x')]);
  const records = [];
  for (let at = 0; at < out.length; at += 8192) records.push(record(6, out.subarray(at, at + 8192)));
  return Buffer.concat([...records, record(6, Buffer.alloc(0)), record(3, Buffer.alloc(8))]);
};
const answers = new Map(sizes.map((s) => ['/body-' + s, answer(s)]));
const notFound = Buffer.concat([record(6, Buffer.from('Status: 404 Not Found\\r\\nContent-Length: 0\\r\\n\\r\\n')), record(6, Buffer.alloc(0)), record(3, Buffer.alloc(8))]);
const server = net.createServer((sock) => {
  let input = Buffer.alloc(0);
  let script = '';
  sock.on('error', () => {});
  sock.on('data', (d) => {
    input = input.length ? Buffer.concat([input, d]) : d;
    while (input.length >= 8) {
      const type = input[1], length = input.readUInt16BE(4), end = 8 + length + input[6];
      if (input.length < end) return;
      if (type === 4) {
        const p = input.indexOf('SCRIPT_NAME', 8);
        if (p !== -1 && p < 8 + length) script = input.toString('latin1', p + 11, p + 11 + input[p - 1]);
      } else if (type === 5 && length === 0) sock.write(answers.get(script) ?? notFound);
      input = input.subarray(end);
    }
  });
});
server.listen(port, '127.0.0.1');
process.on('SIGQUIT', () => server.close(() => process.exit(0)));
`;

/**
 * The `bare` target: the least a node:http server proxying through an undici
 * Pool does per request (no configuration, no logs, no phases): headers
 * passed minus hop-by-hop ones, the body collected and sent with `end`.
 * Arguments: port, upstream port, undici's path.
 */
const BARE_PROXY = `
const http = require('node:http');
const [port, upPort, undiciPath] = process.argv.slice(1);
const { Pool } = require(undiciPath);
const pool = new Pool('http://127.0.0.1:' + upPort, { pipelining: 1 });
const hop = new Set(['connection', 'keep-alive', 'transfer-encoding']);
const server = http.createServer({ keepAliveTimeout: 75000 }, (req, res) => {
  const chunks = [];
  pool.dispatch({ path: req.url, method: req.method, headers: ['host', '127.0.0.1:' + upPort] }, {
    onConnect() {},
    onHeaders(status, raw, resume, text) {
      const h = [];
      for (let i = 0; i < raw.length; i += 2) { const n = raw[i].toString('latin1'); if (!hop.has(n.toLowerCase())) h.push(n, raw[i + 1].toString('latin1')); }
      res.writeHead(status, text, h);
      return true;
    },
    onData(c) { chunks.push(c); return true; },
    onComplete() { res.end(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)); },
    onError() { if (!res.headersSent) res.writeHead(502); res.end(); },
  });
});
server.listen(Number(port), '127.0.0.1');
process.on('SIGQUIT', () => { server.closeAllConnections(); server.close(() => pool.close().then(() => process.exit(0))); });
`;

/**
 * The `bare` target with `--protocol h2`: the least a node:http2 server
 * (TLS, ALPN h2, its stream API) proxying through an undici Pool does per
 * stream, as `BARE_PROXY` does per request: the upstream's headers
 * lowercased minus the connection-specific ones HTTP/2 forbids, the body
 * collected and sent with `end`. Arguments: port, upstream port, undici's
 * path, certificate and key files.
 */
const BARE_H2_PROXY = `
const http2 = require('node:http2');
const { readFileSync } = require('node:fs');
const [port, upPort, undiciPath, certFile, keyFile] = process.argv.slice(1);
const { Pool } = require(undiciPath);
const pool = new Pool('http://127.0.0.1:' + upPort, { pipelining: 1 });
const hop = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection']);
const server = http2.createSecureServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) });
server.on('stream', (stream, headers) => {
  const chunks = [];
  pool.dispatch({ path: headers[':path'], method: headers[':method'], headers: ['host', '127.0.0.1:' + upPort] }, {
    onConnect() {},
    onHeaders(status, raw) {
      const h = { ':status': status };
      for (let i = 0; i < raw.length; i += 2) { const n = raw[i].toString('latin1').toLowerCase(); if (!hop.has(n)) h[n] = raw[i + 1].toString('latin1'); }
      if (!stream.destroyed) stream.respond(h);
      return true;
    },
    onData(c) { chunks.push(c); return true; },
    onComplete() { if (!stream.destroyed) stream.end(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)); },
    onError() { if (stream.destroyed) return; if (!stream.headersSent) stream.respond({ ':status': 502 }); stream.end(); },
  });
});
const sessions = new Set();
server.on('session', (s) => { sessions.add(s); s.on('close', () => sessions.delete(s)); });
server.on('sessionError', () => undefined);
server.listen(Number(port), '127.0.0.1');
process.on('SIGQUIT', () => { server.close(() => pool.close().then(() => process.exit(0))); for (const s of sessions) s.close(); });
`;

/**
 * The `fastify` target: fastify with @fastify/http-proxy (undici underneath,
 * its defaults), the proxy a Node user would likely pick. Arguments: port,
 * upstream port, the fastify and @fastify/http-proxy package paths.
 */
const FASTIFY_PROXY = `
const [port, upPort, fastifyPath, proxyPath] = process.argv.slice(1);
const app = require(fastifyPath)({ logger: false });
app.register(require(proxyPath), { upstream: 'http://127.0.0.1:' + upPort });
app.listen({ port: Number(port), host: '127.0.0.1' });
process.on('SIGQUIT', () => { app.close().then(() => process.exit(0)); });
`;

// -------------------------------------------------------------- CPU figures

const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** cutime + cstime of this process: CPU of the children it has reaped, in ticks. */
function childTicks(): number {
  return procStat('self', 13) + procStat('self', 14);
}

function procStat(pid: number | 'self', field: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[field]);
  } catch {
    return 0;
  }
}

/** A field of /proc/PID/stat summed over the process and its live children (a master's workers). */
function treeStat(pid: number, field: number): number {
  return procStat(pid, field) + childPids(pid).reduce((sum, child) => sum + treeStat(child, field), 0);
}

/** utime + stime of a process and its live children, all threads, in ticks. */
function procTicks(pid: number | undefined): number {
  return pid === undefined ? 0 : treeStat(pid, 11) + treeStat(pid, 12);
}

/** CPU numbers of a taskset list ("0", "0,2", "1-3"). */
function cpuSet(list: string): number[] {
  const out: number[] = [];
  for (const part of list.split(',')) {
    const [a, b] = part.split('-').map(Number);
    for (let c = a!; c <= (b ?? a!); c++) out.push(c);
  }
  return out;
}

/** Busy ticks of the whole machine, or of some CPUs, from /proc/stat. */
function busyTicks(cpus?: readonly number[]): number {
  try {
    const want = cpus ? new Set(cpus.map((c) => `cpu${c}`)) : new Set(['cpu']);
    let busy = 0;
    for (const line of readFileSync('/proc/stat', 'utf8').split('\n')) {
      const f = line.trim().split(/\s+/);
      if (!want.has(f[0]!)) continue;
      const v = f.slice(1, 9).map(Number);
      busy += v.reduce((x, y) => x + y, 0) - v[3]! - v[4]!;
    }
    return busy;
  } catch {
    return 0;
  }
}

/** Ticks of other processes than ours: on the servers' CPUs when pinned, else on the whole machine. */
class OtherLoad {
  private readonly m0: number;
  private readonly s0: number;
  private readonly sut0: number;
  private readonly all0: number;
  private readonly t0 = process.hrtime.bigint();

  constructor(private readonly o: Options, private readonly servers: Servers) {
    this.m0 = busyTicks();
    this.s0 = this.o.sutCpus === undefined ? 0 : busyTicks(cpuSet(this.o.sutCpus));
    this.sut0 = this.sutTicks();
    this.all0 = this.sut0 + procTicks(this.servers.upstream.child.pid);
  }

  private sutTicks(): number {
    return [...this.servers.sut.values()].reduce((a, s) => a + procTicks(s.proc.child.pid), 0);
  }

  /** Seconds since construction. */
  elapsedS(): number {
    return Number(process.hrtime.bigint() - this.t0) / 1e9;
  }

  /**
   * CPU of other processes, in % of one core: machine-wide, and on the
   * servers' CPUs (machine-wide again when unpinned). `extraTicks`: ticks of
   * our processes not tracked here (wrk).
   */
  read(extraTicks = 0): { machine: number; onServerCpus: number } {
    const pct = (ticks: number): number => (100 * Math.max(0, ticks)) / CLK_TCK / this.elapsedS();
    const sut = this.sutTicks();
    const all = sut + procTicks(this.servers.upstream.child.pid);
    const machine = pct(busyTicks() - this.m0 - (all - this.all0) - extraTicks);
    if (this.o.sutCpus === undefined) return { machine, onServerCpus: machine };
    return { machine, onServerCpus: pct(busyTicks(cpuSet(this.o.sutCpus)) - this.s0 - (sut - this.sut0)) };
  }
}

// ---------------------------------------------------------------------- wrk

/**
 * The figures of an h2load run: req/s from `finished in …, N req/s`, errors
 * from `requests: … failed, … errored, … timeout`, non-2xx from `status
 * codes:`. h2load prints no percentiles: p50 and p99 are NaN (printed "-").
 */
export function parseH2load(out: string): WrkResult {
  const rps = /finished in [\d.]+m?s, ([\d.]+) req\/s/.exec(out);
  if (!rps) throw new Error(`cannot read h2load's output:\n${out}`);
  const req = /requests: (\d+) total, \d+ started, \d+ done, \d+ succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(out);
  const codes = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(out);
  return {
    rps: Number(rps[1]),
    requests: req ? Number(req[1]) : 0,
    p50Ms: NaN,
    p99Ms: NaN,
    non2xx: codes ? Number(codes[2]) + Number(codes[3]) + Number(codes[4]) : 0,
    socketErrors: req ? Number(req[2]) + Number(req[3]) + Number(req[4]) : 0,
  };
}

interface Run extends WrkResult {
  target: Target;
  size: number;
  round: number;
  /** CPU of the server under test, in % of one core. */
  sutCpu: number;
  /** The kernel's part of sutCpu (stime). */
  sutSysCpu: number;
  /** CPU of the upstream and of wrk, in % of one core. */
  upstreamCpu: number;
  wrkCpu: number;
  /** CPU used on the machine by processes other than ours, in % of one core. */
  foreignCpu: number;
  /** CPU used on the servers' CPUs by processes other than ours (= foreignCpu when unpinned). */
  stolenCpu: number;
  /** Attempt of this round (0 = first); a round is run again when the machine was busy. */
  attempt: number;
  /** Whether this run counts (false: its round was run again). */
  counted: boolean;
  /** The server's highest resident memory during the run (master and workers added up), bytes. */
  peakRssBytes: number;
  /**
   * With --gc: V8 heap bytes jinx allocated per request, its GC pauses per
   * request (µs) and its collections during the run (the allocation is
   * counted at each collection: with few of them, the figure is rough); NaN otherwise.
   */
  allocBytesPerReq: number;
  /** With --gc: bytes its scavenges promoted to the old generation per request (NaN otherwise). */
  promotedBytesPerReq: number;
  gcUsPerReq: number;
  collections: number;
}

/**
 * The `--trace-gc --trace-gc-nvp` lines of one jinx (its stdout), as they
 * come: for each collection, the bytes allocated since the one before
 * (`allocated=`), the bytes a scavenge moved to the old generation
 * (`promoted=`) and the pause (`pause=`, ms).
 */
class GcTrace {
  private readonly events: { allocBytes: number; promotedBytes: number; pauseMs: number }[] = [];
  private partial = '';

  /** Takes a piece of the process's stdout. */
  take(text: string): void {
    const lines = (this.partial + text).split('\n');
    this.partial = lines.pop()!;
    for (const line of lines) {
      // "[pid:0x…]  1234 ms: pause=1.2 mutator=… gc=s … allocated=11688544 promoted=63136 …" (gc=s: a scavenge)
      const fields = new Map([...line.matchAll(/ ([\w.]+)=([^ ]*)/g)].map((m) => [m[1]!, m[2]!]));
      const kind = fields.get('gc');
      if (kind === undefined) continue;
      this.events.push({
        allocBytes: Number(fields.get('allocated')),
        promotedBytes: kind === 's' ? Number(fields.get('promoted')) : 0,
        pauseMs: Number(fields.get('pause')),
      });
    }
  }

  /** Where the trace is now, to measure from. */
  mark(): number {
    return this.events.length;
  }

  /**
   * Heap bytes allocated, bytes scavenges promoted, and pause ms of the
   * collections since `from` (allocation after the last collection of the
   * window counts in the next window).
   */
  since(from: number): { allocBytes: number; promotedBytes: number; pauseMs: number; collections: number } {
    let allocBytes = 0;
    let promotedBytes = 0;
    let pauseMs = 0;
    for (const e of this.events.slice(from)) {
      allocBytes += e.allocBytes;
      promotedBytes += e.promotedBytes;
      pauseMs += e.pauseMs;
    }
    return { allocBytes, promotedBytes, pauseMs, collections: this.events.length - from };
  }
}

interface Servers {
  upstream: Proc;
  sut: Map<Target, { proc: Proc; port: number; idleRssBytes: number; settledRssBytes: number; gc: GcTrace | undefined }>;
}

/** CPU used by other processes than ours over `ms` (the figure --max-other applies to), in % of one core. */
async function otherLoad(o: Options, servers: Servers, ms: number): Promise<number> {
  const l = new OtherLoad(o, servers);
  await sleep(ms);
  return l.read().onServerCpus;
}

/** Waits until other processes use less than --max-other, for at most --quiet-wait. */
async function waitQuiet(o: Options, servers: Servers): Promise<void> {
  if (o.quietWaitS <= 0) return;
  const deadline = Date.now() + o.quietWaitS * 1000;
  let load = await otherLoad(o, servers, 500);
  if (load <= o.maxOther) return;
  process.stdout.write(`  (machine busy: other processes take ${fmtPct(load)} of a core${o.sutCpus === undefined ? '' : ` on CPU ${o.sutCpus}`}, waiting up to ${o.quietWaitS} s)\n`);
  while (Date.now() < deadline) {
    load = await otherLoad(o, servers, 1000);
    if (load <= o.maxOther) return;
  }
  process.stdout.write(`  (still busy: ${fmtPct(load)}, measuring anyway)\n`);
}

async function runWrk(o: Options, servers: Servers, target: Target, size: number, seconds: number): Promise<Omit<Run, 'target' | 'size' | 'round' | 'attempt' | 'counted'>> {
  const { proc, port } = servers.sut.get(target)!;
  const url = `${o.protocol === 'h1' ? 'http' : 'https'}://127.0.0.1:${port}${bodyPath(size)}`;
  const sut0 = procTicks(proc.child.pid);
  const sys0 = treeStat(proc.child.pid!, 12);
  const up0 = procTicks(servers.upstream.child.pid);
  const children0 = childTicks();
  const rss = rssSampler(proc.child.pid!, 100);
  const { gc } = servers.sut.get(target)!;
  const gc0 = gc?.mark();
  const load = new OtherLoad(o, servers);
  const wrk = o.protocol === 'h2'
    ? start('wrk', 'h2load', [`-c${o.connections}`, `-t${o.threads}`, `-m${o.streams}`, `-D${seconds}`, url], { cpus: o.auxCpus, niceness: o.nice, stdout: 'pipe', stopSignal: 'SIGKILL' })
    : start('wrk', 'wrk', [`-c${o.connections}`, `-t${o.threads}`, `-d${seconds}s`, '--latency', url], { cpus: o.auxCpus, niceness: o.nice, stdout: 'pipe', stopSignal: 'SIGKILL' });
  let out = '';
  wrk.child.stdout?.on('data', (d: Buffer) => { out += d.toString(); });
  // wrk is bounded by -d; this only guards against a hung one (h2load keeps a client that connected
  // after its run ended going, seen with -c64 -m10 against a server slow to take 64 TLS handshakes)
  let hung = false;
  const guard = setTimeout(() => {
    hung = true;
    wrk.child.kill('SIGKILL');
  }, (seconds + 30) * 1000);
  const code = await wrk.exited;
  clearTimeout(guard);
  // wrk is the only child reaped during the run: its CPU is in our cutime + cstime
  const wrkTicks = childTicks() - children0;
  const other = load.read(wrkTicks);
  const elapsedS = load.elapsedS();
  const sutTicks = procTicks(proc.child.pid) - sut0;
  const sysTicks = treeStat(proc.child.pid!, 12) - sys0;
  const upTicks = procTicks(servers.upstream.child.pid) - up0;
  const peakRssBytes = rss.stop();
  await stop(wrk, 'SIGKILL');
  const tool = o.protocol === 'h2' ? 'h2load' : 'wrk';
  if (hung) throw new Error(`${tool} did not end ${seconds + 30} s after its start against ${target} (fewer --connections may help):\n${out}\n${wrk.stderr}`);
  if (code !== 0) throw new Error(`${tool} exited with ${code}${wrk.exitSignal ? ` (${wrk.exitSignal})` : ''} against ${target}:\n${out}\n${wrk.stderr}`);
  if (proc.exitCode !== undefined) throw new Error(`${target} exited (${proc.exitCode}) during the run:\n${proc.stderr}`);
  const pct = (ticks: number): number => (100 * ticks) / CLK_TCK / elapsedS;
  const result = o.protocol === 'h2' ? parseH2load(out) : parseWrk(out);
  const collected = gc?.since(gc0!);
  return {
    ...result,
    sutCpu: pct(sutTicks), sutSysCpu: pct(sysTicks), upstreamCpu: pct(upTicks), wrkCpu: pct(wrkTicks), foreignCpu: other.machine, stolenCpu: other.onServerCpus,
    peakRssBytes,
    allocBytesPerReq: collected ? collected.allocBytes / result.requests : NaN,
    promotedBytesPerReq: collected ? collected.promotedBytes / result.requests : NaN,
    gcUsPerReq: collected ? (collected.pauseMs * 1000) / result.requests : NaN,
    collections: collected ? collected.collections : NaN,
  };
}

// ------------------------------------------------------------------- report

/** The load generator and its settings, as the report names them. */
const loadTool = (o: Options): string => (o.protocol === 'h2'
  ? `h2load -c${o.connections} -t${o.threads} -m${o.streams} (HTTP/2 over TLS)`
  : `wrk -c${o.connections} -t${o.threads}${o.protocol === 'https' ? ' (HTTP/1.1 over TLS)' : ''}`);

const fmtInt = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '-');
const fmtMs = (n: number): string => (!Number.isFinite(n) ? '-' : n < 1 ? `${(n * 1000).toFixed(0)} us` : `${n.toFixed(2)} ms`);
const fmtPct = (n: number): string => (Number.isFinite(n) ? `${n.toFixed(0)}%` : '-');
const fmtSize = (n: number): string => (n % (1024 * 1024) === 0 ? `${n / 1024 / 1024} MiB` : n % 1024 === 0 ? `${n / 1024} KiB` : `${n} B`);
const pad = (s: string, n: number): string => s.padStart(n);
const fmtMiB = (bytes: number): string => `${(bytes / MiB).toFixed(1)} MiB`;

function runLine(r: Run): string {
  const errs = r.non2xx || r.socketErrors ? `  errors: ${r.non2xx} non-2xx, ${r.socketErrors} socket` : '';
  return `  ${r.round === 0 ? 'warm-up' : `round ${r.round}`}  ${r.target.padEnd(11)} ${pad(fmtInt(r.rps), 9)} req/s  p50 ${pad(fmtMs(r.p50Ms), 9)}  p99 ${pad(fmtMs(r.p99Ms), 9)}`
    + `  rss ${pad(fmtMiB(r.peakRssBytes), 9)}${Number.isFinite(r.allocBytesPerReq) ? `  heap ${fmtInt(r.allocBytesPerReq)} B/req promoted ${fmtInt(r.promotedBytesPerReq)} B/req gc ${r.gcUsPerReq.toFixed(1)} us/req (${r.collections} GCs)` : ''}  cpu: server ${pad(fmtPct(r.sutCpu), 4)} upstream ${pad(fmtPct(r.upstreamCpu), 4)} wrk ${pad(fmtPct(r.wrkCpu), 4)} others ${pad(fmtPct(r.foreignCpu), 4)} (${fmtPct(r.stolenCpu)} on the server's CPU)${errs}`;
}

/** How many CPUs a taskset list names ("0", "0,2", "1-3"). */
function cpuCount(list: string | undefined, dflt: number): number {
  if (list === undefined) return dflt;
  return list.split(',').reduce((n, part) => {
    const [a, b] = part.split('-').map(Number);
    return n + (b === undefined ? 1 : b - a! + 1);
  }, 0);
}

/** Requests per second of the server's own CPU time. */
const perCpu = (r: Run): number => (r.sutCpu > 0 ? r.rps / (r.sutCpu / 100) : NaN);
/** Microseconds of the server's CPU per request, user and kernel. */
const usPerReq = (r: Run, part: 'user' | 'sys'): number => (10_000 * (part === 'sys' ? r.sutSysCpu : r.sutCpu - r.sutSysCpu)) / r.rps;

function summary(o: Options, runs: Run[], servers: Servers): string {
  const lines: string[] = [];
  const counted = runs.filter((r) => r.counted);
  lines.push('', `== summary: medians of ${o.rounds} rounds × ${o.durationS} s, ${loadTool(o)}`
    + (o.sutCpus !== undefined ? `, servers on CPU ${o.sutCpus}, upstream (${o.upstream}) and wrk on CPU ${o.auxCpus}` : ', unpinned'));
  lines.push(`${'body'.padEnd(8)} ${'server'.padEnd(11)} ${pad('req/s', 9)} ${pad('p99', 9)} ${pad('peak rss', 10)} ${pad('server cpu', 10)} ${pad('req/cpu-s', 10)} ${pad('us/req usr+sys', 15)} ${pad('stolen cpu', 11)}${o.gc ? ` ${pad('heap B/req', 11)} ${pad('promoted B/req', 15)} ${pad('gc us/req', 10)}` : ''}`);
  for (const size of o.sizes) {
    const med: Partial<Record<Target, { rps: number; perCpu: number }>> = {};
    for (const t of o.targets) {
      const rs = counted.filter((r) => r.size === size && r.target === t);
      med[t] = { rps: median(rs.map((r) => r.rps)), perCpu: median(rs.map(perCpu)) };
      lines.push(`${fmtSize(size).padEnd(8)} ${t.padEnd(11)} ${pad(fmtInt(med[t]!.rps), 9)} ${pad(fmtMs(median(rs.map((r) => r.p99Ms))), 9)}`
        + ` ${pad(fmtMiB(Math.max(...runs.filter((r) => r.size === size && r.target === t).map((r) => r.peakRssBytes))), 10)}`
        + ` ${pad(fmtPct(median(rs.map((r) => r.sutCpu))), 10)} ${pad(fmtInt(med[t]!.perCpu), 10)}`
        + ` ${pad(`${median(rs.map((r) => usPerReq(r, 'user'))).toFixed(1)}+${median(rs.map((r) => usPerReq(r, 'sys'))).toFixed(1)}`, 15)}`
        + ` ${pad(fmtPct(median(rs.map((r) => r.stolenCpu))), 11)}`
        + (o.gc ? ` ${pad(fmtInt(median(rs.map((r) => r.allocBytesPerReq))), 11)} ${pad(fmtInt(median(rs.map((r) => r.promotedBytesPerReq))), 15)} ${pad(median(rs.map((r) => r.gcUsPerReq)).toFixed(1), 10)}` : ''));
    }
    if (med.jinx !== undefined && med.nginx !== undefined) {
      const paired: number[] = [];
      for (let i = 1; i <= o.rounds; i++) {
        const j = counted.find((r) => r.size === size && r.target === 'jinx' && r.round === i);
        const n = counted.find((r) => r.size === size && r.target === 'nginx' && r.round === i);
        if (j && n) paired.push(j.rps / n.rps);
      }
      lines.push(`${fmtSize(size).padEnd(8)} ratio jinx/nginx ${(med.jinx.rps / med.nginx.rps).toFixed(3)}`
        + `  (per round: median ${median(paired).toFixed(3)}, range ${Math.min(...paired).toFixed(3)}–${Math.max(...paired).toFixed(3)};`
        + ` per CPU-second: ${(med.jinx.perCpu / med.nginx.perCpu).toFixed(3)})`);
    }
    if (med.jinx !== undefined && med.bare !== undefined) {
      lines.push(`${fmtSize(size).padEnd(8)} ratio jinx/bare ${(med.jinx.rps / med.bare.rps).toFixed(3)} (bare: ${o.protocol === 'h2' ? 'node:http2' : 'node:http'} + undici and nothing else)`);
    }
    if (med.jinx !== undefined && med['jinx-status'] !== undefined) {
      lines.push(`${fmtSize(size).padEnd(8)} ratio jinx-status/jinx ${(med['jinx-status'].rps / med.jinx.rps).toFixed(3)} (with a stub_status location)`);
    }
    if (med.jinx !== undefined && med['jinx-limit'] !== undefined) {
      lines.push(`${fmtSize(size).padEnd(8)} ratio jinx-limit/jinx ${(med['jinx-limit'].rps / med.jinx.rps).toFixed(3)} (with limit_req on every request)`);
    }
    if (med.jinx !== undefined && med['jinx-base'] !== undefined) {
      lines.push(`${fmtSize(size).padEnd(8)} ratio jinx/jinx-base ${(med.jinx.rps / med['jinx-base'].rps).toFixed(3)} (jinx-base: ${o.jinxBase})`);
    }
    if (med.jinx !== undefined && med.fastify !== undefined) {
      lines.push(`${fmtSize(size).padEnd(8)} ratio jinx/fastify ${(med.jinx.rps / med.fastify.rps).toFixed(3)} (fastify + @fastify/http-proxy)`);
    }
  }
  lines.push(`idle rss (listening for a second, before any request): ${o.targets.map((t) => `${t} ${fmtMiB(servers.sut.get(t)!.idleRssBytes)}`).join(', ')}`);
  if (o.settleS > 0) lines.push(`idle rss at least ${o.settleS} s after listening, before any request: ${o.targets.map((t) => `${t} ${fmtMiB(servers.sut.get(t)!.settledRssBytes)}`).join(', ')}`);
  lines.push(`peak rss: the highest resident memory in any run of that body size, warm-up included: the kernel's high-water mark (VmHWM, reset as each run starts)${o.workers === undefined ? '' : ' of the master and of each worker, added up (an upper bound: they may peak at different times)'}, or samples every 100 ms where the mark cannot be reset`);
  const discarded = runs.filter((r) => r.round > 0 && !r.counted).length;
  if (discarded > 0) lines.push(`note: ${discarded} run(s) were discarded and run again because other processes were busy`);
  if (o.gc) lines.push('(heap B/req: V8 heap bytes jinx allocated per request, read from --trace-gc-nvp; promoted B/req: of those, what its scavenges moved to the old generation (garbage there waits for a mark-compact: a few % of heap B/req means something keeps requests alive past their end); gc us/req: its GC pauses, wall-clock)');
  lines.push(`(stolen cpu: CPU taken by other processes on the servers' CPU${o.sutCpus === undefined ? ' (here: the whole machine, unpinned)' : ''}; req/cpu-s: requests per second of the server's own CPU time; us/req: the server's CPU per request, user + kernel)`);
  const busy = counted.filter((r) => r.stolenCpu > o.maxOther).length;
  if (busy > 0) lines.push(`note: in ${busy} counted run(s) other processes took more than ${o.maxOther}% of a core from the servers: the machine was not quiet, the figures are noisy`);
  const sutIdle = counted.filter((r) => r.sutCpu < 85 * cpuCount(o.sutCpus, 1)).length;
  if (o.sutCpus !== undefined && sutIdle > 0) lines.push(`note: in ${sutIdle} counted run(s) the server used less than 85% of its CPU: it was not the only limit`);
  const auxBusy = counted.filter((r) => r.upstreamCpu + r.wrkCpu > 90 * cpuCount(o.auxCpus, 2)).length;
  if (auxBusy > 0) lines.push(`note: in ${auxBusy} counted run(s) upstream + wrk used >90% of their CPUs: those figures may be limited by the load side, not the server`);
  return lines.join('\n');
}

// --------------------------------------------------------------------- main

async function startServers(o: Options, dir: string): Promise<Servers> {
  // the upstream
  const upPort = await freePort();
  let upstream: Proc;
  if (o.upstream === 'nginx') {
    const upDir = join(dir, 'upstream');
    mkdirSync(join(upDir, 'logs'), { recursive: true });
    mkdirSync(join(upDir, 'html'));
    for (const size of o.sizes) writeFileSync(join(upDir, 'html', bodyPath(size).slice(1)), Buffer.alloc(size, 'x'));
    writeFileSync(join(upDir, 'nginx.conf'), upstreamNginxConf(upDir, upPort, o.sizes));
    upstream = start('upstream', o.nginx, ['-p', `${upDir}/`, '-c', join(upDir, 'nginx.conf')], { cpus: o.auxCpus, niceness: o.nice });
  } else {
    const script = o.upstream === 'fastcgi' ? FASTCGI_UPSTREAM : NODE_UPSTREAM;
    upstream = start('upstream', process.execPath, ['-e', script, String(upPort), ...o.sizes.map(String)], { cpus: o.auxCpus, niceness: o.nice });
  }
  await waitListening(upstream, upPort);

  const tlsDir = join(dir, 'tls');
  if (o.protocol !== 'h1') {
    mkdirSync(tlsDir);
    const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
      '-subj', '/CN=bench.test', '-keyout', join(tlsDir, 'key.pem'), '-out', join(tlsDir, 'cert.pem')], { encoding: 'utf8' });
    if (made.status !== 0) throw new Error(`openssl could not make the test certificate:\n${made.stderr}`);
  }
  const sut: Servers['sut'] = new Map();
  for (const t of o.targets) {
    const prof = o.profileDir ? ['--cpu-prof', `--cpu-prof-dir=${join(o.profileDir, t)}`] : [];
    const tDir = join(dir, t);
    mkdirSync(join(tDir, 'logs'), { recursive: true });
    const port = await freePort();
    const conf = join(tDir, 'nginx.conf');
    const extra: Extra = t === 'jinx-status' ? 'status' : t === 'jinx-limit' ? 'limit' : 'none';
    writeFileSync(conf, proxyConf(tDir, port, upPort, o.workers, o.protocol === 'h1' ? undefined : { dir: tlsDir, http2: o.protocol === 'h2' }, extra, o.upstream === 'fastcgi'));
    const args = ['-p', `${tDir}/`, '-c', conf];
    let proc: Proc;
    let gc: GcTrace | undefined;
    if (t === 'nginx') proc = start('nginx', o.nginx, args, { cpus: o.sutCpus, niceness: o.nice });
    else if (t === 'bare') {
      const script = o.protocol === 'h2' ? [BARE_H2_PROXY, String(port), String(upPort), join(ROOT, 'node_modules/undici'), join(tlsDir, 'cert.pem'), join(tlsDir, 'key.pem')]
        : [BARE_PROXY, String(port), String(upPort), join(ROOT, 'node_modules/undici')];
      proc = start('bare', process.execPath, [...prof, '-e', ...script], { cpus: o.sutCpus, niceness: o.nice });
    }
    else if (t === 'fastify') {
      proc = start('fastify', process.execPath, [...prof, '-e', FASTIFY_PROXY, String(port), String(upPort), join(ROOT, 'node_modules/fastify'), join(ROOT, 'node_modules/@fastify/http-proxy')], { cpus: o.sutCpus, niceness: o.nice });
    }
    else {
      const env = { ...process.env, JINX_NODE_FLAGS: [...o.nodeFlags, ...prof, ...(o.gc ? ['--trace-gc', '--trace-gc-nvp'] : [])].join(' ') };
      proc = start(t, t === 'jinx-base' ? o.jinxBase! : JINX, args, { cpus: o.sutCpus, niceness: o.nice, env, stdout: o.gc ? 'pipe' : 'ignore' });
      if (o.gc) {
        gc = new GcTrace();
        proc.child.stdout!.on('data', (d: Buffer) => gc!.take(d.toString()));
      }
    }
    await waitListening(proc, port);
    // idle: listening a second, nothing served yet
    await sleep(1000);
    sut.set(t, { proc, port, idleRssBytes: treeRssBytes(proc.child.pid!), settledRssBytes: NaN, gc });
  }
  if (o.settleS > 0) {
    // the servers started one after the other: the last one waits the whole time, the others less
    await sleep(Math.max(o.settleS - 1, 0) * 1000);
    for (const s of sut.values()) s.settledRssBytes = treeRssBytes(s.proc.child.pid!);
  }
  return { upstream, sut };
}

/** Every body through every server must come back whole before anything is measured. */
async function check(o: Options, servers: Servers): Promise<void> {
  for (const [t, { port }] of servers.sut) {
    for (const size of o.sizes) {
      const r = await get(port, bodyPath(size), o.protocol);
      if (r.status !== 200 || r.length !== size) throw new Error(`${t}: GET ${bodyPath(size)} gave ${r.status} with ${r.length} bytes, not 200 with ${size}`);
    }
  }
}

async function main(): Promise<number> {
  const o = options(process.argv.slice(2));
  if (!hasCommand('wrk')) throw new Error('wrk is not installed (apt-get install -y wrk)');
  if (!existsSync(join(ROOT, 'dist/src/cli/main.js'))) throw new Error(`no build in ${ROOT}/dist: run npx tsc -p . first`);
  if (!Number.isInteger(o.nice) || o.nice < -20 || o.nice > 19) throw new Error(`--nice wants an integer from -20 to 19`);
  const tempRoot = makeTemp('jinx-bench-', o.keep);
  const profileDirs = o.profileDir ? o.targets.filter((t) => t !== 'nginx').map((t) => join(o.profileDir!, t)) : [];
  for (const d of profileDirs) mkdirSync(d, { recursive: true });
  const profilesBefore = new Set(profileDirs.flatMap((d) => readdirSync(d).map((f) => join(d, f))));

  const servers = await startServers(o, tempRoot);
  await check(o, servers);
  const versions = `node ${process.version}, ${spawnSync(o.nginx, ['-v'], { encoding: 'utf8' }).stderr.trim().replace(/^nginx version: /, '')}`;
  process.stdout.write(`jinx proxy benchmark: ${versions}, ${loadTool(o)} for ${o.durationS} s, ${o.rounds} rounds, warm-up ${o.warmupS} s`
    + (o.nice !== 0 ? `\nnice: ${o.nice} for the servers, the upstream and wrk` : '')
    + `\nprocesses: ${o.workers === undefined ? 'one each (master_process off)' : `a master and ${o.workers} worker(s) each`}`
    + `\npinning: ${o.sutCpus !== undefined ? `jinx and nginx on CPU ${o.sutCpus}; upstream (${o.upstream}) and wrk on CPU ${o.auxCpus}` : 'none'}`
    + `\nprefix: ${tempRoot}${o.keep ? ' (kept)' : ''}\n`);

  const runs: Run[] = [];
  for (const size of o.sizes) {
    process.stdout.write(`\n-- ${fmtSize(size)} body (GET ${bodyPath(size)})\n`);
    if (o.warmupS > 0) {
      for (const t of o.targets) {
        const r: Run = { target: t, size, round: 0, attempt: 0, counted: false, ...(await runWrk(o, servers, t, size, o.warmupS)) };
        runs.push(r);
        process.stdout.write(runLine(r) + '\n');
      }
    }
    for (let round = 1; round <= o.rounds; round++) {
      for (let attempt = 0; ; attempt++) {
        await waitQuiet(o, servers);
        const pair: Run[] = [];
        for (const t of o.targets) {
          await sleep(300);
          const r: Run = { target: t, size, round, attempt, counted: true, ...(await runWrk(o, servers, t, size, o.durationS)) };
          pair.push(r);
          runs.push(r);
          process.stdout.write(runLine(r) + '\n');
        }
        const busy = pair.some((r) => r.stolenCpu > o.maxOther);
        if (!busy || attempt >= o.retries) break;
        for (const r of pair) r.counted = false;
        process.stdout.write(`  (round ${round} discarded: other processes took more than ${o.maxOther}% of a core from the servers; running it again)\n`);
      }
    }
  }
  process.stdout.write(summary(o, runs, servers) + '\n');

  const logs: string[] = [];
  for (const [t, { proc }] of servers.sut) {
    await stop(proc);
    const log = join(tempRoot, t, 'logs/error.log');
    const lines = existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter((l) => /\[(warn|error|crit|alert|emerg)\]/.test(l)) : [];
    if (lines.length > 0) logs.push(`${t}: ${lines.length} warn+ lines in error.log, first: ${lines[0]}`);
  }
  await stop(servers.upstream);
  for (const l of logs) process.stdout.write(`note: ${l}\n`);

  if (o.json) {
    const idleRssBytes = Object.fromEntries([...servers.sut].map(([t, s]) => [t, s.idleRssBytes]));
    writeFileSync(o.json, JSON.stringify({ options: { ...o, nodeFlags: o.nodeFlags }, versions, idleRssBytes, runs }, null, 2) + '\n');
    process.stdout.write(`runs written to ${o.json}\n`);
  }
  if (o.profileDir) {
    const fresh = profileDirs.flatMap((d) => readdirSync(d).map((f) => join(d, f))).filter((f) => f.endsWith('.cpuprofile') && !profilesBefore.has(f));
    for (const path of fresh) {
      process.stdout.write(`\n== CPU profile ${path}\n${formatSummary(summarizeProfile(JSON.parse(readFileSync(path, 'utf8'))), 25)}\n`);
    }
    if (fresh.length === 0) process.stdout.write(`note: no server wrote a profile to ${o.profileDir}\n`);
  }
  const bad = runs.filter((r) => r.non2xx > 0);
  if (bad.length > 0) {
    process.stderr.write(`bench: ${bad.length} run(s) had non-2xx responses (${[...new Set(bad.map((r) => r.target))].join(', ')}): the figures are not valid\n`);
    return 2;
  }
  return 0;
}

main().then(
  (code) => { removeTemp(); process.exitCode = code; },
  async (err: unknown) => {
    if (interrupted()) return; // the signal handler stops everything and exits
    process.stderr.write(`bench: ${process.env.BENCH_DEBUG ? (err as Error)?.stack ?? err : (err as Error)?.message ?? err}\n`);
    await stopAll();
    removeTemp();
    process.exitCode = 1;
  },
);
