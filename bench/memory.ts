/**
 * Memory benchmark: how much jinx's resident memory grows while it proxies
 * a large response to a slow client, takes a large request body, and holds
 * many idle keep-alive connections, and whether its temp files are gone
 * afterwards.
 *
 *   npx tsc -p . && node dist/bench/memory.js [--size 1g] [--rate 1m] …
 *
 * Three measurements, each against a fresh jinx process on 127.0.0.1 that
 * has served one small request of each kind (its RSS is read from
 * /proc/PID/status: the high-water mark, reset as the phase starts, and
 * samples every 50 ms; growth is the peak minus the RSS just before the
 * phase started):
 *
 * 1. download: a `--size` response from an upstream that sends as fast as
 *    jinx takes it, to a client that reads `--rate` bytes a second. With
 *    `proxy_buffering on` jinx reads the upstream at full speed and spools
 *    what the client has not taken to a temp file. The client reads at that
 *    rate until the upstream has sent everything (the part of the run where
 *    buffering matters), then as fast as it can, unless `--slow-all` (then
 *    the whole response is read at the rate: 1 GiB at 1 MiB/s takes 17 min).
 * 2. upload: a `--size` request body sent as fast as jinx takes it, buffered
 *    to a temp file (`proxy_request_buffering on`), then passed to an
 *    upstream that reads it at full speed.
 * 3. idle: `--idle` keep-alive connections, each after one request.
 * 4. cached: a `--size` response through `proxy_cache`: stored in the
 *    cache while a client downloads it at full speed (a MISS; the upstream is
 *    read no faster than the entry's file takes it), then served from the
 *    cache (a HIT) to a client that reads `--rate` bytes a second for
 *    `--cached-slow` seconds (all of it with `--slow-all`), then as fast as
 *    it can. The entry streams from its file as the client takes it.
 *
 * After each of the first two, the temp directories must be empty and jinx
 * must hold no temp file open. Exit status: 0 when everything ran and every
 * figure is within its limit (`--limit-download`, `--limit-upload`,
 * `--limit-idle`, MiB); 1 when something could not be started or measured;
 * 2 when a figure is over its limit or a temp file was left. Every process
 * it starts is stopped by its pid, also on SIGINT/SIGTERM/SIGHUP; the
 * temporary prefix is removed unless `--keep`. See bench/README.md.
 */
import { readdirSync, readlinkSync, writeFileSync, mkdirSync, existsSync, statSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, JINX, makeTemp, MiB, parseSize, removeTemp, rssSampler, runBench, sleep, start, stop, treeRssBytes, waitListening } from './procs.js';

const USAGE = `usage: node dist/bench/memory.js [options]
  --size SIZE        response and request body size, k/m/g suffix allowed (default 1g)
  --rate SIZE        bytes a second the slow client reads (default 1m)
  --slow-all         read the whole response at --rate (default: until the upstream has sent it all)
  --idle N           idle keep-alive connections (default 1000)
  --phases LIST      download,upload,idle,cached (default all four)
  --cached-slow S    seconds the cached phase reads at --rate before full speed (default 30)
  --limit-download N, --limit-upload N, --limit-idle N, --limit-cached N
                     RSS growth limits in MiB (default 64, 64, 40, 64)
  --json FILE        write the figures as JSON
  --keep             keep the temporary prefix (configuration, logs, temp dirs)
  -h, --help`;

const PHASES = ['download', 'upload', 'idle', 'cached'] as const;
type Phase = typeof PHASES[number];

interface Options {
  size: number;
  rate: number;
  slowAll: boolean;
  idle: number;
  phases: Phase[];
  cachedSlowS: number;
  limits: Record<Phase, number>;
  json: string | undefined;
  keep: boolean;
}

