/**
 * The response cache directives of the proxy, FastCGI, uwsgi and SCGI
 * modules (`src/http/ngx_http_file_cache.c`, the `*_cache*` directives of
 * `ngx_http_proxy_module.c`, `ngx_http_fastcgi_module.c` and their kin,
 * which share `ngx_http_upstream_conf_t`'s cache settings): checked as nginx
 * checks them, and compiled into one `CacheConf` per location that the
 * runtime cache (`src/runtime/cache/`) acts on. Every module declares the
 * same family, by prefix, from here.
 */
import type { Directive, SourceLoc } from '../../parser/ast.js';
import { HTTP_SRV_LOC } from '../flags.js';
import { scopeRegistry } from '../scope.js';
import {
  bitmaskSetter, DirectiveFailure, fail, flagSetter, listSlot, msecSetter, numSetter, offSetter, parseNumber, parseOffset, parseSize, parseTime, slot,
  type DirectiveSpec, type ListSlot, type SetContext, type Slot,
} from '../spec.js';
import type { CompiledValue, ValueSource, VariableRegistry } from '../variables.js';
import type { CgiPrefix } from './cgi-upstream.js';

/** One `*_cache_path` zone as declared. */
export interface CachePathDef {
  /** The `keys_zone` name. */
  readonly name: string;
  /** The directory, resolved against the prefix, without a trailing `/`. */
  readonly dir: string;
  /** `levels=1:2`: the lengths of the subdirectory names, taken from the end of the key's MD5. */
  readonly levels: readonly number[];
  readonly keysZoneBytes: number;
  /** `inactive`: an entry not used for this long is removed (10 minutes by default). */
  readonly inactiveMs: number;
  /** `max_size`: the most the entries' files may take; undefined: no limit. */
  readonly maxSizeBytes: number | undefined;
  /** `use_temp_path` (on by default). */
  readonly useTempPath: boolean;
  readonly loc: SourceLoc;
}

/** The `proxy_cache_path`/`fastcgi_cache_path` zones of a configuration by `keys_zone` name. */
export const cacheZones = scopeRegistry(() => new Map<string, CachePathDef>());

/** A zone bound for the runtime: the declaration and the module's temp directory for `use_temp_path=on`. */
export type CacheZoneConf = Omit<CachePathDef, 'loc'>;

/** One `*_cache_valid` entry: the status it applies to (0 for `any`) and its time in seconds. */
export interface CacheValid {
  readonly status: number;
  readonly sec: number;
}

/** The compiled cache settings of a location (`ngx_http_upstream_conf_t`'s `cache*` fields). */
export interface CacheConf {
  /** The zone, or a value with variables that names one (an unknown or empty name: no caching). */
  readonly zone: CacheZoneConf | { readonly kind: 'variable'; readonly value: CompiledValue; readonly zones: ReadonlyMap<string, CacheZoneConf> };
  /** `*_cache_key`; undefined: the handler's own default (the proxy module's upstream URL). */
  readonly key: CompiledValue | undefined;
  readonly valid: readonly CacheValid[];
  /** `*_cache_bypass`: any non-empty value other than "0" takes the response from the upstream. */
  readonly bypass: readonly CompiledValue[];
  /** `*_no_cache`: any non-empty value other than "0" keeps the response out of the cache. */
  readonly noCache: readonly CompiledValue[];
  /** Upper-case methods whose responses are cached (GET and HEAD always). */
  readonly methods: ReadonlySet<string>;
  readonly minUses: number;
  /** `*_cache_use_stale` conditions (`error`, `timeout`, `updating`, `http_500` …); empty with `off`. */
  readonly useStale: ReadonlySet<string>;
  readonly lock: boolean;
  readonly lockTimeoutMs: number;
  readonly lockAgeMs: number;
  readonly revalidate: boolean;
  readonly backgroundUpdate: boolean;
  /** `proxy_cache_convert_head`: a HEAD is sent upstream as GET (the proxy module only). */
  readonly convertHead: boolean;
  /** `*_ignore_headers`, as nginx spells them. */
  readonly ignoreHeaders: ReadonlySet<string>;
}

/** One page, nginx's `ngx_pagesize` on x86_64 Linux. */
const PAGE = 4096;

/**
 * `ngx_http_file_cache_set_slot`: `PATH [levels=1[:2[:2]]] keys_zone=NAME:SIZE
 * [use_temp_path=on|off] [inactive=TIME] [max_size=SIZE] [min_free=SIZE]
 * [loader_*=…] [manager_*=…]`. The zone is declared for the module
 * (`tag`); the directory is created at start as nginx does (`ngx_add_path`).
 * @throws DirectiveFailure nginx's messages for a bad parameter or a duplicate zone
 */
