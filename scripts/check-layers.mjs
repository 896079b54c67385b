#!/usr/bin/env node
/**
 * Checks the import graph of src/ (issue 15, docs/architecture.md): layers
 * run one way, parser → config → runtime → cli, with log/ usable by runtime
 * and cli only, and at most one import circle, inside one folder.
 *
 * Usage: node scripts/check-layers.mjs [--circles] [--show]
 * Prints every import that runs back up the layers and every circle (as the
 * files it passes through); exits 1 when an import runs up the layers, and
 * with `--circles` also on a circle across folders or more than one circle.
 * `--show` also prints the layers each file imports from.
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const SRC = join(ROOT, 'src');

/** Layer rank of a file by its top folder under src/; a file may import its own rank or lower. */
const RANK = { parser: 1, config: 2, log: 3, runtime: 4, cli: 5 };
/** Files directly under src/ (shared helpers) are below every layer. */
const layerOf = (file) => {
  const top = relative(SRC, file).split('/')[0];
  return top.endsWith('.ts') ? 'src' : top;
};
const rankOf = (layer) => (layer === 'src' ? 0 : RANK[layer] ?? 0);

function walk(dir) {
  return readdirSync(dir).flatMap((name) => {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) return walk(full);
    return name.endsWith('.ts') ? [full] : [];
  });
}

const files = walk(SRC);
const edges = new Map();
for (const file of files) {
  const text = readFileSync(file, 'utf8');
  const targets = new Set();
  // static imports and re-exports, `import type` included: a type from a higher layer ties the layers as much as a value
  for (const m of text.matchAll(/^\s*(?:import|export)\b[^'";]*?from\s+['"](\.{1,2}\/[^'"]+)['"]/gm)) {
    targets.add(resolve(dirname(file), m[1].replace(/\.js$/, '.ts')));
  }
  for (const m of text.matchAll(/import\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g)) {
    targets.add(resolve(dirname(file), m[1].replace(/\.js$/, '.ts')));
  }
  edges.set(file, [...targets].filter((t) => t !== file));
}

const upward = [];
for (const [from, tos] of edges) {
  for (const to of tos) {
    const [lf, lt] = [layerOf(from), layerOf(to)];
    // log/ is for runtime and cli only; config and parser may not use it
    const bad = rankOf(lt) > rankOf(lf) || (lt === 'log' && lf !== 'log' && rankOf(lf) < RANK.runtime);
    if (bad) upward.push(`${relative(ROOT, from)} → ${relative(ROOT, to)}`);
  }
}

// strongly connected components (Tarjan), iteratively
const index = new Map();
const low = new Map();
const onStack = new Set();
const stack = [];
const circles = [];
let counter = 0;
for (const start of files) {
  if (index.has(start)) continue;
  const work = [[start, 0]];
  index.set(start, counter);
  low.set(start, counter++);
  stack.push(start);
  onStack.add(start);
  while (work.length > 0) {
    const top = work[work.length - 1];
    const [v, i] = top;
    const next = (edges.get(v) ?? []).filter((t) => edges.has(t));
    if (i < next.length) {
      top[1]++;
      const w = next[i];
      if (!index.has(w)) {
        index.set(w, counter);
        low.set(w, counter++);
        stack.push(w);
        onStack.add(w);
        work.push([w, 0]);
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
      continue;
    }
    work.pop();
    if (work.length > 0) {
      const parent = work[work.length - 1][0];
      low.set(parent, Math.min(low.get(parent), low.get(v)));
    }
    if (low.get(v) === index.get(v)) {
      const component = [];
      let w;
      do {
        w = stack.pop();
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) circles.push(component.map((f) => relative(SRC, f)).sort());
    }
  }
}

const folderOf = (f) => dirname(f);
const spanning = circles.filter((c) => new Set(c.map(folderOf)).size > 1);
for (const line of upward) console.log(`import up the layers: ${line}`);
for (const c of circles) console.log(`import circle (${c.length} files${spanning.includes(c) ? ', across folders' : ''}): ${c.join(', ')}`);
if (process.argv.includes('--show')) {
  for (const [from, tos] of edges) console.log(`${relative(ROOT, from)}: ${[...new Set(tos.map(layerOf))].join(' ')}`);
}
const circlesFail = process.argv.includes('--circles') && (spanning.length > 0 || circles.length > 1);
const failed = upward.length > 0 || circlesFail;
console.log(`${files.length} files: ${upward.length} imports up the layers, ${circles.length} import circles (${spanning.length} across folders)${failed ? '' : ': ok'}`);
process.exit(failed ? 1 : 0);
