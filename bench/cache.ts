/**
 * Cache and compression benchmark: jinx against nginx in the same run, each
 * a single process pinned to one CPU, wrk and the upstream on the other.
 *
 *   npx tsc -p . && node dist/bench/cache.js [--duration 5] [--rounds 3] …
 *
 * Two scenarios, each server with the same configuration:
 *
 * - hit: a 16 KiB asset served from `proxy_cache` (the entry is stored by a
 *   first request before the runs; every measured request is a HIT, which
 *   the check before the runs confirms through `X-Cache-Status`).
 * - gzip: a 100 KiB HTML page (generated text, compressing about as a real
 *   page does, 100 KiB to 12 KiB) from `root`, compressed with `gzip on; gzip_comp_level 6;`
 *   for a client that sends `Accept-Encoding: gzip`.
 * - delay: whether compressing a large body holds the event loop: while one
 *   client downloads a 64 MiB page gzipped at level 6 as fast as it can,
 *   another asks `GET /ping` (`return 204`) on a kept-alive connection
 *   every 5 ms; the ping's latency (median, p99, max) is what any request
 *   waits while the server compresses.
 *
 * Rounds alternate the servers; the summary gives the medians and the
 * jinx/nginx ratio of each scenario. Every process it starts is stopped by
 * its pid, also on SIGINT/SIGTERM/SIGHUP; the temporary prefix is removed
 * unless `--keep`. See bench/README.md.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { freePort, hasCommand, JINX, makeTemp, median, removeTemp, runBench, start, stop, waitListening, type Proc } from './procs.js';
import { parseWrk, type WrkResult } from './wrk.js';

const USAGE = `usage: node dist/bench/cache.js [options]
  --duration S      seconds per measured wrk run (default 5)
  --warmup S        seconds of warm-up per server and scenario (default 2)
  --rounds N        measured runs per server and scenario (default 3)
  --connections N   wrk -c (default 64)
  --scenarios LIST  hit,gzip,delay (default all three)
  --sut-cpus LIST   taskset CPU list for jinx and nginx (default 0)
  --aux-cpus LIST   taskset CPU list for the upstream and wrk (default 1)
  --nginx PATH      nginx to compare with (default /opt/nginx-oracle/nginx, else /usr/sbin/nginx)
  --keep            keep the temporary prefix
  -h, --help`;

const SCENARIOS = ['hit', 'gzip', 'delay'] as const;
type Scenario = typeof SCENARIOS[number];
type Target = 'jinx' | 'nginx';

interface Options {
  durationS: number;
  warmupS: number;
  rounds: number;
  connections: number;
  scenarios: Scenario[];
  sutCpus: string;
  auxCpus: string;
  nginx: string;
  keep: boolean;
}

function options(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      duration: { type: 'string' }, warmup: { type: 'string' }, rounds: { type: 'string' }, connections: { type: 'string' },
      scenarios: { type: 'string' }, 'sut-cpus': { type: 'string' }, 'aux-cpus': { type: 'string' }, nginx: { type: 'string' },
      keep: { type: 'boolean' }, help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    process.exit(0);
  }
  const count = (name: string, v: string | undefined, dflt: number): number => {
    const n = v === undefined ? dflt : Number(v);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} wants a positive integer`);
    return n;
  };
  const scenarios = (values.scenarios ?? SCENARIOS.join(',')).split(',').map((s) => s.trim()) as Scenario[];
  for (const s of scenarios) if (!SCENARIOS.includes(s)) throw new Error(`unknown scenario "${s}"`);
  const nginx = values.nginx ?? ['/opt/nginx-oracle/nginx', '/usr/sbin/nginx'].find((p) => existsSync(p));
  if (!nginx) throw new Error('no nginx to compare with: run ../shared/tools/install-nginx-oracle or give --nginx');
  return {
    durationS: count('duration', values.duration, 5),
    warmupS: count('warmup', values.warmup, 2),
    rounds: count('rounds', values.rounds, 3),
    connections: count('connections', values.connections, 64),
    scenarios,
    sutCpus: values['sut-cpus'] ?? '0',
    auxCpus: values['aux-cpus'] ?? '1',
    nginx,
    keep: values.keep ?? false,
  };
}

/** 100 KiB of HTML from a fixed word list and a fixed seed: the same page every run, about 8× smaller gzipped at level 6. */
function htmlPage(bytes: number): string {
  const words = ['proxy', 'server', 'location', 'upstream', 'cache', 'request', 'header', 'the', 'a', 'of', 'to', 'and', 'with',
    'nginx', 'configuration', 'client', 'response', 'status', 'timeout', 'buffer', 'module', 'directive', 'value', 'file'];
  let seed = 12345;
  const next = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  let html = '<!DOCTYPE html>\n<html><head><title>bench</title></head><body>\n';
  while (html.length < bytes - 200) {
    const sentence: string[] = [];
    for (let i = 0, n = 8 + next(12); i < n; i++) sentence.push(words[next(words.length)]!);
    html += `<p class="c${next(50)}">${sentence.join(' ')} ${next(100000)}.</p>\n`;
  }
  return (html + '</body></html>\n').padEnd(bytes, ' ');
}

