/**
 * The config fuzzer: deterministic mutations (a fixed seed, its own small
 * PRNG) of the corpus configurations (`../shared/corpus`: Nginx Proxy
 * Manager's tree, Debian's, crossplane's fixtures) and `fixtures/default`,
 * each checked with what `jinx -t` runs (`checkConfiguration`, in-process, in
 * two worker threads), and a sample also with the reference `nginx -t`.
 *
 * Mutations: byte flips, token deletion and duplication, numbers blown up
 * past nginx's limits, unbalanced braces, deep nesting (up to 5,000 blocks),
 * a file including itself, NUL bytes, huge tokens, swapped lines, and
 * several of these at once.
 *
 * A `-t` check creates temp directories, opens log files and binds listening
 * addresses, and a mutated path or host name can point anywhere, so the
 * whole run happens in a sandbox made with `unshare`: a mount namespace where
 * everything but the run's temp directory is read-only, and a network
 * namespace with only a loopback interface (host names do not resolve, no
 * packet leaves). The temp directory is removed afterwards.
 *
 * Run by the test `test/parser/config-fuzz.test.ts`; by hand (as root) with
 * `scripts/config-fuzz.mjs`, which is also what runs inside the sandbox.
 */
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { WorkerCase, WorkerResult } from './config-fuzz-worker.js';
import { prepareDebian, prepareProxyManager } from './corpus-trees.js';
import { ROOT, SHARED } from './harness.js';

const ORACLE = '/opt/nginx-oracle/nginx';

// ---------------------------------------------------------------------------
// PRNG and mutations

/** mulberry32: a small 32-bit generator, the same sequence for the same seed on every machine. */
export class Prng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  pick<T>(list: readonly T[]): T {
    return list[this.int(list.length)]!;
  }
}

/** Numbers at and past nginx's limits (`NGX_MAX_INT_T_VALUE` = 2^63 - 1 on 64-bit). */
const BIG_NUMBERS = [
  '99999999999999999999', '18446744073709551616', '18446744073709551615', '9223372036854775807', '9223372036854775808',
  '4294967296', '2147483648', '65536', '0', '00000000000000000001', '1' + '0'.repeat(400),
];

/** Bytes a flip writes: mostly the ones the tokenizer cares about. */
const FLIP_BYTES = ['{', '}', ';', '"', "'", '\\', '$', '#', ' ', '\n', '\t', '\0', '(', ')', '*', '~', '=', '/', ':', 'a', '9', '\xff', '\r'];

/** Token spans (start, end) of a text: words, quoted strings and `{ } ;`. */
function tokenSpans(text: string): [number, number][] {
  const spans: [number, number][] = [];
  const re = /"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[{};]|[^\s{};]+/gs;
  for (let m = re.exec(text); m; m = re.exec(text)) spans.push([m.index, m.index + m[0].length]);
  return spans;
}

/** Offsets right after a `;`, `{` or `}`: where a statement may start. */
function statementStarts(text: string): number[] {
  const out: number[] = [0];
  for (let i = 0; i < text.length; i++) if (text[i] === ';' || text[i] === '{' || text[i] === '}') out.push(i + 1);
  return out;
}

const insertAt = (text: string, at: number, what: string): string => text.slice(0, at) + what + text.slice(at);

/** One mutation: a name for reports and the function. `self` is the mutated file's path (with `@ROOT@`). */
interface Mutator {
  readonly name: string;
  readonly weight: number;
  apply(text: string, rng: Prng, self: string): string;
}

