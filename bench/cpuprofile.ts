/**
 * Reads a V8 `.cpuprofile` (as written by `node --cpu-prof`) and prints where
 * the time went: self time per function, self time per origin (jinx, undici,
 * node internals, GC …), and inclusive time of jinx's own functions.
 *
 *   node dist/bench/cpuprofile.js FILE.cpuprofile [TOP]
 *
 * Shares are of the busy time, that is without `(idle)` samples.
 */
import { readFileSync } from 'node:fs';
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

/** Where a function comes from, by its script URL. */
function origin(cf: CallFrame): string {
  const u = cf.url;
  if (u === '') {
    if (cf.functionName === '(garbage collector)') return 'gc';
    if (cf.functionName.startsWith('(')) return cf.functionName;
    return 'native';
  }
  if (u.startsWith('node:')) return 'node';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(u);
  if (nm) return nm[1]!;
  if (u.includes('/dist/src/')) return 'jinx';
  return 'other';
}

function shortUrl(u: string): string {
  return u.replace(/^file:\/\//, '').replace(/^.*\/dist\/src\//, 'src/').replace(/^.*\/node_modules\//, '').replace(/\.js$/, '');
}

function label(cf: CallFrame): string {
  const name = cf.functionName || '(anonymous)';
  return cf.url ? `${name} (${shortUrl(cf.url)}:${cf.lineNumber + 1})` : name;
}

export function summarizeProfile(p: CpuProfile): ProfileSummary {
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const n of p.nodes) {
    byId.set(n.id, n);
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