export function parseCachePath(d: Directive, cx: SetContext, tag: string): CachePathDef {
  let zone: { name: string; size: number } | undefined;
  let levels: number[] = [];
  let useTempPath = true;
  let inactiveMs = 600_000;
  let maxSizeBytes: number | undefined;
  for (const p of d.args.slice(1)) {
    const after = (prefix: string): string | undefined => (p.startsWith(prefix) ? p.slice(prefix.length) : undefined);
    let v: string | undefined;
    if ((v = after('levels=')) !== undefined) {
      if (!/^([12](:[12]){0,2})?$/.test(v)) fail(`invalid "levels" "${p}"`);
      levels = v === '' ? [] : v.split(':').map(Number);
    } else if ((v = after('use_temp_path=')) !== undefined) {
      if (v !== 'on' && v !== 'off') fail(`invalid use_temp_path value "${p}", it must be "on" or "off"`);
      useTempPath = v === 'on';
    } else if ((v = after('keys_zone=')) !== undefined) {
      const colon = v.indexOf(':');
      const size = colon === -1 ? undefined : parseSize(v.slice(colon + 1));
      if (size === undefined) fail(`invalid keys zone size "${p}"`);
      if (size < 2 * PAGE) fail(`keys zone "${p}" is too small`);
      zone = { name: v.slice(0, colon), size };
    } else if ((v = after('inactive=')) !== undefined) {
      const sec = parseTime(v, true);
      if (sec === undefined) fail(`invalid inactive value "${p}"`);
      inactiveMs = sec * 1000;
    } else if ((v = after('max_size=') ?? after('min_free=')) !== undefined) {
      const bytes = parseOffset(v);
      if (bytes === undefined) fail(`invalid ${p.slice(0, p.indexOf('='))} value "${p}"`);
      if (p.startsWith('max_size=')) maxSizeBytes = bytes;
    } else if ((v = after('loader_files=') ?? after('manager_files=')) !== undefined) {
      if (parseNumber(v) === undefined) fail(`invalid ${p.slice(0, p.indexOf('='))} value "${p}"`);
    } else if ((v = after('loader_sleep=') ?? after('loader_threshold=') ?? after('manager_sleep=') ?? after('manager_threshold=')) !== undefined) {
      if (parseTime(v, false) === undefined) fail(`invalid ${p.slice(0, p.indexOf('='))} value "${p}"`);
    } else fail(`invalid parameter "${p}"`);
  }
  if (!zone || zone.name.length === 0) fail(`"${d.name}" must have "keys_zone" parameter`);
  const shared = cx.scope.sharedZone(zone.name, zone.size, tag);
  if (shared.defined) fail(`duplicate zone "${zone.name}"`);
  shared.defined = true;
  let dir = d.args[0]!;
  if (dir.endsWith('/')) dir = dir.slice(0, -1);
  const def: CachePathDef = {
    name: zone.name, dir: cx.scope.fullPath(dir), levels, keysZoneBytes: zone.size, inactiveMs, maxSizeBytes, useTempPath, loc: d.loc,
  };
  cx.scope.registry(cacheZones).set(zone.name, def);
  return def;
}

/**
 * `ngx_http_proxy_cache` / `ngx_http_fastcgi_cache`: `off`, a zone name
 * (referenced now, defined by a `*_cache_path` anywhere in http), or a value
 * with variables. Returns the zone name, the value, or `false` for `off`.
 */
export function parseCacheRef(d: Directive, cx: SetContext, tag: string): string | ValueSource | false {
  const v = d.args[0]!;
  if (v === 'off') return false;
  if (v.includes('$')) return cx.scope.variables.value(v, d.loc);
  cx.scope.sharedZone(v, 0, tag);
  return v;
}

/** The statuses `*_cache_valid TIME` applies to when none is given. */
const DEFAULT_VALID = [200, 301, 302];

/** `ngx_http_file_cache_valid_set_slot`: `[CODE …|any] TIME`, appended in order. */
export function parseCacheValid(d: Directive): CacheValid[] {
  const time = d.args[d.args.length - 1]!;
  const sec = parseTime(time, true);
  if (sec === undefined) fail(`invalid time value "${time}"`);
  const codes = d.args.slice(0, -1);
  if (codes.length === 0) return DEFAULT_VALID.map((status) => ({ status, sec }));
  return codes.map((code) => {
    if (code === 'any') return { status: 0, sec };
    if (!/^\d+$/.test(code) || Number(code) < 100 || Number(code) > 599) fail(`invalid status "${code}"`);
    return { status: Number(code), sec };
  });
}