function options(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      size: { type: 'string' }, rate: { type: 'string' }, 'slow-all': { type: 'boolean' }, idle: { type: 'string' },
      phases: { type: 'string' }, 'cached-slow': { type: 'string' }, 'limit-download': { type: 'string' }, 'limit-upload': { type: 'string' },
      'limit-idle': { type: 'string' }, 'limit-cached': { type: 'string' }, json: { type: 'string' }, keep: { type: 'boolean' }, help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    process.exit(0);
  }
  const phases = (values.phases ?? PHASES.join(',')).split(',').map((p) => p.trim()) as Phase[];
  for (const p of phases) if (!PHASES.includes(p)) throw new Error(`unknown phase "${p}"`);
  const limit = (v: string | undefined, dflt: number): number => (v === undefined ? dflt : Number(v));
  return {
    size: parseSize(values.size ?? '1g'),
    rate: parseSize(values.rate ?? '1m'),
    slowAll: values['slow-all'] ?? false,
    idle: Number(values.idle ?? 1000),
    phases,
    cachedSlowS: Number(values['cached-slow'] ?? 30),
    limits: {
      download: limit(values['limit-download'], 64), upload: limit(values['limit-upload'], 64),
      idle: limit(values['limit-idle'], 40), cached: limit(values['limit-cached'], 64),
    },
    json: values.json,
    keep: values.keep ?? false,
  };
}

// ------------------------------------------------------------------ memory

/** Files under `dir` (recursively) and jinx's open descriptors on files under it. */
function leftovers(pid: number, dir: string): { files: string[]; open: string[] } {
  const files: string[] = [];
  const walk = (d: string): void => {
    if (!existsSync(d)) return;
    for (const name of readdirSync(d)) {
      const path = join(d, name);
      if (statSync(path).isDirectory()) walk(path);
      else files.push(path.slice(dir.length + 1));
    }
  };
  walk(dir);
  const open: string[] = [];
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      if (target.startsWith(dir)) open.push(target.slice(dir.length + 1));
    } catch {
      // closed while listing
    }
  }
  return { files, open };
}

// ------------------------------------------------------------------ servers

/**
 * The upstream (a child process, so that its memory is its own):
 * `GET /big` answers `size` bytes (`/big/N`: N bytes) as fast as the
 * connection takes them and prints `sent` when the last byte is handed to
 * the kernel; `POST /sink`
 * reads the body and answers with its length; anything else answers "ok".
 */
const UPSTREAM = `
const http = require('node:http');
const [port, size] = process.argv.slice(1).map(Number);
const chunk = Buffer.alloc(64 * 1024, 'x');
http.createServer({ keepAliveTimeout: 300000 }, (req, res) => {
  const big = /^\\/big(?:\\/(\\d+))?$/.exec(req.url);
  if (big) {
    const length = big[1] ? Number(big[1]) : size;
    res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': length });
    let left = length;
    const pump = () => {
      while (left > 0) {
        const n = Math.min(left, chunk.length);
        left -= n;
        if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return res.once('drain', pump);
      }
      res.end(() => process.stdout.write('sent\\n'));
    };
    pump();
    return;
  }
  let length = 0;
  req.on('data', (c) => { length += c.length; });
  req.on('end', () => res.end(req.url === '/sink' ? String(length) : 'ok'));
}).listen(port, '127.0.0.1');
`;

function jinxConf(dir: string, port: number, upstreamPort: number, idle: number): string {
  return `daemon off;
master_process off;
pid ${dir}/jinx.pid;
error_log ${dir}/logs/error.log warn;
events { worker_connections ${Math.max(4096, idle * 2)}; }
http {
  access_log off;
  client_body_temp_path ${dir}/tmp/body 1 2;
  proxy_temp_path ${dir}/tmp/proxy 1 2;
  fastcgi_temp_path ${dir}/tmp/fastcgi;
  proxy_cache_path ${dir}/cache levels=1:2 keys_zone=bench:1m use_temp_path=off;
  client_max_body_size 0;
  server {
    listen 127.0.0.1:${port} backlog=4096;
    location / { proxy_pass http://127.0.0.1:${upstreamPort}; }
    location /big { proxy_max_temp_file_size 4096m; proxy_pass http://127.0.0.1:${upstreamPort}; }
    location /cached/ { proxy_cache bench; proxy_cache_valid 1h; proxy_pass http://127.0.0.1:${upstreamPort}/; }
    location = /small { return 200 "ok\\n"; }
  }
}
`;
}

// ------------------------------------------------------------------ phases

interface Figure {
  readonly phase: string;
  readonly baseline: number;
  readonly peak: number;
  readonly growth: number;
  readonly limit: number;
  readonly seconds: number;
  readonly note: string;
  readonly leftFiles: string[];
  readonly leftOpen: string[];
}

