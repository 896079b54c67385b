/**
 * The map module (`src/http/modules/ngx_http_map_module.c`):
 * `map SOURCE $variable { KEY VALUE; … }`, evaluated when the variable is
 * first read in a request and cached for the rest of it, or, `volatile`,
 * evaluated each time it is read.
 */
import type { Directive } from '../../parser/ast.js';
import type { RequestView } from '../request-view.js';
import { compileRegex, type NginxRegex } from '../regex.js';
import { scopeRegistry } from '../scope.js';
import { DirectiveFailure, fail, noEffect, rule, type DirectiveSpec } from '../spec.js';
import type { CompiledValue, ScriptView, ValueSource, VariableRegistry } from '../variables.js';
import { namedCaptures } from './rewrite.js';

const MAP = 'ngx_http_map_module';

/** A `map` block as read (of the http module, or `R` = `StreamView` of the stream module's). */
export interface MapDef<R extends ScriptView = RequestView> {
  readonly source: ValueSource;
  hostnames: boolean;
  /** `volatile`: not cached (nginx's `NGX_HTTP_VAR_NOCACHEABLE`). */
  volatile: boolean;
  readonly exact: Map<string, ValueSource>;
  /** `*.example.com` / `.example.com` (suffix with the dot) and `www.example.*` (prefix with the dot). */
  readonly headWildcards: [string, ValueSource][];
  readonly tailWildcards: [string, ValueSource][];
  readonly regexes: { readonly regex: NginxRegex; readonly value: ValueSource }[];
  defaultValue: ValueSource | undefined;
  /** Set once bound at compile time; read by the variable's getter. */
  bound: ((r: R) => string) | undefined;
}

/** Every `map` block of a configuration, bound once all variables are declared. */
export const mapBlocks = scopeRegistry((): MapDef[] => []);

function readEntries<R extends ScriptView>(d: Directive, vars: VariableRegistry<R>, map: MapDef<R>): void {
  let hostnames = false;
  for (const e of d.block ?? []) {
    if (e.kind === 'error') throw e.error;
    try {
      hostnames = readEntry(e, vars, map, hostnames);
    } catch (err) {
      if (err instanceof DirectiveFailure && !err.loc) throw new DirectiveFailure(err.text, err.kind, e.loc);
      throw err;
    }
  }
  map.hostnames = hostnames;
}

/** Reads one entry; returns whether `hostnames` is in effect from here on. */
function readEntry<R extends ScriptView>(e: Directive, vars: VariableRegistry<R>, map: MapDef<R>, hostnames: boolean): boolean {
  if (e.block !== null) fail('unexpected "{"', e.loc);
  const words = [e.name, ...e.args];
  if (words.length === 1 && e.name === 'hostnames') return true;
  if (words.length === 1 && e.name === 'volatile') {
    map.volatile = true;
    return hostnames;
  }
  if (words.length !== 2) fail('invalid number of the map parameters', e.loc);
  const [key, raw] = words as [string, string];
  const value = vars.value(raw, e.loc);
  if (key === 'default') {
    if (map.defaultValue) fail('duplicate default map parameter', e.loc);
    map.defaultValue = value;
    return hostnames;
  }
  if (key.startsWith('~')) {
    const caseless = key.startsWith('~*');
    const regex = compileRegex(key.slice(caseless ? 2 : 1), caseless);
    for (const n of regex.captureNames) vars.declare(n, { kind: 'set' });
    map.regexes.push({ regex, value });
    return hostnames;
  }
  const k = (key.startsWith('\\') ? key.slice(1) : key).toLowerCase();
  if (hostnames && (k.startsWith('*.') || k.startsWith('.'))) {
    map.headWildcards.push([k.startsWith('*') ? k.slice(1) : k, value]);
    // ".example.org" also matches "example.org" itself (ngx_hash_add_key with NGX_HASH_WILDCARD_KEY)
    if (k.startsWith('.') && !map.exact.has(k.slice(1))) map.exact.set(k.slice(1), value);
    return hostnames;
  }
  if (hostnames && k.endsWith('.*')) {
    map.tailWildcards.push([k.slice(0, -1), value]);
    return hostnames;
  }
  if (hostnames && k.includes('*')) fail(`invalid hostname or wildcard "${key}"`, e.loc);
  if (map.exact.has(k)) fail(`conflicting parameter "${key}"`, e.loc);
  map.exact.set(k, value);
  return hostnames;
}

