/**
 * Start-up time: first `-t` on a trivial configuration and on one with
 * `--servers` server blocks (each its own `server_name` and two
 * `location`s): milliseconds from exec to exit, and the CPU time (user +
 * system) the process used, which a machine busy with other work inflates
 * less than the wall clock (counted in the kernel's clock ticks, 10 ms).
 * Then milliseconds from exec of `bin/jinx` (and of nginx, for reference)
 * to the first 200 answered, for the same two
 * configurations, with a master and one worker (nginx's default) and with
 * `master_process off`. The first request is retried every 2 ms until it
 * is answered.
 *
 *   npx tsc -p . && node dist/bench/startup.js [--runs 5] [--servers 1000] [--nginx PATH] [--jinx PATH] [--jinx-base PATH] [--nice=N]
 *
 * `--jinx` names another jinx start script (another build); `--jinx-base`
 * adds one as `jinx-base`, to compare two builds in one run (e.g.
 * `../main/bin/jinx`); `--nginx none` leaves nginx out; `--nice=-20` runs
 * every target under `nice -n -20` (as root), ahead of other work on a
 * shared machine.
 *
 * Prints the median and the fastest of `--runs` starts per case and target,
 * the targets' runs interleaved. Everything
 * runs on 127.0.0.1; every process is stopped by its pid (also on
 * SIGINT/SIGTERM/SIGHUP). Figures in bench/README.md.
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort, JINX, makeTemp, removeTemp, runBench, sleep, start, stop, stopAll } from './procs.js';

const USAGE = 'usage: node dist/bench/startup.js [--runs N] [--servers N] [--nginx PATH|none] [--jinx PATH] [--jinx-base PATH] [--nice=N]';

/** Resolves true once `port` answers `GET /` with 200. */
function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/', agent: false, headers: { Host: 'localhost' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode === 200));
    });
    req.on('error', () => resolve(false));
    req.end();
  });
}

/** A configuration of `servers` server blocks on `port` (the first answers `/`), with or without a master process; temp directories under the prefix's logs/ (nginx's own are under /var/lib/nginx, absent where Debian's nginx is not installed). */
function confText(port: number, servers: number, master: boolean): string {
  const blocks = Array.from({ length: servers }, (_, i) => `  server { listen 127.0.0.1:${port}; server_name s${i}.test${i === 0 ? ' localhost' : ''};
    location / { return 200 "s${i}\\n"; } location /api/ { return 200 "api ${i}\\n"; } }`);
  return `daemon off;
master_process ${master ? 'on' : 'off'};
error_log logs/error.log;
pid logs/nginx.pid;
events {}
http {
  access_log off;
${['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `  ${t}_temp_path logs/${t}_temp;\n`).join('')}  server_names_hash_bucket_size 128;
  server_names_hash_max_size 65536;
${blocks.join('\n')}
}
`;
}

/** Milliseconds from exec of `binary` on `dir/nginx.conf` to its first 200 on `port`; the process is stopped after. */
async function startupMs(name: string, binary: string, dir: string, port: number, niceness: number): Promise<number> {
  const startedNs = process.hrtime.bigint();
  const proc = start(name, binary, ['-p', `${dir}/`, '-c', 'nginx.conf'], { niceness });
  try {
    for (;;) {
      if (await answers(port)) return Number(process.hrtime.bigint() - startedNs) / 1e6;
      if (proc.exitCode !== undefined) throw new Error(`${name} exited (${proc.exitCode}):\n${proc.stderr}`);
      if (Number(process.hrtime.bigint() - startedNs) > 30e9) throw new Error(`${name} did not answer within 30 s`);
      await sleep(2);
    }
  } finally {
    await stop(proc);
  }
}

/**
 * One run of `binary -t` (under `nice -n niceness`, as `start` runs it):
 * milliseconds from exec to exit (of the `sh` that runs it: about a
 * millisecond more) and the CPU milliseconds (user + system) it used, as the
 * shell's `times` reports its child's.
 */
