/**
 * How bin/jinx starts: `dist/src/cli/launch.cjs` loads the bundle with the
 * code cache the build wrote (src/cli/launch.cts, scripts/bundle.mjs).
 */
import { strict as assert } from 'node:assert';
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
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

const GOOD = { 'nginx.conf': 'events {}\nhttp { server { listen 127.0.0.1:8080; location / { return 200; } } }\n' };

describe('bin/jinx start-up (launch.cjs)', () => {
  after(cleanup);

  it('V8 takes the code cache the build wrote, in a node started as bin/jinx starts it (its node_flags line)', () => {
    const flags = /^node_flags='([^']*)'$/m.exec(readFileSync(join(ROOT, 'bin/jinx'), 'utf8'))?.[1];
    assert.ok(flags, "bin/jinx has a node_flags='…' line");
    assert.match(flags, /--max-semi-space-size=\d+/);
    assert.equal(cacheAccepted(flags.split(' ')), true);
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

/** The functions V8 finished optimizing with TurboFan, by node's `--trace-opt` output. */
function optimized(traceOut: string): string[] {
  return traceOut.split('\n').filter((l) => /^\[completed optimizing .*\(target TURBOFAN\)/.test(l));
}

/**
 * Starts jinx (a master and one worker) with `nodeFlags` and `--trace-opt`
 * on a `return 200` server, and returns what V8 had optimized once it
 * listened and after 3,000 requests on one connection.
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
  const atStart = optimized(out);
  const client = new KeepAliveClient(port);
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