const MUTATORS: readonly Mutator[] = [
  {
    name: 'flip', weight: 20,
    apply: (t, rng) => {
      if (t.length === 0) return rng.pick(FLIP_BYTES);
      const at = rng.int(t.length);
      return t.slice(0, at) + rng.pick(FLIP_BYTES) + t.slice(at + 1);
    },
  },
  {
    name: 'delete-token', weight: 12,
    apply: (t, rng) => {
      const spans = tokenSpans(t);
      if (spans.length === 0) return t;
      const [a, b] = rng.pick(spans);
      return t.slice(0, a) + t.slice(b);
    },
  },
  {
    name: 'duplicate-token', weight: 10,
    apply: (t, rng) => {
      const spans = tokenSpans(t);
      if (spans.length === 0) return t;
      const [a, b] = rng.pick(spans);
      return t.slice(0, b) + ' ' + t.slice(a, b) + t.slice(b);
    },
  },
  {
    name: 'number', weight: 14,
    apply: (t, rng) => {
      const runs = [...t.matchAll(/\d+/g)];
      if (runs.length === 0) return t;
      const m = rng.pick(runs);
      return t.slice(0, m.index) + rng.pick(BIG_NUMBERS) + t.slice(m.index! + m[0].length);
    },
  },
  {
    name: 'brace', weight: 8,
    apply: (t, rng) => {
      const braces = [...t.matchAll(/[{}]/g)];
      if (braces.length > 0 && rng.next() < 0.5) {
        const m = rng.pick(braces);
        return t.slice(0, m.index) + t.slice(m.index! + 1);
      }
      return insertAt(t, rng.pick(statementStarts(t)), rng.next() < 0.5 ? ' { ' : ' } ');
    },
  },
  {
    name: 'nest', weight: 4,
    apply: (t, rng) => {
      const depth = rng.pick([20, 100, 500, 500, 1000, 5000]);
      const open = rng.pick(['location /n { ', 'location ~ n { ', 'server { ', 'http { ', 'if ($a) { ', 'limit_except GET { ', 'x { ']);
      const at = rng.pick(statementStarts(t));
      return insertAt(t, at, `\n${open.repeat(depth)}\n${'}'.repeat(depth)}\n`);
    },
  },
  {
    name: 'self-include', weight: 4,
    apply: (t, rng, self) => insertAt(t, rng.pick(statementStarts(t)), `\ninclude ${self};\n`),
  },
  {
    name: 'nul', weight: 8,
    apply: (t, rng) => {
      const spans = tokenSpans(t);
      if (spans.length === 0 || rng.next() < 0.3) return insertAt(t, rng.int(t.length + 1), '\0');
      const [a, b] = rng.pick(spans);
      return insertAt(t, a + rng.int(b - a + 1), '\0');
    },
  },
  {
    name: 'huge-token', weight: 5,
    apply: (t, rng) => {
      const length = rng.pick([1000, 4095, 4096, 4097, 10_000, 100_000]);
      const body = 'x'.repeat(length);
      const token = rng.pick([body, `"${body}"`, `'${body}'`, `/${body}`, `$${body}`, `# ${body}`]);
      return insertAt(t, rng.pick(statementStarts(t)), ` ${token} `);
    },
  },
  {
    name: 'line-swap', weight: 5,
    apply: (t, rng) => {
      const lines = t.split('\n');
      if (lines.length < 2) return t;
      const [i, j] = [rng.int(lines.length), rng.int(lines.length)];
      [lines[i], lines[j]] = [lines[j]!, lines[i]!];
      return lines.join('\n');
    },
  },
];

const TOTAL_WEIGHT = MUTATORS.reduce((s, m) => s + m.weight, 0);

function pickMutator(rng: Prng): Mutator {
  let r = rng.next() * TOTAL_WEIGHT;
  for (const m of MUTATORS) {
    r -= m.weight;
    if (r < 0) return m;
  }
  return MUTATORS[0]!;
}

/** Applies one to three mutations; returns the text and their names. */
export function mutate(text: string, rng: Prng, self: string): { text: string; mutation: string } {
  const count = rng.next() < 0.75 ? 1 : rng.next() < 0.7 ? 2 : 3;
  const names: string[] = [];
  let out = text;
  for (let i = 0; i < count; i++) {
    const m = pickMutator(rng);
    out = m.apply(out, rng, self);
    names.push(m.name);
  }
  return { text: out, mutation: names.join('+') };
}

// ---------------------------------------------------------------------------
// Seeds

/** A configuration that can be checked: its main file and prefix, and the files a case may mutate (all with `@ROOT@`). */
interface Unit {
  readonly name: string;
  readonly weight: number;
  readonly conf: string;
  readonly prefix: string;
  readonly files: readonly string[];
}