function serverConf(dir: string, port: number, upstreamPort: number): string {
  return `daemon off;
master_process off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/tmp/body; proxy_temp_path ${dir}/tmp/proxy; fastcgi_temp_path ${dir}/tmp/fastcgi;
  uwsgi_temp_path ${dir}/tmp/uwsgi; scgi_temp_path ${dir}/tmp/scgi;
  proxy_cache_path ${dir}/cache levels=1:2 keys_zone=assets:10m;
  server {
    listen 127.0.0.1:${port} backlog=4096;
    keepalive_requests 1000000;
    location /cached/ {
      proxy_pass http://127.0.0.1:${upstreamPort}/;
      proxy_cache assets;
      proxy_cache_valid 200 1h;
      add_header X-Cache-Status $upstream_cache_status;
    }
    location = /ping { return 204; }
    location /gz/ {
      root ${dir}/..;
      gzip on;
      gzip_comp_level 6;
      gzip_types text/html;
    }
  }
}
`;
}

function upstreamConf(dir: string, port: number): string {
  return `daemon off;
master_process off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  server { listen 127.0.0.1:${port}; keepalive_requests 1000000; root ${dir}/files; }
}
`;
}

const PATHS: Record<Scenario, string> = { hit: '/cached/asset-16k', gzip: '/gz/page.html', delay: '/gz/big.html' };

/** The delay scenario's page: 64 MiB of generated HTML. */
const BIG_PAGE_BYTES = 64 * 1024 * 1024;

/** Latencies of `GET /ping` (ms) while `GET /gz/big.html` is downloaded gzipped at full speed. */
async function pingDuringGzip(port: number): Promise<{ latenciesMs: number[]; gzippedBytes: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  let done = false;
  const download = new Promise<number>((res, rej) => {
    const r = request({ host: '127.0.0.1', port, path: PATHS.delay, headers: { 'Accept-Encoding': 'gzip' }, agent: false }, (resp) => {
      let bytes = 0;
      resp.on('data', (c: Buffer) => { bytes += c.length; });
      resp.on('end', () => { done = true; res(bytes); });
      resp.on('error', rej);
    });
    r.on('error', rej);
    r.end();
  });
  const latenciesMs: number[] = [];
  while (!done) {
    const t0 = performance.now();
    await new Promise<void>((res, rej) => {
      const r = request({ host: '127.0.0.1', port, path: '/ping', agent }, (resp) => { resp.resume(); resp.on('end', res); });
      r.on('error', rej);
      r.end();
    });
    latenciesMs.push(performance.now() - t0);
    await new Promise((res) => setTimeout(res, 5));
  }
  agent.destroy();
  return { latenciesMs, gzippedBytes: await download };
}

const percentile = (xs: readonly number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

/** One GET with `Accept-Encoding: gzip`: status, headers, body. */
function get(port: number, path: string): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  return new Promise((res, rej) => {
    const r = request({ host: '127.0.0.1', port, path, headers: { 'Accept-Encoding': 'gzip' }, agent: false }, (resp) => {
      const chunks: Buffer[] = [];
      resp.on('data', (c: Buffer) => chunks.push(c));
      resp.on('end', () => res({ status: resp.statusCode ?? 0, headers: resp.headers, body: Buffer.concat(chunks) }));
      resp.on('error', rej);
    });
    r.on('error', rej);
    r.end();
  });
}

