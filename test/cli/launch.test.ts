/**
 * How bin/jinx starts: `dist/src/cli/launch.cjs` loads the bundle with the
 * code cache the build wrote (src/cli/launch.cts, scripts/bundle.mjs).
 */
import { strict as assert } from 'node:assert';
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { cleanup, freePort, JINX, onCleanup, portOpen, ROOT, runJinx, waitFor } from '../helpers/harness.js';
import { KeepAliveClient, makePrefix } from '../helpers/cli.js';
import { summarizeProfile, type CpuProfile } from '../../bench/cpuprofile.js';

const LAUNCH = join(ROOT, 'dist/src/cli/launch.cjs');

/** Whether V8 takes the build's code cache in a node started with `flags`. */
function cacheAccepted(flags: readonly string[]): boolean {
  const r = spawnSync(process.execPath, [...flags, '-e', `process.stdout.write(String(require(${JSON.stringify(LAUNCH)}).loadBundle().cacheAccepted))`],
    { encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout === 'true';
}

/**
 * The node flags bin/jinx starts node with (its `node_flags='…'` line).
 * @throws AssertionError when bin/jinx has no such line
 */
function binJinxNodeFlags(): string[] {
  const line = /^node_flags='([^']*)'$/m.exec(readFileSync(JINX, 'utf8'))?.[1];
  assert.ok(line, "bin/jinx has a node_flags='…' line");
  return line.split(' ');
}

const GOOD = { 'nginx.conf': 'events {}\nhttp { server { listen 127.0.0.1:8080; location / { return 200; } } }\n' };

describe('bin/jinx start-up (launch.cjs)', () => {
  after(cleanup);

  it('V8 takes the code cache the build wrote, in a node started as bin/jinx starts it (its node_flags line)', () => {
    const flags = binJinxNodeFlags();
    assert.ok(flags.some((f) => /^--max-semi-space-size=\d+$/.test(f)), flags.join(' '));
    assert.equal(cacheAccepted(flags), true);
  });

  it('with other V8 flags V8 refuses the cache and jinx -t still checks the configuration (exit 0, the same messages)', () => {
    assert.equal(cacheAccepted(['--max-opt=2']), false);
    const p = makePrefix(GOOD);
    const withCache = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-t', '--offline']);
    const without = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-t', '--offline'], { env: { JINX_NODE_FLAGS: '--max-opt=2' } });
    assert.equal(without.status, 0, without.stderr);
    assert.equal(without.stderr, withCache.stderr);
    assert.match(without.stderr, /test is successful/);
  });

  it('a CPU profile of bin/jinx names the functions of src/ and of the bundled packages (bench/cpuprofile.ts, through the bundle\'s source map)', () => {
    const p = makePrefix(GOOD);
    const dir = join(p, 'prof');
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-t', '--offline'], { env: { JINX_NODE_FLAGS: `--cpu-prof --cpu-prof-dir=${dir} --cpu-prof-interval=100` } });
    assert.equal(r.status, 0, r.stderr);
    const [file] = readdirSync(dir);
    const summary = summarizeProfile(JSON.parse(readFileSync(join(dir, file!), 'utf8')) as CpuProfile);
    const labels = summary.functions.map((f) => `${f.origin} ${f.label}`);
    assert.ok(labels.some((l) => /^jinx \S+ \(src\/(parser|config)\/[\w/-]+:\d+\)$/.test(l)), labels.slice(0, 40).join('\n'));
    // left in the bundle: esbuild's own helpers, which the map does not cover
    const unmappedUs = summary.origins.find((o) => o.origin === 'bundle')?.selfUs ?? 0;
    assert.ok(unmappedUs < 0.05 * summary.busyUs, `${unmappedUs} of ${summary.busyUs} µs in unmapped functions of the bundle`);
  });
});