/** The seed trees under ROOT/seed, with the units to check; paths use `@ROOT@` for ROOT/seed. */
async function prepareSeeds(seedRoot: string): Promise<Unit[]> {
  mkdirSync(seedRoot, { recursive: true });
  process.env['TMPDIR'] = seedRoot;
  const units: Unit[] = [];
  const rel = (p: string): string => `@ROOT@/${relative(seedRoot, p)}`;
  const configFiles = (dir: string): string[] => filesIn(dir).filter((f) => /\.conf$|\/(default|site\.conf|mime\.types|[a-z_]+_params)$/.test(f));
  const npm = await prepareProxyManager();
  units.push({
    name: 'npm', weight: 25, conf: rel(npm.conf), prefix: rel(npm.prefix) + '/',
    files: [rel(npm.conf), ...configFiles(npm.root).filter((f) => f !== npm.conf && !f.includes('/not-installed/')).map(rel)],
  });
  const debian = await prepareDebian();
  // `user www-data;` costs two `getent` runs a case (most of a Debian case's time): left out, line kept
  const debianConf = readFileSync(debian.conf, 'latin1');
  writeFileSync(debian.conf, Buffer.from(debianConf.replace(/^user www-data;/m, '# user www-data;'), 'latin1'));
  units.push({
    name: 'debian', weight: 25, conf: rel(debian.conf), prefix: rel(debian.prefix) + '/',
    files: [rel(debian.conf), ...configFiles(join(debian.root, 'etc/nginx')).filter((f) => f !== debian.conf && !f.includes('sites-available')).map(rel)],
  });
  const fixture = join(seedRoot, 'default');
  cpSync(join(ROOT, 'fixtures/default'), fixture, { recursive: true });
  units.push({ name: 'default', weight: 10, conf: rel(join(fixture, 'nginx.conf')), prefix: rel(fixture) + '/', files: [rel(join(fixture, 'nginx.conf'))] });
  const crossplane = join(seedRoot, 'crossplane');
  cpSync(join(SHARED, 'corpus/crossplane/configs'), crossplane, { recursive: true });
  const cases = readdirSync(crossplane).sort();
  for (const c of cases) {
    const dir = join(crossplane, c);
    // jinx's built-in access log is PREFIX/logs/access.log (the reference's, /var/log/nginx/access.log)
    mkdirSync(join(dir, 'logs'), { recursive: true });
    const mains = readdirSync(dir).filter((f) => f.endsWith('.conf') && (f === 'nginx.conf' || !existsSync(join(dir, 'nginx.conf'))));
    for (const m of mains) {
      units.push({
        name: `crossplane/${c}/${m}`, weight: 40 / cases.length, conf: rel(join(dir, m)), prefix: rel(dir) + '/',
        files: [rel(join(dir, m)), ...filesIn(dir).filter((f) => f.endsWith('.conf') && f !== join(dir, m)).map(rel)],
      });
    }
  }
  return units;
}

function filesIn(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesIn(p));
    else out.push(p);
  }
  return out;
}

/** Copies the seed tree to a worker's tree, with the seed root's path replaced in every text file. */
function copySeeds(seedRoot: string, to: string): void {
  cpSync(seedRoot, to, { recursive: true });
  for (const f of filesIn(to)) {
    const buf = readFileSync(f);
    if (buf.includes(0)) continue;
    const text = buf.toString('latin1');
    if (text.includes(seedRoot)) writeFileSync(f, Buffer.from(text.split(seedRoot).join(to), 'latin1'));
  }
}

// ---------------------------------------------------------------------------
// What is checked

/** Whether an `[emerg]` line names its place: ` in FILE:LINE`, or ` in command line`. */
export function namesPlace(line: string): boolean {
  return / in \S.*:\d+$/.test(line) || / in command line$/.test(line);
}

/**
 * Messages nginx logs without a place (`ngx_log_error`, not
 * `ngx_conf_log_error`), as the reference shows them: files opened, temp
 * directories made, addresses bound and certificates loaded after the
 * configuration has been read, and the checks made at the end of it.
 */