async function testRun(binary: string, dir: string, niceness: number): Promise<{ wallMs: number; cpuMs: number }> {
  // `times`' second line: the children's user and system time, e.g. `0m0.112000s 0m0.020000s`
  const script = '"$@" >/dev/null 2>&1; rc=$?; echo "$rc"; times';
  const startedNs = process.hrtime.bigint();
  const sh = start('sh -t', 'sh', ['-c', script, 'sh', binary, '-q', '-t', '-p', `${dir}/`, '-c', 'nginx.conf'], { niceness, stdout: 'pipe' });
  let out = '';
  sh.child.stdout!.on('data', (b: Buffer) => { out += b.toString(); });
  await sh.exited;
  const wallMs = Number(process.hrtime.bigint() - startedNs) / 1e6;
  const lines = out.trim().split('\n');
  if (lines[0] !== '0') throw new Error(`${binary} -t exited ${lines[0]} on ${dir}/nginx.conf`);
  const seconds = [...(lines[2] ?? '').matchAll(/(\d+)m([\d.]+)s/g)].map((m) => Number(m[1]) * 60 + Number(m[2]));
  if (seconds.length !== 2) throw new Error(`unexpected output of times: ${out}`);
  return { wallMs, cpuMs: (seconds[0]! + seconds[1]!) * 1000 };
}

/** CPU milliseconds as `times` gives them, in clock ticks of 10 ms: 0 is "under 10 ms". */
const cpuText = (ms: number): string => (ms === 0 ? 'under 10 ms' : `${ms.toFixed(0)} ms`);

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '5' }, servers: { type: 'string', default: '1000' }, nginx: { type: 'string' }, jinx: { type: 'string' },
      'jinx-base': { type: 'string' }, nice: { type: 'string' }, help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const runs = Number(values.runs);
  const niceness = values.nice === undefined ? 0 : Number(values.nice);
  // `--nginx none`: jinx alone
  const nginx = values.nginx === 'none' ? undefined : values.nginx ?? ['/opt/nginx-oracle/nginx', '/usr/sbin/nginx'].find((p) => existsSync(p));
  if (nginx !== undefined && !existsSync(nginx)) throw new Error(`no nginx at ${nginx}`);
  const targets: [string, string][] = [
    ['jinx', values.jinx ?? JINX],
    ...(values['jinx-base'] ? [['jinx-base', values['jinx-base']] as [string, string]] : []),
    ...(nginx ? [['nginx', nginx] as [string, string]] : []),
  ];
  const root = makeTemp('jinx-bench-startup-', false);
  try {
    for (const servers of [1, Number(values.servers)]) {
      const dir = join(root, `${servers}-test`);
      mkdirSync(join(dir, 'logs'), { recursive: true });
      writeFileSync(join(dir, 'nginx.conf'), confText(await freePort(), servers, true));
      const byTarget = new Map<string, { wallMs: number; cpuMs: number }[]>(targets.map(([name]) => [name, []]));
      // the targets' runs interleaved, so that a change in the machine's load falls on each alike
      for (let i = 0; i < runs; i++) for (const [name, binary] of targets) byTarget.get(name)!.push(await testRun(binary, dir, niceness));
      for (const [name, results] of byTarget) {
        process.stdout.write(`${name} -t, ${servers} server block(s): median ${median(results.map((r) => r.wallMs)).toFixed(0)} ms, `
          + `fastest ${Math.min(...results.map((r) => r.wallMs)).toFixed(0)} ms; CPU median ${cpuText(median(results.map((r) => r.cpuMs)))} `
          + `(${runs} runs)\n`);
      }
    }
    for (const servers of [1, Number(values.servers)]) {
      for (const master of [true, false]) {
        const dir = join(root, `${servers}-${master ? 'master' : 'single'}`);
        mkdirSync(join(dir, 'logs'), { recursive: true });
        const port = await freePort();
        writeFileSync(join(dir, 'nginx.conf'), confText(port, servers, master));
        const byTarget = new Map<string, number[]>(targets.map(([name]) => [name, []]));
        for (let i = 0; i < runs; i++) for (const [name, binary] of targets) byTarget.get(name)!.push(await startupMs(name, binary, dir, port, niceness));
        for (const [name, times] of byTarget) {
          times.sort((a, b) => a - b);
          process.stdout.write(`${name}, ${servers} server block(s), master_process ${master ? 'on' : 'off'}: `
            + `median ${times[Math.floor(runs / 2)]!.toFixed(0)} ms, fastest ${times[0]!.toFixed(0)} ms (${runs} starts)\n`);
        }
      }
    }
    return 0;
  } finally {
    await stopAll();
    removeTemp();
  }
}

runBench(main);