/**
 * A preload (`--require`) that notes every one of node's own modules a
 * process loads while V8's flags differ from a plain node's (whose
 * `v8.cachedDataVersionTag()` is `JINX_TEST_PLAIN_TAG`): V8 refuses node's
 * code cache of those and compiles them again. At exit it writes them, the
 * heap's limit, the flags' tag then and the process's NODE_EXTRA_CA_CERTS
 * to `JINX_TEST_OUT/PID.json`.
 */
const FLAGS_PROBE = `const v8 = require('node:v8');
const Module = require('node:module');
const { writeFileSync } = require('node:fs');
const plain = Number(process.env.JINX_TEST_PLAIN_TAG);
const refused = [];
const load = Module._load;
Module._load = function (request, ...rest) {
  const loaded = process.moduleLoadList.length;
  const tag = v8.cachedDataVersionTag();
  const result = load.call(this, request, ...rest);
  if (Module.isBuiltin(request) && process.moduleLoadList.length > loaded && tag !== plain) refused.push(request);
  return result;
};
process.on('exit', () => writeFileSync(process.env.JINX_TEST_OUT + '/' + process.pid + '.json',
  JSON.stringify({ refused, heapLimitBytes: v8.getHeapStatistics().heap_size_limit, exitTag: v8.cachedDataVersionTag(),
    extraCaCerts: process.env.NODE_EXTRA_CA_CERTS ?? null })));
`;

/** What FLAGS_PROBE wrote for each process. */
interface ProbeReport {
  readonly refused: string[];
  readonly heapLimitBytes: number;
  readonly exitTag: number;
  readonly extraCaCerts: string | null;
}

