/**
 * What the semantic lint rules read a configuration through: the `http`
 * block's statements as a tree of blocks (each directive with the file:line
 * it was written at), and, when the configuration compiled, the location a
 * URI selects in a server, found in the compiled route table the way
 * `ngx_http_core_find_location` (`src/http/ngx_http_core_module.c`) finds it.
 */
import type { ConfigNode, Directive } from '../../../parser/ast.js';
import type { SourceLoc } from '../../../source-loc.js';
import type { CompiledLocation, LocationTree, RouteTable, ServerSet, VirtualServer } from '../../route-table.js';

/** One block of the `http` context (`http`, `server`, `location`, `if`, `upstream`, `map` …) and its statements. */
export interface Block {
  /** The directive that opened the block. */
  readonly directive: Directive;
  readonly parent: Block | undefined;
  /** The block's statements, nested blocks included, in reading order. */
  readonly own: readonly Directive[];
  readonly children: Block[];
}

/** The `http` blocks of a configuration (nginx allows one; a rule sees what was read). */
export function httpBlocks(nodes: readonly ConfigNode[]): Block[] {
  const out: Block[] = [];
  for (const n of nodes) if (n.kind === 'directive' && n.name === 'http' && n.block) out.push(blockTree(n));
  return out;
}

/** The tree of blocks under `top`, built with an explicit stack. */
function blockTree(top: Directive): Block {
  const make = (d: Directive, parent: Block | undefined): Block => ({
    directive: d,
    parent,
    own: (d.block ?? []).filter((n): n is Directive => n.kind === 'directive'),
    children: [],
  });
  const root = make(top, undefined);
  const stack = [root];
  while (stack.length > 0) {
    const b = stack.pop()!;
    for (const d of b.own) {
      if (!d.block) continue;
      const child = make(d, b);
      b.children.push(child);
      stack.push(child);
    }
  }
  return root;
}

/** Every block under `root` (itself included) whose directive is named `name`, in reading order. */
export function blocksNamed(root: Block, name: string): Block[] {
  const out: Block[] = [];
  const stack = [root];
  while (stack.length > 0) {
    const b = stack.pop()!;
    if (b.directive.name === name) out.push(b);
    for (let i = b.children.length - 1; i >= 0; i--) stack.push(b.children[i]!);
  }
  return out;
}

/** Every directive inside `d`'s block, nested ones included, in reading order. */
export function directivesIn(d: Directive): Directive[] {
  const out: Directive[] = [];
  const stack: Directive[][] = [[...(d.block ?? []).filter((n): n is Directive => n.kind === 'directive')].reverse()];
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    const next = top.pop();
    if (!next) {
      stack.pop();
      continue;
    }
    out.push(next);
    if (next.block) stack.push(next.block.filter((n): n is Directive => n.kind === 'directive').reverse());
  }
  return out;
}

/** The block's own directives named `name`. */
export function own(block: Block, name: string): Directive[] {
  return block.own.filter((d) => d.name === name);
}

/**
 * The directives named `name` that a level inherits: those of the nearest
 * level, from `block` up to `http`, that has any (nginx's merge of an array
 * or of a value set at most once per level). `if` blocks are levels too.
 */
export function inherited(block: Block, name: string): Directive[] {
  for (let b: Block | undefined = block; b; b = b.parent) {
    const found = own(b, name);
    if (found.length > 0) return found;
  }
  return [];
}

/** The `server` block a block is in (itself for a server). */
export function serverOf(block: Block): Block | undefined {
  let b: Block | undefined = block;
  while (b && b.directive.name !== 'server') b = b.parent;
  return b;
}

/** A `location` block's modifier and name, as `ngx_http_core_location` reads its arguments. */
export interface LocationName {
  readonly modifier: '=' | '^~' | '~' | '~*' | '@' | '';
  readonly name: string;
}

/** The modifier and name of a `location` directive (`location = /x`, `location =/x`, `location @x` …). */
export function locationName(d: Directive): LocationName {
  if (d.args.length === 2) return { modifier: d.args[0] as LocationName['modifier'], name: d.args[1]! };
  const a = d.args[0] ?? '';
  if (a.startsWith('@')) return { modifier: '@', name: a };
  if (a.startsWith('=')) return { modifier: '=', name: a.slice(1) };
  if (a.startsWith('^~')) return { modifier: '^~', name: a.slice(2) };
  if (a.startsWith('~*')) return { modifier: '~*', name: a.slice(2) };
  if (a.startsWith('~')) return { modifier: '~', name: a.slice(1) };
  return { modifier: '', name: a };
}

/** `file:line` of a place, as findings name the other directive they mention. */
export function at(loc: SourceLoc): string {
  return `${loc.file}:${loc.line}`;
}

