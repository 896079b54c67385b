/**
 * What jinx's shared zones cost (src/cli/shared-zones.ts): with a master
 * process, a worker asks the master for a `limit_req` zone's verdict and
 * for a session of an `ssl_session_cache shared:` zone, one round trip each
 * over node:cluster's channel. This measures both against the same thing
 * kept in the worker:
 *
 * 1. `limit_req`: requests one at a time over one keep-alive connection to
 *    a location without `limit_req` and to one with a zone that never
 *    refuses (`rate=1000000r/s`, `burst` far above the load), then the
 *    same with `--connections` connections in parallel: microseconds per
 *    request and requests a second, and the difference.
 * 2. resumption: TLS 1.2 handshakes that resume a session by its id
 *    (`ssl_session_tickets off`), from a `builtin` cache (the worker's) and
 *    from a `shared:` one (the master's): microseconds per handshake.
 *
 *   npx tsc -p . && node dist/bench/zones.js [--requests 5000] [--connections 8] [--handshakes 1000] [--rounds 3] [--workers 1] [--keep]
 *
 * Each figure is the median of `--rounds` runs, the two kinds interleaved.
 *
 * Everything runs on 127.0.0.1; every process started is stopped by its
 * pid, also on SIGINT/SIGTERM/SIGHUP. Figures in bench/README.md.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { parseArgs } from 'node:util';
import { freePort, JINX, makeTemp, removeTemp, runBench, start, stopAll, waitListening } from './procs.js';

const USAGE = 'usage: node dist/bench/zones.js [--requests N] [--connections N] [--handshakes N] [--rounds N] [--workers N] [--keep]';

/** One GET over `agent`; resolves when the whole response has come. @throws Error on a status other than 200 */
function get(agent: Agent, port: number, path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`${path}: status ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end();
  });
}

/** `total` GETs of `path` over `connections` keep-alive connections: microseconds per request (wall time / requests) and requests a second. */
async function requests(port: number, path: string, total: number, connections: number): Promise<{ usPerRequest: number; perSecond: number }> {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  try {
    for (let i = 0; i < connections * 20; i++) await get(agent, port, path);
    let left = total;
    const started = process.hrtime.bigint();
    await Promise.all(Array.from({ length: connections }, async () => {
      while (left-- > 0) await get(agent, port, path);
    }));
    const ns = Number(process.hrtime.bigint() - started);
    return { usPerRequest: ns / 1000 / total, perSecond: total / (ns / 1e9) };
  } finally {
    agent.destroy();
  }
}

/** The run of median time per request. */
function median<T extends { usPerRequest: number }>(runs: T[]): T {
  return [...runs].sort((a, b) => a.usPerRequest - b.usPerRequest)[Math.floor(runs.length / 2)]!;
}

/** One TLS 1.2 handshake to `port` offering `session`; resolves to the session the server made and whether it resumed. */
function handshake(port: number, session: Buffer | undefined): Promise<{ session: Buffer | undefined; reused: boolean }> {
  return new Promise((resolve, reject) => {
    let made: Buffer | undefined;
    const s = tlsConnect({ host: '127.0.0.1', port, rejectUnauthorized: false, maxVersion: 'TLSv1.2', session });
    s.on('session', (d: Buffer) => { made = d; });
    s.on('secureConnect', () => {
      const reused = s.isSessionReused();
      s.end();
      s.on('close', () => resolve({ session: made ?? session, reused }));
    });
    s.on('error', reject);
  });
}

/** `count` handshakes resuming one session: microseconds per handshake. @throws Error when one does not resume */
async function resumptions(port: number, count: number): Promise<number> {
  const { session } = await handshake(port, undefined);
  for (let i = 0; i < 50; i++) await handshake(port, session);
  const started = process.hrtime.bigint();
  for (let i = 0; i < count; i++) {
    const r = await handshake(port, session);
    if (!r.reused) throw new Error(`handshake ${i} to port ${port} did not resume the session`);
  }
  return Number(process.hrtime.bigint() - started) / 1000 / count;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      requests: { type: 'string', default: '5000' }, connections: { type: 'string', default: '8' },
      handshakes: { type: 'string', default: '1000' }, rounds: { type: 'string', default: '3' }, workers: { type: 'string', default: '1' }, keep: { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const total = Number(values.requests);
  const connections = Number(values.connections);
  const handshakes = Number(values.handshakes);
  const rounds = Number(values.rounds);
  const dir = makeTemp('jinx-bench-zones-', values.keep);
  mkdirSync(join(dir, 'logs'));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1', '-subj', '/CN=localhost',
    '-keyout', join(dir, 'cert.key'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
  const [port, builtinPort, sharedPort] = [await freePort(), await freePort(), await freePort()];
  const tls = (p: number, cache: string): string => `server { listen 127.0.0.1:${p} ssl; ssl_certificate cert.pem; ssl_certificate_key cert.key;
    ssl_session_tickets off; ssl_session_cache ${cache}; location / { return 200; } }`;
  writeFileSync(join(dir, 'nginx.conf'), `daemon off;
master_process on;
worker_processes ${Number(values.workers)};
error_log logs/error.log;
pid logs/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  limit_req_zone $server_port zone=z:1m rate=1000000r/s;
  server { listen 127.0.0.1:${port};
    location /plain { return 200 "ok\\n"; }
    location /limited { limit_req zone=z burst=1000000 nodelay; return 200 "ok\\n"; }
  }
  ${tls(builtinPort, 'builtin:1000')}
  ${tls(sharedPort, 'shared:SSL:1m')}
}
`);
  const jinx = start('jinx', JINX, ['-p', `${dir}/`, '-c', 'nginx.conf']);
  try {
    await waitListening(jinx, port);
    await waitListening(jinx, sharedPort);
    process.stdout.write(`jinx, master_process on, worker_processes ${values.workers}\n`);
    for (const n of [1, connections]) {
      // interleaved rounds, the median of each: the first runs also warm up the client and jinx
      const plainRuns: { usPerRequest: number; perSecond: number }[] = [];
      const limitedRuns: { usPerRequest: number; perSecond: number }[] = [];
      for (let round = 0; round < rounds; round++) {
        plainRuns.push(await requests(port, '/plain', total, n));
        limitedRuns.push(await requests(port, '/limited', total, n));
      }
      const plain = median(plainRuns);
      const limited = median(limitedRuns);
      process.stdout.write(`limit_req, ${n} connection(s): without ${plain.usPerRequest.toFixed(1)} us/req (${Math.round(plain.perSecond)} req/s), `
        + `with ${limited.usPerRequest.toFixed(1)} us/req (${Math.round(limited.perSecond)} req/s): +${(limited.usPerRequest - plain.usPerRequest).toFixed(1)} us per request\n`);
    }
    const builtinRuns: number[] = [];
    const sharedRuns: number[] = [];
    for (let round = 0; round < rounds; round++) {
      builtinRuns.push(await resumptions(builtinPort, handshakes));
      sharedRuns.push(await resumptions(sharedPort, handshakes));
    }
    const builtin = builtinRuns.sort((a, b) => a - b)[Math.floor(rounds / 2)]!;
    const shared = sharedRuns.sort((a, b) => a - b)[Math.floor(rounds / 2)]!;
    process.stdout.write(`session resumption by id: builtin ${builtin.toFixed(1)} us/handshake, shared ${shared.toFixed(1)} us/handshake: +${(shared - builtin).toFixed(1)} us\n`);
    return 0;
  } finally {
    await stopAll();
    removeTemp();
  }
}

runBench(main);