export const PLACELESS: readonly RegExp[] = [
  /^\[emerg\] open\(\) ".*" failed \(.*\)$/,
  /^\[emerg\] mkdir\(\) ".*" failed \(.*\)$/,
  /^\[emerg\] bind\(\) to .* failed \(.*\)$/,
  /^\[crit\] pread\(\) ".*" failed \(.*\)$/,
  /^\[emerg\] no "events" section in configuration$/,
  /^\[emerg\] unknown ".*" variable$/,
  /^\[emerg\] \d+ worker_connections are not enough for \d+ listening sockets$/,
  /^\[emerg\] zero size shared memory zone ".*"$/,
  /^\[emerg\] cannot load certificate( key)? ".*": .*$/,
  /^\[emerg\] SSL_CTX_\w+\(.*\) failed.*$/,
  /^\[emerg\] no "ssl_certificate_key" is defined for certificate ".*"$/,
  /^\[emerg\] could not build .*$/,
  /^\[emerg\] no "charset_map" between the charsets ".*" and ".*"$/,
];

/** A case worth reporting. */
export interface CaseNote {
  readonly id: number;
  readonly unit: string;
  readonly file: string;
  readonly mutation: string;
  readonly detail: string;
}

/** What a run found. */
export interface FuzzSummary {
  readonly seed: number;
  readonly cases: number;
  readonly ms: number;
  readonly slowestMs: number;
  readonly accepted: number;
  readonly refused: number;
  readonly byMutation: Readonly<Record<string, number>>;
  /** Cases still running at the per-case timeout. */
  readonly hangs: readonly CaseNote[];
  /** Errors that were not configuration errors (what `jinx -t` would end on with a stack trace). */
  readonly crashes: readonly CaseNote[];
  /** An exit status other than 0 or 1. */
  readonly badStatus: readonly CaseNote[];
  /** `[emerg]` lines without a place that are not among nginx's placeless messages. */
  readonly placeless: readonly CaseNote[];
  readonly oracle: {
    readonly binary: string | undefined;
    readonly cases: number;
    readonly agree: number;
    /** jinx accepted where nginx refused, or the reverse. */
    readonly disagreements: readonly CaseNote[];
    /** The same first error, with a place in one output and not in the other. */
    readonly placeMismatches: readonly CaseNote[];
    /**
     * Both refused, with different first errors: a file with several errors,
     * where jinx reports another one first (see README, Differences from nginx).
     */
    readonly firstErrorDiffers: number;
    /** nginx killed by a signal (it crashes on a file that includes itself): not compared. */
    readonly nginxCrashed: number;
  };
  readonly shown?: readonly unknown[];
}

/** Options of a run. */
export interface FuzzOptions {
  readonly cases: number;
  readonly seed: number;
  /** How many of the cases (spread evenly) also go to the reference nginx. */
  readonly oracleCases: number;
  readonly timeoutMs: number;
  /** No case starts after this many milliseconds: on a busy machine the run checks fewer cases (the first ones). */
  readonly budgetMs: number;
  readonly show?: boolean;
}

// ---------------------------------------------------------------------------
// Running, inside the sandbox

interface Slot {
  worker: Worker;
  readonly root: string;
  busy: WorkerCase | undefined;
  timer: NodeJS.Timeout | undefined;
}

/**
 * Runs the cases in this process (already in the sandbox): prepares the
 * seed trees under `root`, one copy per worker, and checks the cases in two
 * worker threads, stopping early when `budgetMs` is spent.
 */