/** The response of a raw exchange: head and body length. */
interface Received {
  status: number;
  bodyBytes: number;
}

/**
 * Downloads `path` (`size` bytes) reading at most `rate` bytes a second while `slow()`
 * holds, then at full speed; resolves when the body is complete.
 */
function slowDownload(port: number, path: string, size: number, rate: number, slow: () => boolean): Promise<Received> {
  return new Promise((res, rej) => {
    const sock = connect({ host: '127.0.0.1', port });
    let head = '';
    let status = 0;
    let bodyBytes = 0;
    let budget = 0;
    let last = Date.now();
    sock.on('connect', () => sock.write(`GET ${path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n`));
    const ticker = setInterval(() => {
      const now = Date.now();
      budget = Math.min(rate, budget + ((now - last) / 1000) * rate);
      last = now;
      if (!slow() || budget > 0) sock.resume();
    }, 20);
    sock.on('data', (d: Buffer) => {
      let data = d;
      if (!status) {
        head += d.toString('latin1');
        const end = head.indexOf('\r\n\r\n');
        if (end === -1) return;
        status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0);
        data = d.subarray(d.length - (head.length - end - 4));
      }
      bodyBytes += data.length;
      budget -= data.length;
      if (slow() && budget <= 0) sock.pause();
    });
    sock.on('error', rej);
    sock.on('close', () => {
      clearInterval(ticker);
      if (bodyBytes === size) res({ status, bodyBytes });
      else rej(new Error(`download ended after ${bodyBytes} of ${size} bytes (status ${status})`));
    });
  });
}

/** Sends a `size`-byte body to `/sink` as fast as the connection takes it; resolves to what the upstream counted. */
function upload(port: number, size: number): Promise<{ status: number; echoed: number }> {
  return new Promise((res, rej) => {
    const sock = connect({ host: '127.0.0.1', port });
    const chunk = Buffer.alloc(64 * 1024, 'y');
    let text = '';
    sock.on('connect', () => {
      sock.write(`POST /sink HTTP/1.1\r\nHost: bench\r\nConnection: close\r\nContent-Length: ${size}\r\n\r\n`);
      let left = size;
      const pump = (): void => {
        while (left > 0) {
          const n = Math.min(left, chunk.length);
          left -= n;
          if (!sock.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
            sock.once('drain', pump);
            return;
          }
        }
      };
      pump();
    });
    sock.on('data', (d: Buffer) => { text += d.toString('latin1'); });
    sock.on('error', rej);
    sock.on('close', () => {
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      res({ status, echoed: Number(text.slice(text.indexOf('\r\n\r\n') + 4)) });
    });
  });
}

/** Opens `n` connections, each making one request and staying open. */
async function idleConnections(port: number, n: number): Promise<Socket[]> {
  const sockets: Socket[] = [];
  for (let batch = 0; batch < n; batch += 100) {
    const opened = await Promise.all(Array.from({ length: Math.min(100, n - batch) }, () => new Promise<Socket>((res, rej) => {
      const sock = connect({ host: '127.0.0.1', port });
      sock.on('error', rej);
      sock.on('connect', () => sock.write('GET /small HTTP/1.1\r\nHost: bench\r\n\r\n'));
      sock.once('data', () => res(sock));
    })));
    sockets.push(...opened);
  }
  return sockets;
}

const mib = (n: number): string => (n / MiB).toFixed(1);