/** `ngx_http_upstream_cache_method_mask`. */
export const CACHE_METHODS = ['GET', 'HEAD', 'POST'];

/** The cache settings of one module (`proxy_cache*`, `fastcgi_cache*`, `uwsgi_cache*`, `scgi_cache*`), each in a slot of its own. */
export interface CacheSlots {
  readonly prefix: 'proxy' | CgiPrefix;
  readonly zone: Slot<string | ValueSource | false | undefined>;
  readonly paths: ListSlot<CachePathDef>;
  readonly key: Slot<ValueSource | undefined>;
  readonly valid: ListSlot<CacheValid>;
  readonly bypass: ListSlot<ValueSource>;
  readonly noCache: ListSlot<ValueSource>;
  readonly methods: Slot<readonly string[]>;
  readonly minUses: Slot<number>;
  readonly useStale: Slot<readonly string[]>;
  readonly lock: Slot<boolean>;
  readonly lockTimeoutMs: Slot<number>;
  readonly lockAgeMs: Slot<number>;
  readonly revalidate: Slot<boolean>;
  readonly backgroundUpdate: Slot<boolean>;
  readonly convertHead: Slot<boolean>;
  readonly maxRangeOffset: Slot<number | undefined>;
}

/** The slots of the `PREFIX_cache*` family. */
export function cacheSlots(prefix: 'proxy' | CgiPrefix): CacheSlots {
  const s = <T>(name: string, v: T): Slot<T> => slot<T>(`${prefix}_${name}`, v);
  return {
    prefix,
    zone: s<string | ValueSource | false | undefined>('cache', undefined),
    paths: listSlot<CachePathDef>(`${prefix}_cache_path`),
    key: s<ValueSource | undefined>('cache_key', undefined),
    valid: listSlot<CacheValid>(`${prefix}_cache_valid`),
    bypass: listSlot<ValueSource>(`${prefix}_cache_bypass`),
    noCache: listSlot<ValueSource>(`${prefix}_no_cache`),
    methods: s<readonly string[]>('cache_methods', ['GET', 'HEAD']),
    minUses: s('cache_min_uses', 1),
    useStale: s<readonly string[]>('cache_use_stale', ['off']),
    lock: s('cache_lock', false),
    lockTimeoutMs: s('cache_lock_timeout', 5000),
    lockAgeMs: s('cache_lock_age', 5000),
    revalidate: s('cache_revalidate', false),
    backgroundUpdate: s('cache_background_update', false),
    convertHead: s('cache_convert_head', true),
    maxRangeOffset: s<number | undefined>('cache_max_range_offset', undefined),
  };
}

/** The proxy module's cache slots (the FastCGI, uwsgi and SCGI modules' are in their `CgiSlots`). */
export const proxyCache = cacheSlots('proxy');

/**
 * A list directive whose entries a level replaces as a whole
 * (`ngx_conf_merge_ptr_value`): every directive at a level appends.
 */
function appendAll<T>(s: ListSlot<T>, parse: (d: Directive, cx: SetContext) => T[]): DirectiveSpec['set'] {
  return (d, cx) => {
    for (const v of parse(d, cx)) cx.level.append(s, v, d.loc);
  };
}

/**
 * The cache directives of a module, as data: `*_cache`, `*_cache_path`,
 * `*_cache_key`, `*_cache_valid`, `*_cache_bypass`, `*_no_cache`,
 * `*_cache_methods`, `*_cache_min_uses`, `*_cache_use_stale`,
 * `*_cache_lock` (+ `_timeout`, `_age`), `*_cache_revalidate`,
 * `*_cache_background_update`, `*_cache_max_range_offset`, and for the
 * proxy module `proxy_cache_convert_head`. `nextUpstream` are the module's
 * `*_next_upstream` values (`*_cache_use_stale` takes the same).
 */
