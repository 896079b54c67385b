/**
 * The figures of several runs of bench/proxy.ts (each written with `--json
 * FILE`), as issue 17 asks for them: for every body size and server, the
 * median over the runs of each run's median req/s and p99 and of its peak
 * RSS; the ratios of jinx to the other servers taken within each run (a run
 * measures every server in the same minutes, runs an hour apart do not) and
 * their median; each server's idle RSS; then issue 17's targets, each with
 * the figure it is checked against and whether it is met.
 *
 *   node dist/bench/runs.js RUN1.json RUN2.json RUN3.json
 *
 * The runs may differ in protocol (an HTTP/2 run of `--protocol h2` adds its
 * body sizes as `h2 100 B`, one of `--protocol https` as `https 1 MiB`).
 * Exit status 0 when the files could be read (whatever the figures), 1
 * otherwise.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { median, MiB } from './procs.js';

/** The part of one proxy.ts run (`--json`) read here. */
export interface RunFile {
  readonly options: { readonly protocol: 'h1' | 'https' | 'h2' };
  /** Idle RSS per server, bytes (written since the runs summary existed; absent in older files). */
  readonly idleRssBytes?: Readonly<Record<string, number>>;
  readonly runs: readonly {
    readonly target: string;
    readonly size: number;
    readonly round: number;
    readonly counted: boolean;
    readonly rps: number;
    readonly p99Ms: number;
    readonly peakRssBytes: number;
  }[];
}

/** One server's figures for one body size in one run file. */
interface Figures {
  readonly rps: number;
  readonly p99Ms: number;
  readonly peakRssBytes: number;
}

/** A scenario: the protocol and body size, as the report names it (`100 B`, `https 1 MiB`, `h2 100 B`). */
type Scenario = string;

const sizeName = (n: number): string => (n % MiB === 0 ? `${n / MiB} MiB` : n % 1024 === 0 ? `${n / 1024} KiB` : `${n} B`);
const mib = (bytes: number): string => (Number.isFinite(bytes) ? `${(bytes / MiB).toFixed(1)} MiB` : '-');
const int = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '-');
const ms = (n: number): string => (Number.isFinite(n) ? `${n.toFixed(1)} ms` : '-');
const ratio = (n: number): string => (Number.isFinite(n) ? `${n.toFixed(2)}×` : '-');

/** Each file's figures: scenario → server → figures (medians of its counted rounds, the highest peak of all its runs). */
function figuresOf(file: RunFile): Map<Scenario, Map<string, Figures>> {
  const out = new Map<Scenario, Map<string, Figures>>();
  const prefix = file.options.protocol === 'h1' ? '' : `${file.options.protocol} `;
  for (const size of new Set(file.runs.map((r) => r.size))) {
    const byTarget = new Map<string, Figures>();
    for (const target of new Set(file.runs.map((r) => r.target))) {
      const all = file.runs.filter((r) => r.size === size && r.target === target);
      const counted = all.filter((r) => r.counted && r.round > 0);
      if (counted.length === 0) continue;
      byTarget.set(target, {
        rps: median(counted.map((r) => r.rps)),
        p99Ms: median(counted.map((r) => r.p99Ms)),
        peakRssBytes: Math.max(...all.map((r) => r.peakRssBytes)),
      });
    }
    out.set(prefix + sizeName(size), byTarget);
  }
  return out;
}