/** `node FLAGS -p EXPR` with nothing else: what a plain node (or one with bin/jinx's flags) reports. */
function nodeReports(flags: readonly string[], expr: string): string {
  const r = spawnSync(process.execPath, [...flags, '-p', expr], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim();
}

describe("node's own modules and V8's flags (launch.cts, src/cli/tiering.ts)", () => {
  after(cleanup);

  it("jinx -t, a master and its worker: node's modules load under node's default flags, the heap keeps bin/jinx's sizes, -t ends on baseline code, the serving processes have llhttp's wasm flags, none has NODE_EXTRA_CA_CERTS", async () => {
    const binFlags = binJinxNodeFlags();
    const tagExpr = "require('node:v8').cachedDataVersionTag()";
    const plainTag = Number(nodeReports([], tagExpr));
    // -t ends on baseline code (`--no-turbofan`); a serving process has llhttp's flags
    const checkingTag = Number(nodeReports(['--no-turbofan'], tagExpr));
    const servingTag = Number(nodeReports(['--no-wasm-loop-unrolling', '--no-wasm-loop-peeling'], tagExpr));
    const sizedLimit = Number(nodeReports(binFlags, "require('node:v8').getHeapStatistics().heap_size_limit"));
    const port = await freePort();
    const p = makePrefix({
      'nginx.conf': `daemon off; worker_processes 1; events {}\nhttp { access_log off; server { listen 127.0.0.1:${port}; location / { return 200 ok; } } }\n`,
    });
    writeFileSync(join(p, 'probe.cjs'), FLAGS_PROBE);
    const env = (out: string): NodeJS.ProcessEnv => {
      // the worker may run as nobody (jinx started as root)
      mkdirSync(join(p, out));
      chmodSync(join(p, out), 0o777);
      return {
        ...process.env, JINX_NODE_FLAGS: `--require ${join(p, 'probe.cjs')}`, JINX_TEST_PLAIN_TAG: String(plainTag), JINX_TEST_OUT: join(p, out),
        NODE_EXTRA_CA_CERTS: join(p, 'extra-ca.pem'),
      };
    };
    const reports = (out: string): ProbeReport[] => readdirSync(join(p, out)).map((f) => JSON.parse(readFileSync(join(p, out, f), 'utf8')) as ProbeReport);
    const check = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-t'], { env: env('check') });
    assert.equal(check.status, 0, check.stderr);
    const child = spawn(JINX, ['-p', `${p}/`, '-c', 'nginx.conf'], { env: env('serve'), stdio: 'ignore' });
    const exited = new Promise((res) => child.once('exit', res));
    onCleanup(async () => { child.kill('SIGKILL'); await exited; });
    await waitFor(() => portOpen(port), 30_000, `port ${port}`);
    assert.equal((await new KeepAliveClient(port).get('/')).status, 200);
    child.kill('SIGQUIT');
    await exited;
    const [checked] = reports('check');
    assert.deepEqual(checked, { refused: [], heapLimitBytes: sizedLimit, exitTag: checkingTag, extraCaCerts: null });
    // the master and its worker
    const served = reports('serve');
    assert.equal(served.length, 2);
    for (const report of served) assert.deepEqual(report, { refused: [], heapLimitBytes: sizedLimit, exitTag: servingTag, extraCaCerts: null });
  });
});

/** The functions V8 finished optimizing with TurboFan, by node's `--trace-opt` output. */
function optimized(traceOut: string): string[] {
  return traceOut.split('\n').filter((l) => /^\[completed optimizing .*\(target TURBOFAN\)/.test(l));
}

/**
 * Starts jinx (a master and one worker) with `nodeFlags` and `--trace-opt`
 * on a `return 200` server, and returns what V8 had optimized once it
 * answered a first request and after 3,000 more on one connection.
 */
async function optimizedBeforeAndAfterLoad(nodeFlags: string): Promise<{ atStart: string[]; afterLoad: string[] }> {
  const port = await freePort();
  const p = makePrefix({
    'nginx.conf': `daemon off; worker_processes 1; events {}\nhttp { access_log off; server { listen 127.0.0.1:${port}; location / { return 200 ok; } } }\n`,
  });
  const child = spawn(JINX, ['-p', `${p}/`, '-c', 'nginx.conf'], {
    env: { ...process.env, JINX_NODE_FLAGS: `${nodeFlags} --trace-opt` }, stdio: ['ignore', 'pipe', 'ignore'],
  });
  const exited = new Promise((res) => child.once('exit', res));
  onCleanup(async () => { child.kill('SIGKILL'); await exited; });
  let out = '';
  child.stdout.on('data', (d: Buffer) => { out += d.toString('latin1'); });
  await waitFor(() => portOpen(port), 30_000, `port ${port}`);
  // the worker listens before it loads the runtime: its first answer says it has loaded everything
  const client = new KeepAliveClient(port);
  assert.equal((await client.get('/')).status, 200);
  const atStart = optimized(out);
  for (let i = 0; i < 3000; i++) assert.equal((await client.get('/')).status, 200);
  const afterLoad = optimized(out);
  child.kill('SIGQUIT');
  await exited;
  return { atStart, afterLoad };
}

describe('V8 tiers while starting and serving (src/cli/tiering.ts)', () => {
  after(cleanup);

  it('nothing is compiled with TurboFan while jinx starts (master and worker), and what requests make hot is once it serves', async () => {
    const { atStart, afterLoad } = await optimizedBeforeAndAfterLoad('--no-memory-reducer');
    assert.deepEqual(atStart, []);
    assert.ok(afterLoad.length > 0, 'no function optimized after 3,000 requests');
  });

  it('a JINX_NODE_FLAGS that chooses the tiers (--no-turbofan) is left alone: nothing is optimized after requests either', async () => {
    const { afterLoad } = await optimizedBeforeAndAfterLoad('--no-turbofan');
    assert.deepEqual(afterLoad, []);
  });

  it('jinx -t of a configuration compiles nothing with TurboFan', () => {
    const r = runJinx(['-p', `${makePrefix(GOOD)}/`, '-c', 'nginx.conf', '-t', '--offline'], { env: { JINX_NODE_FLAGS: '--trace-opt' } });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(optimized(r.stdout), []);
  });
});