export function cacheDirectives(s: CacheSlots, module: string, nextUpstream: readonly string[]): DirectiveSpec[] {
  const p = s.prefix;
  const spec = (name: string, args: DirectiveSpec['args'], set: DirectiveSpec['set'], contexts = HTTP_SRV_LOC): DirectiveSpec => ({
    name: `${p}_${name}`, module, contexts, args, effect: 'runtime', set,
  });
  const once = <T>(sl: Slot<T>, parse: (d: Directive, cx: SetContext) => T): DirectiveSpec['set'] => (d, cx) => {
    if (cx.level.own(sl)) throw new DirectiveFailure('is duplicate');
    cx.level.set(sl, parse(d, cx), d.loc);
  };
  const predicates = (d: Directive, cx: SetContext): ValueSource[] => d.args.map((a) => cx.scope.variables.value(a, d.loc));
  const list = [
    spec('cache', ['TAKE1'], once(s.zone, (d, cx) => parseCacheRef(d, cx, module))),
    spec('cache_path', ['2MORE'], (d, cx) => cx.level.append(s.paths, parseCachePath(d, cx, module), d.loc), ['http']),
    spec('cache_key', ['TAKE1'], once(s.key, (d, cx) => cx.scope.variables.value(d.args[0]!, d.loc))),
    spec('cache_valid', ['1MORE'], appendAll(s.valid, parseCacheValid)),
    spec('cache_bypass', ['1MORE'], appendAll(s.bypass, predicates)),
    spec('no_cache', ['1MORE'], appendAll(s.noCache, predicates)),
    spec('cache_methods', ['1MORE'], bitmaskSetter(s.methods as Slot<readonly string[]>, CACHE_METHODS)),
    spec('cache_min_uses', ['TAKE1'], numSetter(s.minUses)),
    spec('cache_use_stale', ['1MORE'], bitmaskSetter(s.useStale, nextUpstream)),
    spec('cache_lock', ['FLAG'], flagSetter(s.lock)),
    spec('cache_lock_timeout', ['TAKE1'], msecSetter(s.lockTimeoutMs)),
    spec('cache_lock_age', ['TAKE1'], msecSetter(s.lockAgeMs)),
    spec('cache_revalidate', ['FLAG'], flagSetter(s.revalidate)),
    spec('cache_background_update', ['FLAG'], flagSetter(s.backgroundUpdate)),
    spec('cache_max_range_offset', ['TAKE1'], offSetter(s.maxRangeOffset as Slot<number>)),
  ];
  if (p === 'proxy') list.push(spec('cache_convert_head', ['FLAG'], flagSetter(s.convertHead)));
  return list;
}

/** Whether a `*_cache_bypass`/`*_no_cache`/`early_hints` list says yes (`ngx_http_test_predicates`): a value that is neither empty nor "0". */
export function predicatesHold(values: readonly CompiledValue[], evaluate: (v: CompiledValue) => string): boolean {
  return values.some((v) => {
    const text = evaluate(v);
    return text !== '' && text !== '0';
  });
}

/** The settings `ConfChain.get`/`list` give, for `bindCache`. */
export interface CacheChain {
  get<T>(s: Slot<T>): T;
  list<T>(s: ListSlot<T>): T[];
}

/**
 * Binds a location's cache settings (`ngx_http_proxy_merge_loc_conf`'s
 * cache part); undefined when the location does not cache (`*_cache off`
 * or none). `defaultKey`: the module's default key, undefined when the
 * handler makes it at run time (the proxy module: the upstream request's
 * URL, `ngx_http_proxy_create_key`); FastCGI has none and caches under an
 * empty key, after nginx's warning. `ignoreHeaders`: the merged
 * `*_ignore_headers`.
 */
export function bindCache(
  c: CacheChain, s: CacheSlots, vars: VariableRegistry, zones: ReadonlyMap<string, CachePathDef>, defaultKey: ValueSource | undefined,
  ignoreHeaders: readonly string[],
): CacheConf | undefined {
  const zoneRef = c.get(s.zone);
  if (zoneRef === undefined || zoneRef === false) return undefined;
  const bound = new Map<string, CacheZoneConf>();
  for (const [name, def] of zones) {
    const { loc: _loc, ...zone } = def;
    bound.set(name, zone);
  }
  const useStale = c.get(s.useStale);
  const key = c.get(s.key) ?? defaultKey;
  return {
    zone: typeof zoneRef === 'string' ? bound.get(zoneRef)! : { kind: 'variable', value: vars.bind(zoneRef), zones: bound },
    key: key === undefined ? undefined : vars.bind(key),
    valid: c.list(s.valid),
    bypass: c.list(s.bypass).map((v) => vars.bind(v)),
    noCache: c.list(s.noCache).map((v) => vars.bind(v)),
    methods: new Set([...c.get(s.methods), 'GET', 'HEAD']),
    minUses: Math.max(1, c.get(s.minUses)),
    useStale: new Set(useStale.includes('off') ? [] : useStale),
    lock: c.get(s.lock),
    lockTimeoutMs: c.get(s.lockTimeoutMs),
    lockAgeMs: c.get(s.lockAgeMs),
    revalidate: c.get(s.revalidate),
    backgroundUpdate: c.get(s.backgroundUpdate),
    convertHead: c.get(s.convertHead),
    ignoreHeaders: new Set(ignoreHeaders),
  };
}