/** Each server answers each scenario as the figures assume. @throws Error naming the server and what was wrong. */
async function check(name: Target, port: number, page: string, asset: Buffer): Promise<string> {
  await get(port, PATHS.hit);
  const hit = await get(port, PATHS.hit);
  if (hit.status !== 200 || hit.headers['x-cache-status'] !== 'HIT' || !hit.body.equals(asset)) {
    throw new Error(`${name}: the second GET ${PATHS.hit} gave ${hit.status}, X-Cache-Status ${String(hit.headers['x-cache-status'])}, ${hit.body.length} bytes`);
  }
  const gz = await get(port, PATHS.gzip);
  if (gz.status !== 200 || gz.headers['content-encoding'] !== 'gzip' || gunzipSync(gz.body).toString() !== page) {
    throw new Error(`${name}: GET ${PATHS.gzip} gave ${gz.status}, Content-Encoding ${String(gz.headers['content-encoding'])}`);
  }
  return `${gz.body.length} bytes gzipped`;
}

function wrk(o: Options, port: number, scenario: Scenario, seconds: number): WrkResult {
  const run = spawnSync('taskset', ['-c', o.auxCpus, 'wrk', '--latency', `-c${o.connections}`, '-t2', `-d${seconds}s`, '-H', 'Accept-Encoding: gzip',
    `http://127.0.0.1:${port}${PATHS[scenario]}`], { encoding: 'utf8', timeout: (seconds + 30) * 1000 });
  if (run.status !== 0) throw new Error(`wrk failed (${run.status}): ${run.stderr}`);
  return parseWrk(run.stdout);
}

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');