export async function runInside(root: string, opts: FuzzOptions): Promise<FuzzSummary> {
  const seedRoot = join(root, 'seed');
  const units = await prepareSeeds(seedRoot);
  const texts = new Map<string, string>();
  const textOf = (file: string): string => {
    let t = texts.get(file);
    if (t === undefined) {
      t = readFileSync(file.replace('@ROOT@', seedRoot), 'latin1').split(seedRoot).join('@ROOT@');
      texts.set(file, t);
    }
    return t;
  };
  // the comparison is with nginx 1.30 only (Debian's older nginx differs in ways jinx does not follow)
  const nginx = existsSync(ORACLE) && process.env.JINX_NO_NGINX !== '1' ? ORACLE : undefined;
  const workerFile = join(dirname(fileURLToPath(import.meta.url)), 'config-fuzz-worker.js');
  const start = (slotRoot: string): Worker => new Worker(workerFile, { workerData: { root: slotRoot, nginx } });
  const slots: Slot[] = [0, 1].map((k) => {
    const slotRoot = join(root, `w${k}`);
    copySeeds(seedRoot, slotRoot);
    return { worker: start(slotRoot), root: slotRoot, busy: undefined, timer: undefined };
  });

  const totalWeight = units.reduce((s, u) => s + u.weight, 0);
  const oracleEvery = opts.oracleCases > 0 ? Math.max(1, Math.floor(opts.cases / opts.oracleCases)) : 0;
  const meta = new Map<number, { unit: string; file: string; mutation: string }>();
  const makeCase = (id: number): WorkerCase => {
    const rng = new Prng((opts.seed * 1_000_003 + id * 7_919) >>> 0);
    let r = rng.next() * totalWeight;
    let unit = units[0]!;
    for (const u of units) {
      r -= u.weight;
      if (r < 0) {
        unit = u;
        break;
      }
    }
    const file = rng.next() < 0.5 ? unit.files[0]! : rng.pick(unit.files);
    const original = textOf(file);
    const { text, mutation } = mutate(original, rng, file);
    meta.set(id, { unit: unit.name, file: file.replace('@ROOT@/', ''), mutation });
    return { id, file, conf: unit.conf, prefix: unit.prefix, text, original, oracle: oracleEvery > 0 && id % oracleEvery === 0 && Boolean(nginx) };
  };

  const results: WorkerResult[] = [];
  const hangs: number[] = [];
  const started = Date.now();
  await new Promise<void>((done) => {
    let nextId = 0;
    let finished = 0;
    let total = opts.cases;
    const feed = (slot: Slot): void => {
      // past the time budget no new case starts: the run covers the first cases of the fixed sequence
      if (nextId < total && Date.now() - started > opts.budgetMs) total = nextId;
      if (nextId >= total) {
        if (finished >= total) done();
        return;
      }
      const c = makeCase(nextId++);
      slot.busy = c;
      slot.timer = setTimeout(() => {
        // a hang: the worker is stopped and replaced, and the file put back
        hangs.push(c.id);
        slot.busy = undefined;
        void slot.worker.terminate();
        writeFileSync(c.file.replace('@ROOT@', slot.root), Buffer.from(c.original.split('@ROOT@').join(slot.root), 'latin1'));
        slot.worker = start(slot.root);
        listen(slot);
        finished++;
        feed(slot);
      }, opts.timeoutMs);
      slot.worker.postMessage(c);
    };
    const listen = (slot: Slot): void => {
      slot.worker.on('message', (r: WorkerResult) => {
        clearTimeout(slot.timer);
        slot.busy = undefined;
        results.push(r);
        finished++;
        feed(slot);
      });
    };
    for (const slot of slots) {
      listen(slot);
      feed(slot);
    }
  });
  const ms = Date.now() - started;
  await Promise.all(slots.map((s) => s.worker.terminate()));

  const note = (id: number, detail: string): CaseNote => ({ id, ...meta.get(id)!, detail });
  const crashes: CaseNote[] = [];
  const badStatus: CaseNote[] = [];
  const placeless: CaseNote[] = [];
  const disagreements: CaseNote[] = [];
  const placeMismatches: CaseNote[] = [];
  const byMutation: Record<string, number> = {};
  let [accepted, oracleCases, agree, nginxCrashed, slowestMs, firstErrorDiffers] = [0, 0, 0, 0, 0, 0];
  const firstError = (lines: readonly string[]): string | undefined => lines.find((l) => /^\[(emerg|crit|alert)\] /.test(l));
  results.sort((a, b) => a.id - b.id);
  for (const r of results) {
    const m = meta.get(r.id)!;
    byMutation[m.mutation.split('+')[0]!] = (byMutation[m.mutation.split('+')[0]!] ?? 0) + 1;
    slowestMs = Math.max(slowestMs, r.ms);
    if (r.jinx.status === 0) accepted++;
    if (r.jinx.status !== 0 && r.jinx.status !== 1) badStatus.push(note(r.id, `exit ${r.jinx.status}`));
    if (r.internal) crashes.push(note(r.id, r.internal.split('\n').slice(0, 6).join('\n')));
    for (const l of r.jinx.lines) {
      if (/^\[(emerg|crit|alert)\] /.test(l) && !namesPlace(l) && !PLACELESS.some((p) => p.test(l))) placeless.push(note(r.id, l));
    }
    if (r.nginx) {
      if (r.nginx.signal) {
        nginxCrashed++;
        continue;
      }
      oracleCases++;
      const [jOk, nOk] = [r.jinx.status === 0, r.nginx.status === 0];
      const [jErr, nErr] = [firstError(r.jinx.lines), firstError(r.nginx.lines)];
      if (jOk === nOk) agree++;
      else disagreements.push(note(r.id, `jinx: ${jErr ?? 'accepted'} | nginx: ${nErr ?? 'accepted'}`));
      if (jErr && nErr) {
        const text = (line: string): string => line.replace(/ in (\S.*:\d+|command line)$/, '');
        if (text(jErr) !== text(nErr)) firstErrorDiffers++;
        else if (namesPlace(jErr) !== namesPlace(nErr)) placeMismatches.push(note(r.id, `jinx: ${jErr} | nginx: ${nErr}`));
      }
    }
  }
  return {
    seed: opts.seed, cases: results.length + hangs.length, ms, slowestMs, accepted, refused: results.length - accepted, byMutation,
    hangs: hangs.map((id) => note(id, `still running after ${opts.timeoutMs} ms`)), crashes, badStatus, placeless,
    oracle: { binary: nginx, cases: oracleCases, agree, disagreements, placeMismatches, firstErrorDiffers, nginxCrashed },
    ...(opts.show ? { shown: results.map((r) => ({ ...meta.get(r.id), ...r })) } : {}),
  };
}