async function main(): Promise<number> {
  let o: Options;
  try {
    o = options(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`bench: ${(err as Error).message}\n${USAGE}\n`);
    return 1;
  }
  const dir = makeTemp('jinx-memory-', o.keep);
  mkdirSync(join(dir, 'logs'));
  mkdirSync(join(dir, 'tmp'));
  const [port, upstreamPort] = [await freePort(), await freePort()];
  const upstream = start('upstream', process.execPath, ['-e', UPSTREAM, String(upstreamPort), String(o.size)], { stdout: 'pipe' });
  let upstreamSent = 0;
  upstream.child.stdout!.on('data', (d: Buffer) => { upstreamSent += (d.toString().match(/sent/g) ?? []).length; });
  writeFileSync(join(dir, 'nginx.conf'), jinxConf(dir, port, upstreamPort, o.idle));
  await waitListening(upstream, upstreamPort);
  const figures: Figure[] = [];
  const tmp = join(dir, 'tmp');
  process.stdout.write(`node ${process.version}, size ${mib(o.size)} MiB, rate ${mib(o.rate)} MiB/s, ${o.idle} idle connections; a fresh jinx per phase\n`);
  for (const phase of o.phases) {
    const jinx = start('jinx', JINX, ['-p', `${dir}/`, '-c', join(dir, 'nginx.conf')]);
    await waitListening(jinx, port);
    const pid = jinx.child.pid!;
    // a small request of each kind first, so that code paths and pools exist before the baseline
    await slowDownload(port, `/big/${MiB}`, MiB, Infinity, () => false);
    await upload(port, MiB);
    await sleep(1000);
    const baseline = treeRssBytes(pid);
    const s = rssSampler(pid, 50);
    const started = Date.now();
    let note: string;
    let left = { files: [] as string[], open: [] as string[] };
    if (phase === 'download') {
      const sentBefore = upstreamSent;
      let upstreamDoneAt = 0;
      const got = await slowDownload(port, '/big', o.size, o.rate, () => {
        if (!upstreamDoneAt && upstreamSent > sentBefore) upstreamDoneAt = Date.now();
        return o.slowAll || upstreamSent === sentBefore;
      });
      const slowS = ((upstreamDoneAt || Date.now()) - started) / 1000;
      note = `${got.status}, ${mib(got.bodyBytes)} MiB; read at ${mib(o.rate)} MiB/s `
        + (o.slowAll ? 'throughout' : `for ${slowS.toFixed(1)} s (until the upstream had sent all), then at full speed`);
    } else if (phase === 'upload') {
      const got = await upload(port, o.size);
      note = `${got.status}, upstream received ${mib(got.echoed)} MiB`;
    } else if (phase === 'cached') {
      const stored = await slowDownload(port, '/cached/big', o.size, Infinity, () => false);
      const slowUntil = Date.now() + o.cachedSlowS * 1000;
      const got = await slowDownload(port, '/cached/big', o.size, o.rate, () => o.slowAll || Date.now() < slowUntil);
      note = `${stored.status}, ${mib(stored.bodyBytes)} MiB stored at full speed, then ${got.status}, ${mib(got.bodyBytes)} MiB from the cache read at ${mib(o.rate)} MiB/s `
        + (o.slowAll ? 'throughout' : `for ${o.cachedSlowS} s, then at full speed`);
    } else {
      const sockets = await idleConnections(port, o.idle);
      await sleep(2000);
      note = `${sockets.length} connections, idle 2 s`;
      for (const sock of sockets) sock.destroy();
    }
    const peak = s.stop();
    const seconds = (Date.now() - started) / 1000;
    if (phase !== 'idle') {
      await sleep(500);
      left = leftovers(pid, tmp);
    }
    figures.push({ phase, baseline, peak, growth: peak - baseline, limit: o.limits[phase], seconds, note, leftFiles: left.files, leftOpen: left.open });
    await stop(jinx);
  }
  await stop(upstream);

  process.stdout.write('\n| phase | RSS before (MiB) | peak (MiB) | growth (MiB) | limit (MiB) | time (s) | temp files left | notes |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n');
  let over = false;
  for (const f of figures) {
    const left = f.leftFiles.length + f.leftOpen.length;
    if (f.growth > f.limit * MiB || left > 0) over = true;
    process.stdout.write(`| ${f.phase} | ${mib(f.baseline)} | ${mib(f.peak)} | ${mib(f.growth)} | ${f.limit} | ${f.seconds.toFixed(1)} | ${left === 0 ? 'none' : [...f.leftFiles, ...f.leftOpen.map((x) => `open: ${x}`)].join(', ')} | ${f.note} |\n`);
  }
  if (o.json) writeFileSync(o.json, JSON.stringify({ options: o, figures }, null, 2));
  process.stdout.write(over ? '\nsome figure is over its limit, or a temp file was left\n' : '\nevery figure is within its limit\n');
  removeTemp();
  return over ? 2 : 0;
}

runBench(main);
