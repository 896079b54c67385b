/**
 * Reads a V8 `.cpuprofile` (as written by `node --cpu-prof`) and prints where
 * the time went: self time per function, self time per origin (jinx, undici,
 * node internals, GC …), and inclusive time of jinx's own functions.
 *
 *   node dist/bench/cpuprofile.js FILE.cpuprofile [TOP]
 *
 * Shares are of the busy time, that is without `(idle)` samples. A profile
 * of bin/jinx names functions of the bundle (dist/bundle/jinx.cjs); they are
 * mapped back to src/ and to the bundled packages through the source map
 * the build writes beside it (scripts/bundle.mjs), so a profile of the
 * bundle is attributed per file as one of dist/src is.
 */
import { readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface FunctionTime {
  /** `name (file:line)`. */
  readonly label: string;
  readonly origin: string;
  readonly selfUs: number;
  readonly totalUs: number;
}

export interface ProfileSummary {
  readonly wallUs: number;
  readonly idleUs: number;
  readonly busyUs: number;
  readonly functions: readonly FunctionTime[];
  readonly origins: readonly { origin: string; selfUs: number }[];
}

/** The source maps of bundles, by script URL, and the directory their sources are relative to (null: no map beside it). */
const bundleMaps = new Map<string, { readonly map: SourceMap; readonly dir: string } | null>();

/**
 * A function of a bundle (a `.cjs` script with `SCRIPT.map` beside it) as
 * the source it was bundled from: that file's path, line and column.
 * Other functions, and those a map does not cover, as they are.
 */
function sourceFrame(cf: CallFrame): CallFrame {
  if (!cf.url.endsWith('.cjs')) return cf;
  let bundle = bundleMaps.get(cf.url);
  if (bundle === undefined) {
    const file = cf.url.startsWith('file:') ? fileURLToPath(cf.url) : cf.url;
    try {
      bundle = { map: new SourceMap(JSON.parse(readFileSync(`${file}.map`, 'utf8')) as ConstructorParameters<typeof SourceMap>[0]), dir: dirname(file) };
    } catch {
      bundle = null;
    }
    bundleMaps.set(cf.url, bundle);
  }
  if (bundle === null) return cf;
  const found = bundle.map.findEntry(cf.lineNumber, cf.columnNumber) as Partial<{ originalSource: string; originalLine: number; originalColumn: number }>;
  if (found.originalSource === undefined) return cf;
  return { functionName: cf.functionName, url: resolve(bundle.dir, found.originalSource), lineNumber: found.originalLine ?? 0, columnNumber: found.originalColumn ?? 0 };
}

/** Where a function comes from, by its script URL. */
function origin(cf: CallFrame): string {
  const u = cf.url;
  if (u === '') {
    if (cf.functionName === '(garbage collector)') return 'gc';
    if (cf.functionName.startsWith('(')) return cf.functionName;
    return 'native';
  }
  if (u.startsWith('node:')) return 'node';
  // what a mapped bundle's map does not cover: esbuild's own helpers (module wrappers, __toESM …)
  if (bundleMaps.get(u)) return 'bundle';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(u);
  if (nm) return nm[1]!;
  if (u.includes('/dist/src/') || /\/src\/.*\.ts$/.test(u)) return 'jinx';
  return 'other';
}

function shortUrl(u: string): string {
  const path = u.replace(/^file:\/\//, '');
  const short = path.includes('/node_modules/') ? path.replace(/^.*\/node_modules\//, '') : path.replace(/^.*\/(?:dist\/)?src\//, 'src/');
  return short.replace(/\.(?:js|ts)$/, '');
}

function label(cf: CallFrame): string {
  const name = cf.functionName || '(anonymous)';
  return cf.url ? `${name} (${shortUrl(cf.url)}:${cf.lineNumber + 1})` : name;
}

export function summarizeProfile(p: CpuProfile): ProfileSummary {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const n of p.nodes) {
    byId.set(n.id, { ...n, callFrame: sourceFrame(n.callFrame) });
    for (const c of n.children ?? []) parent.set(c, n.id);
  }
  const self = new Map<string, { origin: string; selfUs: number; totalUs: number }>();
  const entry = (cf: CallFrame): { origin: string; selfUs: number; totalUs: number } => {
    const key = label(cf);
    let e = self.get(key);
    if (!e) self.set(key, (e = { origin: origin(cf), selfUs: 0, totalUs: 0 }));
    return e;
  };
  let idleUs = 0;
  let wallUs = 0;
  for (let i = 0; i < p.samples.length; i++) {
    // timeDeltas[i] is the time before sample i; attribute it to sample i
    const dt = Math.max(0, p.timeDeltas[i] ?? 0);
    wallUs += dt;
    const node = byId.get(p.samples[i]!);
    if (!node) continue;
    if (node.callFrame.functionName === '(idle)') {
      idleUs += dt;
      continue;
    }
    entry(node.callFrame).selfUs += dt;
    const seen = new Set<string>();
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      const cf = byId.get(id)!.callFrame;
      if (cf.functionName === '(root)') break;
      const key = label(cf);
      if (seen.has(key)) continue;
      seen.add(key);
      entry(cf).totalUs += dt;
    }
  }
  const functions = [...self].map(([l, e]) => ({ label: l, ...e })).sort((a, b) => b.selfUs - a.selfUs);
  const originMap = new Map<string, number>();
  for (const f of functions) originMap.set(f.origin, (originMap.get(f.origin) ?? 0) + f.selfUs);
  const origins = [...originMap].map(([o, us]) => ({ origin: o, selfUs: us })).sort((a, b) => b.selfUs - a.selfUs);
  return { wallUs, idleUs, busyUs: wallUs - idleUs, functions, origins };
}

export function formatSummary(s: ProfileSummary, top = 25): string {
  const pct = (us: number): string => `${((100 * us) / s.busyUs).toFixed(1).padStart(5)}%`;
  const lines = [`sampled ${(s.wallUs / 1e6).toFixed(1)} s, busy ${(s.busyUs / 1e6).toFixed(1)} s (${((100 * s.busyUs) / s.wallUs).toFixed(0)}%); shares are of busy time`];
  lines.push('', 'self time by origin:');
  for (const o of s.origins.slice(0, 12)) lines.push(`  ${pct(o.selfUs)}  ${o.origin}`);
  lines.push('', `top ${top} functions by self time:`);
  for (const f of s.functions.slice(0, top)) lines.push(`  ${pct(f.selfUs)}  ${f.label}  [${f.origin}]`);
  lines.push('', 'jinx functions by inclusive time:');
  for (const f of s.functions.filter((x) => x.origin === 'jinx').sort((a, b) => b.totalUs - a.totalUs).slice(0, 15)) {
    lines.push(`  ${pct(f.totalUs)}  (self ${pct(f.selfUs).trim()})  ${f.label}`);
  }
  return lines.join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [file, top] = process.argv.slice(2);
  if (!file) {
    process.stderr.write('usage: node dist/bench/cpuprofile.js FILE.cpuprofile [TOP]\n');
    process.exit(1);
  }
  process.stdout.write(formatSummary(summarizeProfile(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile), Number(top ?? 25)) + '\n');
}