/** How a location is written in messages: `"~* \.php$"`, `"/static/"`. */
export function shown(d: Directive): string {
  const { modifier, name } = locationName(d);
  return modifier === '' || modifier === '@' ? `"${name}"` : `"${modifier} ${name}"`;
}

const keyOf = (loc: SourceLoc, name: string): string => `${loc.file}:${loc.line}:${name}`;

/**
 * The compiled servers and locations of a route table, found from the
 * blocks they were compiled from. Locations are matched within their
 * server, so a snippet of locations included in many servers (Nginx Proxy
 * Manager's `assets.conf`) maps each copy to its own server's location.
 */
export class Routes {
  private readonly servers = new Map<Block, VirtualServer>();
  private readonly locations = new Map<Block, CompiledLocation>();
  private readonly blocks = new Map<CompiledLocation, Block>();

  constructor(table: RouteTable | undefined, http: readonly Block[]) {
    if (!table) return;
    const sets: ServerSet[] = [];
    for (const g of table.listens) sets.push(g.servers, ...g.byLocalAddr.values());
    const byKey = new Map<string, VirtualServer>();
    for (const s of sets) {
      for (const v of [s.defaultServer, ...s.exact.values(), ...[...s.headWildcards, ...s.tailWildcards].map(([, w]) => w), ...s.regexes.map((r) => r.server)]) {
        byKey.set(keyOf(v.loc, 'server'), v);
      }
    }
    for (const h of http) {
      for (const server of blocksNamed(h, 'server')) {
        const v = byKey.get(keyOf(server.directive.loc, 'server'));
        if (!v) continue;
        this.servers.set(server, v);
        const compiled = compiledLocations(v.locations);
        for (const b of blocksNamed(server, 'location')) {
          const l = compiled.get(keyOf(b.directive.loc, locationName(b.directive).name));
          if (!l) continue;
          this.locations.set(b, l);
          this.blocks.set(l, b);
        }
      }
    }
  }

  /** The compiled location of a `location` block; undefined when the table has none (not compiled). */
  location(block: Block): CompiledLocation | undefined {
    return this.locations.get(block);
  }

  /** The block a compiled location was read from. */
  blockOf(location: CompiledLocation): Block | undefined {
    return this.blocks.get(location);
  }

  /**
   * The location `uri` selects in the server `server` (a `server` block), or
   * `@name`'s named location; undefined when none does or the configuration
   * did not compile. Auto-redirects (a 301 to `uri/`) are not followed.
   */
  select(server: Block, uri: string): CompiledLocation | undefined {
    const v = this.servers.get(server);
    if (!v) return undefined;
    if (uri.startsWith('@')) return v.locations.named.get(uri);
    return findIn(v.locations, uri).location;
  }
}

/** Every location of a server's tree, nested ones included, by file:line and name. */
function compiledLocations(tree: LocationTree): Map<string, CompiledLocation> {
  const out = new Map<string, CompiledLocation>();
  const trees = [tree];
  while (trees.length > 0) {
    const t = trees.pop()!;
    const prefixes = [t.prefixes];
    const locs: CompiledLocation[] = [...t.exact.values(), ...t.regexes, ...t.named.values()];
    while (prefixes.length > 0) {
      const p = prefixes.pop()!;
      if (p.location) locs.push(p.location);
      prefixes.push(...p.children.values());
    }
    for (const l of locs) {
      out.set(keyOf(l.loc, l.name), l);
      if (l.nested) trees.push(l.nested);
    }
  }
  return out;
}

/**
 * One level of `ngx_http_core_find_location`: an exact match ends the
 * search; the longest prefix's nested locations are searched, and a final
 * answer there ends it; then, unless that prefix is `^~`, the first regex
 * location that matches wins (its nested locations searched in turn);
 * else the longest prefix (or what its nested search found).
 */
function findIn(tree: LocationTree, uri: string): { location: CompiledLocation | undefined; final: boolean } {
  const exact = tree.exact.get(uri);
  if (exact) return { location: exact, final: true };
  let node = tree.prefixes;
  let prefix = node.location;
  for (const ch of uri) {
    const next = node.children.get(ch);
    if (!next) break;
    node = next;
    if (node.location) prefix = node.location;
  }
  let result = prefix;
  if (prefix?.nested) {
    const inner = findIn(prefix.nested, uri);
    if (inner.final) return inner;
    if (inner.location) result = inner.location;
  }
  if (prefix?.match !== 'prefix-no-regex') {
    for (const r of tree.regexes) {
      if (!r.regex!.test(uri)) continue;
      const inner = r.nested ? findIn(r.nested, uri) : undefined;
      return { location: inner?.location ?? r, final: true };
    }
  }
  return { location: result, final: false };
}