/**
 * Reads a `map SOURCE $NAME { … }` block into `vars` (`ngx_http_map_block`,
 * `ngx_stream_map_block`): the variable is declared before the entries are
 * read (`volatile` among them); `bindMap` binds it once every variable is known.
 * @throws DirectiveFailure nginx's messages for the block's entries
 */
export function readMapBlock<R extends ScriptView>(d: Directive, vars: VariableRegistry<R>): MapDef<R> {
  const name = d.args[1]!;
  if (!name.startsWith('$')) fail(`invalid variable name "${name}"`);
  const map: MapDef<R> = {
    source: vars.value(d.args[0]!, d.loc), hostnames: false, volatile: false, exact: new Map(), headWildcards: [],
    tailWildcards: [], regexes: [], defaultValue: undefined, bound: undefined,
  };
  vars.declare(name.slice(1), {
    kind: 'lazy', compute: (r) => map.bound!(r), get volatile() {
      return map.volatile;
    },
  });
  readEntries(d, vars, map);
  return map;
}

export const mapDirectives: readonly DirectiveSpec[] = [
  {
    name: 'map', module: MAP, contexts: ['http'], args: ['TAKE2'], block: 'raw', effect: 'runtime',
    set: (d, cx) => void cx.scope.registry(mapBlocks).push(readMapBlock(d, cx.scope.variables)),
  },
  noEffect({ name: 'map_hash_max_size', module: MAP, contexts: ['http'], args: ['TAKE1'], note: 'maps are kept in a Map' }, rule.num()),
  noEffect({ name: 'map_hash_bucket_size', module: MAP, contexts: ['http'], args: ['TAKE1'], note: 'maps are kept in a Map' }, rule.num()),
];

/** Binds a map: exact keys (lowercased), then wildcards (with `hostnames`), then regexes in order, then the default. */
export function bindMap<R extends ScriptView>(map: MapDef<R>, vars: VariableRegistry<R>): void {
  const source = vars.bind(map.source);
  const bindV = (v: ValueSource): CompiledValue<R> => vars.bind(v);
  const exact = new Map([...map.exact].map(([k, v]) => [k, bindV(v)]));
  const heads = map.headWildcards.sort((a, b) => b[0].length - a[0].length).map(([k, v]) => [k, bindV(v)] as const);
  const tails = map.tailWildcards.sort((a, b) => b[0].length - a[0].length).map(([k, v]) => [k, bindV(v)] as const);
  const regexes = map.regexes.map((e) => ({ regex: e.regex.regex, value: bindV(e.value), named: namedCaptures(e.regex, vars) }));
  const dflt = map.defaultValue ? bindV(map.defaultValue) : undefined;
  map.bound = (r) => {
    let key = source.evaluate(r);
    if (map.hostnames && key.endsWith('.')) key = key.slice(0, -1);
    const low = key.toLowerCase();
    const hit = exact.get(low);
    if (hit) return hit.evaluate(r);
    if (map.hostnames && low.length > 0) {
      for (const [suffix, v] of heads) if (low.endsWith(suffix) && low.length > suffix.length) return v.evaluate(r);
      for (const [prefix, v] of tails) if (low.startsWith(prefix) && low.length > prefix.length) return v.evaluate(r);
    }
    if (key.length > 0) {
      for (const e of regexes) {
        const m = e.regex.exec(key);
        if (m) {
          const saved = r.captures;
          r.captures = m;
          for (const c of e.named) r.vars[c.index] = m.groups?.[c.name] ?? '';
          const out = e.value.evaluate(r);
          r.captures = saved;
          return out;
        }
      }
    }
    return dflt ? dflt.evaluate(r) : '';
  };
}