/** The report: figures per scenario, ratios, idle RSS and issue 17's targets. */
export function report(files: readonly RunFile[]): string {
  const perFile = files.map(figuresOf);
  const scenarios = [...new Set(perFile.flatMap((f) => [...f.keys()]))];
  const lines: string[] = [`${files.length} run file(s) of bench/proxy.ts; figures are medians over the files of each file's own`];
  /** The median over the runs that measured both of `a`'s figure over `b`'s, for one scenario. */
  const ratioOf = (scenario: Scenario, a: string, b: string, figure: (f: Figures) => number): number =>
    median(perFile.flatMap((f) => {
      const x = f.get(scenario)?.get(a);
      const y = f.get(scenario)?.get(b);
      return x && y ? [figure(x) / figure(y)] : [];
    }));
  const figure = (scenario: Scenario, target: string, pick: (f: Figures) => number): number =>
    median(perFile.flatMap((f) => {
      const x = f.get(scenario)?.get(target);
      return x ? [pick(x)] : [];
    }));
  for (const scenario of scenarios) {
    const targets = [...new Set(perFile.flatMap((f) => [...(f.get(scenario)?.keys() ?? [])]))];
    lines.push('', `${scenario}:`);
    for (const t of targets) {
      lines.push(`  ${t.padEnd(10)} ${int(figure(scenario, t, (f) => f.rps)).padStart(9)} req/s  p99 ${ms(figure(scenario, t, (f) => f.p99Ms)).padStart(10)}  peak ${mib(figure(scenario, t, (f) => f.peakRssBytes)).padStart(10)}`);
    }
    for (const t of targets.filter((x) => x !== 'jinx')) {
      lines.push(`  jinx/${t}: req/s ${ratio(ratioOf(scenario, 'jinx', t, (f) => f.rps))}, p99 ${ratio(ratioOf(scenario, 'jinx', t, (f) => f.p99Ms))}`);
    }
  }
  const idleTargets = [...new Set(files.flatMap((f) => Object.keys(f.idleRssBytes ?? {})))];
  const idle = (t: string): number => median(files.flatMap((f) => (f.idleRssBytes?.[t] !== undefined ? [f.idleRssBytes[t]] : [])));
  if (idleTargets.length > 0) lines.push('', `idle RSS: ${idleTargets.map((t) => `${t} ${mib(idle(t))}`).join(', ')}`);

  // issue 17's "done when", each against the figure above it checks
  lines.push('', "issue 17's targets:");
  const check = (what: string, value: number, shown: string, met: boolean): void => {
    lines.push(`  ${Number.isFinite(value) ? (met ? 'met    ' : 'not met') : 'no data'}  ${what}: ${shown}`);
  };
  const peaks = scenarios.map((s) => figure(s, 'jinx', (f) => f.peakRssBytes));
  const highest = Math.max(...peaks.filter(Number.isFinite));
  check('peak RSS at most 100 MiB in every scenario', highest, `highest ${mib(highest)} (${scenarios.map((s, i) => `${s} ${mib(peaks[i]!)}`).join(', ')})`, highest <= 100 * MiB);
  check('idle RSS at most 60 MiB', idle('jinx'), mib(idle('jinx')), idle('jinx') <= 60 * MiB);
  const mib1 = sizeName(MiB);
  const vsFastify = ratioOf(mib1, 'jinx', 'fastify', (f) => f.rps);
  check('1 MiB req/s at least 1.0× fastify', vsFastify, ratio(vsFastify), vsFastify >= 1);
  const vsNginx = ratioOf(mib1, 'jinx', 'nginx', (f) => f.rps);
  check('1 MiB req/s at least 0.8× nginx', vsNginx, ratio(vsNginx), vsNginx >= 0.8);
  const p99 = ratioOf(mib1, 'jinx', 'nginx', (f) => f.p99Ms);
  check("1 MiB p99 at most 2× nginx's", p99, ratio(p99), p99 <= 2);
  for (const s of scenarios.filter((x) => x !== mib1)) {
    const vsBare = ratioOf(s, 'jinx', 'bare', (f) => f.rps);
    check(`${s} req/s at least 1.0× bare`, vsBare, Number.isFinite(vsBare) ? ratio(vsBare) : 'no bare in these runs', vsBare >= 1);
  }
  return lines.join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const paths = process.argv.slice(2);
  if (paths.length === 0) {
    process.stderr.write('usage: node dist/bench/runs.js RUN.json…  (files of bench/proxy.ts --json)\n');
    process.exit(1);
  }
  try {
    process.stdout.write(report(paths.map((p) => JSON.parse(readFileSync(p, 'utf8')) as RunFile)) + '\n');
  } catch (err) {
    process.stderr.write(`runs: ${(err as Error).message}\n`);
    process.exit(1);
  }
}
