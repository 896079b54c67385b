/**
 * Stream (TCP) proxy benchmark: jinx against the reference nginx, in one
 * run, on the same `stream {}` configuration (one process each:
 * `master_process off`, `worker_processes 1`, `access_log` off).
 *
 *   npx tsc -p . && node dist/bench/stream.js [--size 1g] [--sessions 5000] …
 *
 * Three measurements, everything on 127.0.0.1, the slow reader first (on
 * servers that have served one session), then the two rates:
 *
 * 1. throughput: a client connects through the proxy to a source server
 *    that writes `--size` bytes (64 KiB writes, as fast as the socket takes
 *    them) and closes; the client reads and counts them. MiB/s per
 *    `--rounds` round (jinx then nginx in every round), their medians and
 *    the ratio jinx/nginx. A count other than `--size` is an error.
 * 2. connection rate: `--sessions` sessions, `--concurrency` at a time,
 *    each a new connection through the proxy to an echo server: 1 byte
 *    sent, 1 byte back, the client shuts down, the proxy closes. Sessions/s
 *    and the ratio jinx/nginx.
 *
 * Beside each rate, the proxy's CPU time (user + system, /proc/PID/stat)
 * over it: seconds per GiB forwarded, microseconds per session; on a
 * shared machine these move less with the load than the rates.
 * 3. slow reader: a client reads one chunk every 100 ms (at most 64 KiB
 *    each, under 1 MiB/s) for `--slow-seconds` from a source that writes
 *    `--size` bytes as fast as the proxy takes them. The proxy's resident
 *    memory is read from /proc/PID/status (its high-water mark, reset as
 *    the phase starts, and samples every 50 ms): the peak growth
 *    over its RSS just before must stay under `--limit-slow` MiB (nginx's
 *    figure is printed beside it).
 *
 * The source and echo servers run in one node process of their own
 * (`UPSTREAMS` below), the clients in this one. Exit status: 0 when
 * everything ran and jinx's slow-reader growth is within its limit; 1 when
 * something could not be started or measured (a wrong byte count, a failed
 * session); 2 when the growth is over the limit. Every process it starts is
 * stopped by its pid, also on SIGINT/SIGTERM/SIGHUP; the temporary prefix is
 * removed unless `--keep`. See bench/README.md.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, JINX, makeTemp, median, MiB, parseSize, removeTemp, ROOT, rssSampler, runBench, sleep, start, stopAll, treeRssBytes, waitListening, type Proc } from './procs.js';

const USAGE = `usage: node dist/bench/stream.js [options]
  --size SIZE         bytes the source writes per connection, k/m/g suffix allowed (default 1g)
  --rounds N          throughput rounds, jinx then nginx in each (default 1)
  --sessions N        1-byte echo sessions per server (default 5000)
  --concurrency N     sessions at a time (default 4)
  --slow-seconds S    how long the slow reader reads (default 10)
  --limit-slow N      jinx's slow-reader RSS growth limit in MiB (default 64)
  --nginx PATH        reference nginx (default /opt/nginx-oracle/nginx, else /usr/sbin/nginx)
  --keep              keep the temporary prefix (configurations, logs)
  -h, --help`;

interface Options {
  sizeBytes: number;
  rounds: number;
  sessions: number;
  concurrency: number;
  slowSeconds: number;
  limitSlowMiB: number;
  nginx: string;
  keep: boolean;
}

function options(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      size: { type: 'string' }, rounds: { type: 'string' }, sessions: { type: 'string' }, concurrency: { type: 'string' },
      'slow-seconds': { type: 'string' }, 'limit-slow': { type: 'string' }, nginx: { type: 'string' }, keep: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const positive = (name: string, v: string | undefined, dflt: number): number => {
    const n = v === undefined ? dflt : Number(v);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number, not "${v}"`);
    return n;
  };
  const nginx = values.nginx ?? ['/opt/nginx-oracle/nginx', '/usr/sbin/nginx'].find((p) => existsSync(p));
  if (nginx === undefined) throw new Error('no reference nginx: pass --nginx PATH');
  return {
    sizeBytes: parseSize(values.size ?? '1g'),
    rounds: Math.floor(positive('rounds', values.rounds, 1)),
    sessions: Math.floor(positive('sessions', values.sessions, 5000)),
    concurrency: Math.floor(positive('concurrency', values.concurrency, 4)),
    slowSeconds: positive('slow-seconds', values['slow-seconds'], 10),
    limitSlowMiB: positive('limit-slow', values['limit-slow'], 64),
    nginx,
    keep: values.keep ?? false,
  };
}

/**
 * The upstreams, run with `node -e UPSTREAMS SOURCE_PORT ECHO_PORT SIZE`: on
 * SOURCE_PORT, every connection gets SIZE bytes (64 KiB writes, each after
 * the socket drained) and a close; on ECHO_PORT, what comes is sent back and
 * the end answered with an end.
 */