// ---------------------------------------------------------------------------
// The sandbox

const SANDBOX_SCRIPT = [
  'set -e',
  'ip link set lo up',
  'mount --bind "$1" "$1"',
  'mount -o remount,bind,ro /',
  'for m in /dev/shm /var/tmp; do if mountpoint -q "$m"; then mount -o remount,bind,ro "$m"; fi; done',
  // nginx's compiled-in paths (pid file, temp and log directories) writable as on the host, in memory
  'for d in /run /var/lib/nginx /var/log/nginx /var/cache/nginx; do if [ -d "$d" ]; then mount -t tmpfs tmpfs "$d"; fi; done',
  'shift',
  'exec "$@"',
].join('\n');

/** Why the sandbox cannot be made here (not root, no `unshare` or `ip`), or undefined when it can. */
export function sandboxUnavailable(): string | undefined {
  const r = spawnSync('unshare', ['-m', '-n', '--', 'sh', '-c', 'ip link set lo up && mount -o remount,bind,ro / && echo ok'], { encoding: 'utf8' });
  return r.stdout?.trim() === 'ok' ? undefined : `no sandbox (unshare -m -n as root, and ip): ${(r.error?.message ?? r.stderr ?? '').trim()}`;
}

/**
 * Runs the fuzzer in the sandbox, in a temp directory removed afterwards.
 * @throws Error when the sandboxed run fails or prints no summary
 */
export async function runFuzz(opts: FuzzOptions): Promise<FuzzSummary> {
  const root = mkdtempSync(join(tmpdir(), 'jinx-fuzz-'));
  try {
    const args = ['-m', '-n', '--', 'sh', '-c', SANDBOX_SCRIPT, 'sandbox', root, process.execPath, join(ROOT, 'scripts/config-fuzz.mjs'), '--inside', root,
      '--cases', String(opts.cases), '--seed', String(opts.seed), '--oracle', String(opts.oracleCases), '--timeout', String(opts.timeoutMs),
      '--budget', String(opts.budgetMs), ...(opts.show ? ['--show'] : [])];
    const child = spawn('unshare', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const code = await new Promise<number | null>((res) => child.on('close', res));
    if (code !== 0) throw new Error(`sandboxed fuzzer exited with ${code}: ${err.slice(-4000)}`);
    return JSON.parse(out) as FuzzSummary;
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