async function main(): Promise<number> {
  const o = options(process.argv.slice(2));
  if (!hasCommand('wrk')) throw new Error('wrk is not installed (apt-get install -y wrk)');
  const root = makeTemp('jinx-cache-bench-', o.keep);
  const page = htmlPage(100 * 1024);
  const asset = Buffer.alloc(16 * 1024, 'a');
  mkdirSync(join(root, 'upstream/files'), { recursive: true });
  mkdirSync(join(root, 'gz'));
  writeFileSync(join(root, 'upstream/files/asset-16k'), asset);
  writeFileSync(join(root, 'gz/page.html'), page);
  if (o.scenarios.includes('delay')) writeFileSync(join(root, 'gz/big.html'), page.repeat(BIG_PAGE_BYTES / page.length));
  const upstreamPort = await freePort();
  writeFileSync(join(root, 'upstream/nginx.conf'), upstreamConf(join(root, 'upstream'), upstreamPort));
  const upstream = start('upstream', 'taskset', ['-c', o.auxCpus, o.nginx, '-p', `${root}/upstream/`, '-c', join(root, 'upstream/nginx.conf')]);
  await waitListening(upstream, upstreamPort);
  const servers = new Map<Target, { proc: Proc; port: number }>();
  for (const [name, binary] of [['jinx', JINX], ['nginx', o.nginx]] as const) {
    const dir = join(root, name);
    mkdirSync(join(dir, 'tmp'), { recursive: true });
    const port = await freePort();
    writeFileSync(join(dir, 'nginx.conf'), serverConf(dir, port, upstreamPort));
    const proc = start(name, binary, ['-p', `${dir}/`, '-c', join(dir, 'nginx.conf')], { cpus: o.sutCpus });
    await waitListening(proc, port);
    servers.set(name, { proc, port });
  }
  const versions = spawnSync(o.nginx, ['-v'], { encoding: 'utf8' }).stderr.trim();
  process.stdout.write(`cache and gzip benchmark: node ${process.version}, ${versions}, wrk -c${o.connections} -t2 for ${o.durationS} s, `
    + `${o.rounds} rounds, warm-up ${o.warmupS} s; jinx and nginx on CPU ${o.sutCpus}, upstream and wrk on CPU ${o.auxCpus}\n`);
  for (const [name, { port }] of servers) process.stdout.write(`check ${name}: HIT of ${PATHS.hit}; ${PATHS.gzip} ${await check(name, port, page, asset)} of ${page.length}\n`);
  const results = new Map<string, WrkResult[]>();
  const delays = new Map<Target, number[]>();
  for (const scenario of o.scenarios) {
    if (scenario === 'delay') {
      process.stdout.write(`\n-- delay (GET /ping every 5 ms while GET ${PATHS.delay}, 64 MiB, is gzipped)\n`);
      for (let round = 1; round <= o.rounds; round++) {
        for (const [name, { port }] of servers) {
          const { latenciesMs, gzippedBytes } = await pingDuringGzip(port);
          (delays.get(name) ?? delays.set(name, []).get(name)!).push(...latenciesMs);
          process.stdout.write(`  round ${round}  ${name.padEnd(6)} ${latenciesMs.length} pings during ${(gzippedBytes / 1024 / 1024).toFixed(1)} MiB gzipped: `
            + `median ${percentile(latenciesMs, 50).toFixed(2)} ms, p99 ${percentile(latenciesMs, 99).toFixed(2)} ms, max ${Math.max(...latenciesMs).toFixed(2)} ms\n`);
        }
      }
      continue;
    }
    process.stdout.write(`\n-- ${scenario} (GET ${PATHS[scenario]})\n`);
    for (const { port } of servers.values()) wrk(o, port, scenario, o.warmupS);
    for (let round = 1; round <= o.rounds; round++) {
      for (const [name, { port }] of servers) {
        const r = wrk(o, port, scenario, o.durationS);
        if (r.non2xx > 0) throw new Error(`${name}: ${r.non2xx} non-2xx responses in ${scenario}: the figures are not valid`);
        (results.get(`${scenario} ${name}`) ?? results.set(`${scenario} ${name}`, []).get(`${scenario} ${name}`)!).push(r);
        const errors = r.socketErrors > 0 ? `  (${r.socketErrors} socket errors: wrk's 2 s timeout)` : '';
        process.stdout.write(`  round ${round}  ${name.padEnd(6)} ${fmt(r.rps).padStart(8)} req/s  p99 ${r.p99Ms.toFixed(2).padStart(7)} ms${errors}\n`);
      }
    }
  }
  const measured = o.scenarios.filter((x) => x !== 'delay');
  process.stdout.write(`\n== summary: medians of ${o.rounds} rounds\n`);
  if (measured.length > 0) process.stdout.write('| scenario | jinx req/s | nginx req/s | jinx/nginx | jinx p99 | nginx p99 |\n| --- | --- | --- | --- | --- | --- |\n');
  for (const scenario of measured) {
    const [j, n] = (['jinx', 'nginx'] as const).map((t) => results.get(`${scenario} ${t}`)!);
    const [jr, nr] = [median(j!.map((r) => r.rps)), median(n!.map((r) => r.rps))];
    const [jp, np] = [median(j!.map((r) => r.p99Ms)), median(n!.map((r) => r.p99Ms))];
    process.stdout.write(`| ${scenario === 'hit' ? 'cache HIT, 16 KiB' : 'gzip level 6, 100 KiB HTML'} | ${fmt(jr)} | ${fmt(nr)} | ${(jr / nr).toFixed(2)} | ${jp.toFixed(1)} ms | ${np.toFixed(1)} ms |\n`);
  }
  if (delays.size > 0) {
    process.stdout.write(`\n| GET /ping while a 64 MiB page is gzipped | median | p99 | max |\n| --- | --- | --- | --- |\n`);
    for (const [name, ms] of delays) {
      process.stdout.write(`| ${name} | ${percentile(ms, 50).toFixed(2)} ms | ${percentile(ms, 99).toFixed(2)} ms | ${Math.max(...ms).toFixed(2)} ms |\n`);
    }
  }
  for (const { proc } of servers.values()) await stop(proc);
  await stop(upstream);
  removeTemp();
  return 0;
}

runBench(main);