const UPSTREAMS = `
const net = require('node:net');
const [sourcePort, echoPort, size] = process.argv.slice(1).map(Number);
const chunk = Buffer.alloc(64 * 1024, 'x');
net.createServer((s) => {
  let left = size;
  s.on('error', () => { left = 0; });
  s.on('close', () => { left = 0; });
  const pump = () => {
    while (left > 0) {
      const n = Math.min(left, chunk.length);
      left -= n;
      if (!s.write(n === chunk.length ? chunk : chunk.subarray(0, n))) { s.once('drain', pump); return; }
    }
    s.end();
  };
  pump();
}).listen(sourcePort, '127.0.0.1');
net.createServer({ allowHalfOpen: true }, (s) => {
  s.on('data', (d) => s.write(d));
  s.on('end', () => s.end());
  s.on('error', () => {});
}).listen(echoPort, '127.0.0.1');
`;

/** nginx's stream module (the 1.30 oracle's, else Debian's): both nginx and jinx know `stream {}` only after its `load_module`. */
const STREAM_MODULE = ['/opt/nginx-oracle/modules/ngx_stream_module.so', '/usr/lib/nginx/modules/ngx_stream_module.so'].find((p) => existsSync(p))
  ?? '/opt/nginx-oracle/modules/ngx_stream_module.so';

/** The configuration both servers run: one port to the source, one to the echo server. */
function streamConf(dir: string, sourceListen: number, echoListen: number, sourcePort: number, echoPort: number): string {
  return `load_module ${STREAM_MODULE};
daemon off;
master_process off;
worker_processes 1;
pid ${dir}/logs/nginx.pid;
error_log ${dir}/logs/error.log warn;
events { worker_connections 4096; }
stream {
  server { listen 127.0.0.1:${sourceListen} backlog=4096; proxy_pass 127.0.0.1:${sourcePort}; }
  server { listen 127.0.0.1:${echoListen} backlog=4096; proxy_pass 127.0.0.1:${echoPort}; }
}
`;
}

interface Server { readonly name: 'jinx' | 'nginx'; readonly proc: Proc; readonly sourcePort: number; readonly echoPort: number }

const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** utime + stime of process `pid` (one process: `master_process off`), in seconds. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

/** Reads everything from `port` until the close; resolves with the byte count and the seconds it took. */
function drain(port: number): Promise<{ bytes: number; seconds: number }> {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    let bytes = 0;
    const s = connect(port, '127.0.0.1');
    s.on('data', (d: Buffer) => { bytes += d.length; });
    s.on('error', reject);
    s.on('close', () => resolve({ bytes, seconds: Number(process.hrtime.bigint() - t0) / 1e9 }));
  });
}

/** One 1-byte echo session; rejects when the byte does not come back. */
function echoSession(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let got = 0;
    s.on('connect', () => s.write('x'));
    s.on('data', (d: Buffer) => {
      got += d.length;
      if (got === 1) s.end();
    });
    s.on('error', reject);
    s.on('close', () => (got === 1 ? resolve() : reject(new Error(`echo session got ${got} bytes, not 1`))));
  });
}

/** `sessions` echo sessions, `concurrency` at a time; resolves with sessions/s. */
async function connectionRate(port: number, sessions: number, concurrency: number): Promise<number> {
  let next = 0;
  const t0 = process.hrtime.bigint();
  const lane = async (): Promise<void> => {
    while (next < sessions) {
      next++;
      await echoSession(port);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
  return sessions / (Number(process.hrtime.bigint() - t0) / 1e9);
}

/** Reads one chunk every 100 ms from `port` for `seconds`, then resets; resolves with the bytes read, the proxy's RSS just before and its peak growth over that (bytes). */
async function slowReader(port: number, pid: number, seconds: number): Promise<{ readBytes: number; beforeBytes: number; growthBytes: number }> {
  const before = treeRssBytes(pid);
  const sampler = rssSampler(pid, 50);
  let readBytes = 0;
  const s = connect(port, '127.0.0.1');
  s.pause();
  s.on('data', (d: Buffer) => {
    readBytes += d.length;
    s.pause();
  });
  s.on('error', () => undefined);
  const deadline = Date.now() + seconds * 1000;
  while (Date.now() < deadline && !s.destroyed) {
    s.resume();
    await sleep(100);
  }
  s.resetAndDestroy();
  await sleep(200);
  return { readBytes, beforeBytes: before, growthBytes: sampler.stop() - before };
}

const mib = (bytes: number): string => (bytes / MiB).toFixed(1);

async function main(): Promise<number> {
  const o = options(process.argv.slice(2));
  if (!existsSync(join(ROOT, 'dist/src/cli/main.js'))) throw new Error(`no build in ${ROOT}/dist: run npx tsc -p . first`);
  const dir = makeTemp('jinx-bench-stream-', o.keep);
  const [upSource, upEcho] = [await freePort(), await freePort()];
  const upstreams = start('upstreams', process.execPath, ['-e', UPSTREAMS, String(upSource), String(upEcho), String(o.sizeBytes)]);
  await waitListening(upstreams, upSource);
  await waitListening(upstreams, upEcho);

  const servers: Server[] = [];
  for (const name of ['jinx', 'nginx'] as const) {
    const sDir = join(dir, name);
    mkdirSync(join(sDir, 'logs'), { recursive: true });
    const [sourcePort, echoPort] = [await freePort(), await freePort()];
    writeFileSync(join(sDir, 'nginx.conf'), streamConf(sDir, sourcePort, echoPort, upSource, upEcho));
    const proc = start(name, name === 'jinx' ? JINX : o.nginx, ['-p', `${sDir}/`, '-c', join(sDir, 'nginx.conf')]);
    await waitListening(proc, sourcePort);
    await waitListening(proc, echoPort);
    servers.push({ name, proc, sourcePort, echoPort });
  }
  // the check: one echo session through each; then a second to settle
  for (const s of servers) await echoSession(s.echoPort);
  await sleep(1000);

  process.stdout.write(`slow reader: one chunk every 100 ms for ${o.slowSeconds} s from a source writing ${mib(o.sizeBytes)} MiB\n`);
  let over = false;
  for (const s of servers) {
    const r = await slowReader(s.sourcePort, s.proc.child.pid!, o.slowSeconds);
    process.stdout.write(`  ${s.name.padEnd(5)} read ${mib(r.readBytes)} MiB, RSS ${mib(r.beforeBytes)} MiB before, peak growth ${mib(r.growthBytes)} MiB\n`);
    if (s.name === 'jinx' && r.growthBytes > o.limitSlowMiB * MiB) {
      process.stdout.write(`  jinx's growth is over the limit (${o.limitSlowMiB} MiB)\n`);
      over = true;
    }
  }
  process.stdout.write(`throughput: ${mib(o.sizeBytes)} MiB from the source through each proxy, ${o.rounds} round(s)\n`);
  const rates = new Map<string, number[]>(servers.map((s) => [s.name, []]));
  for (let round = 1; round <= o.rounds; round++) {
    for (const s of servers) {
      const cpu0 = cpuSeconds(s.proc.child.pid!);
      const r = await drain(s.sourcePort);
      const cpu = cpuSeconds(s.proc.child.pid!) - cpu0;
      if (r.bytes !== o.sizeBytes) throw new Error(`${s.name}: read ${r.bytes} bytes, not ${o.sizeBytes}`);
      const rate = r.bytes / MiB / r.seconds;
      rates.get(s.name)!.push(rate);
      process.stdout.write(`  round ${round} ${s.name.padEnd(5)} ${rate.toFixed(0).padStart(6)} MiB/s (${r.seconds.toFixed(2)} s), cpu ${(cpu / (r.bytes / (1024 * MiB))).toFixed(2)} s/GiB\n`);
    }
  }
  const [tj, tn] = [median(rates.get('jinx')!), median(rates.get('nginx')!)];
  process.stdout.write(`  median: jinx ${tj.toFixed(0)} MiB/s, nginx ${tn.toFixed(0)} MiB/s, jinx/nginx ${(tj / tn).toFixed(3)}\n`);

  process.stdout.write(`connection rate: ${o.sessions} 1-byte echo sessions, ${o.concurrency} at a time\n`);
  const sessionRates = new Map<string, number>();
  for (const s of servers) {
    const cpu0 = cpuSeconds(s.proc.child.pid!);
    const rate = await connectionRate(s.echoPort, o.sessions, o.concurrency);
    const cpu = cpuSeconds(s.proc.child.pid!) - cpu0;
    sessionRates.set(s.name, rate);
    process.stdout.write(`  ${s.name.padEnd(5)} ${rate.toFixed(0).padStart(6)} sessions/s, cpu ${((cpu / o.sessions) * 1e6).toFixed(0)} µs/session\n`);
  }
  process.stdout.write(`  jinx/nginx ${(sessionRates.get('jinx')! / sessionRates.get('nginx')!).toFixed(3)}\n`);

  await stopAll();
  removeTemp();
  return over ? 2 : 0;
}

runBench(main);
