/**
 * The geo module (`src/http/modules/ngx_http_geo_module.c`):
 * `geo [$address] $variable { … }` sets the variable by the client address,
 * or by the address a variable holds: the longest matching network of
 * IPv4/IPv6 CIDR entries (nginx's two radix trees), or, after `ranges`, the
 * IPv4 range holding it (nginx's table of 65,536 blocks of ranges). `proxy`
 * names trusted proxies whose `X-Forwarded-For` gives the address instead
 * (`proxy_recursive` walks the list from the right), `volatile` makes the
 * variable evaluated each time it is read. A client on a unix domain socket,
 * an address that is not one, and an IPv6 address in `ranges` mode are
 * looked up as 255.255.255.255 (`ngx_http_geo_cidr_variable`,
 * `ngx_http_geo_range_variable`). Binary range bases (`include FILE` finding
 * `FILE.bin`) are not read: the text file is.
 */
import type { Directive, SourceLoc } from '../../parser/ast.js';
import { cidrMatch, inetAddr, isV4Mapped, parseAddr, parseAddrPort, ptocidr, type InetAddr, type InetCidr } from '../inet.js';
import { RadixTree } from '../radix-tree.js';
import type { RequestView } from '../request-view.js';
import { scopeRegistry } from '../scope.js';
import { DirectiveFailure, fail, type DirectiveSpec, type SetContext } from '../spec.js';
import type { ScriptView, VariableGetter, VariableRegistry } from '../variables.js';

const GEO = 'ngx_http_geo_module';

/** One range of a 65,536-address block (`ngx_http_geo_range_t`): low 16 bits, inclusive. */
interface GeoRange {
  start: number;
  end: number;
  value: string;
}

/** A `geo` block as read (of http, `V` = `RequestView`, or of stream, `StreamView`). */
export interface GeoDef<V extends ScriptView = RequestView> {
  /** The variable holding the address (`geo $arg_ip $v`), or undefined for the client's. */
  readonly addressVariable: string | undefined;
  /** `volatile`: not cached (nginx's `NGX_HTTP_VAR_NOCACHEABLE`). */
  volatile: boolean;
  /** `ranges`: the entries are `START-END` ranges of IPv4 addresses. */
  ranges: boolean;
  /** `proxy` networks (`ngx_http_geo_add_proxy`), and `proxy_recursive` (http only). */
  readonly proxies: InetCidr[];
  proxyRecursive: boolean;
  /** CIDR mode: created by the first CIDR entry (`ranges` must come before it). */
  tree4: RadixTree<string> | undefined;
  tree6: RadixTree<string> | undefined;
  /** Ranges mode: the ranges of each block by its high 16 bits, in order, and the default. */
  readonly blocks: Map<number, GeoRange[]>;
  rangeDefault: string | undefined;
  /** Set once bound at compile time; read by the variable's getter. */
  bound: ((r: V) => string) | undefined;
}

/** Every `geo` block of a configuration, bound once all variables are declared. */
export const geoBlocks = scopeRegistry((): GeoDef[] => []);

const ALL_ONES: InetCidr = { addr: Uint8Array.of(255, 255, 255, 255), mask: Uint8Array.of(255, 255, 255, 255) };

/**
 * `ngx_http_geo_cidr_value`: a network, `255.255.255.255` taken as itself
 * (`ngx_inet_addr` refuses it).
 * @throws DirectiveFailure `invalid network "X"`
 */
function cidrValue(net: string, loc: SourceLoc, cx: SetContext): InetCidr {
  if (net === '255.255.255.255') return ALL_ONES;
  const parsed = ptocidr(net);
  if (!parsed) fail(`invalid network "${net}"`, loc);
  if (parsed.lowBits) cx.warn(`low address bits of ${net} are meaningless`, 'low-address-bits', loc);
  return parsed.cidr;
}

/** The prefix length of a contiguous mask. */
function prefixBits(mask: InetAddr): number {
  let bits = 0;
  for (const b of mask) for (let v = b; v & 0x80; v = (v << 1) & 0xff) bits++;
  return bits;
}

/** `ngx_http_geo_cidr_add`: a duplicate network replaces the old value, with nginx's warning. */
function cidrAdd<V extends ScriptView>(geo: GeoDef<V>, cidr: InetCidr, value: string, net: string, loc: SourceLoc, cx: SetContext): void {
  const tree = cidr.addr.length === 4 ? geo.tree4! : geo.tree6!;
  const bits = prefixBits(cidr.mask);
  if (tree.insert(cidr.addr, bits, value) === 'ok') return;
  const old = tree.find(cidr.addr) ?? '';
  cx.warn(`duplicate network "${net}", value: "${value}", old value: "${old}"`, 'duplicate-network', loc);
  tree.delete(cidr.addr, bits);
  tree.insert(cidr.addr, bits, value);
}

/** `ngx_http_geo_cidr`: `default`, `delete NET` or `NET VALUE`. */
function cidrEntry<V extends ScriptView>(geo: GeoDef<V>, first: string, second: string, loc: SourceLoc, cx: SetContext): void {
  geo.tree4 ??= new RadixTree();
  geo.tree6 ??= new RadixTree();
  if (first === 'default') {
    cidrAdd(geo, { addr: new Uint8Array(4), mask: new Uint8Array(4) }, second, first, loc, cx);
    cidrAdd(geo, { addr: new Uint8Array(16), mask: new Uint8Array(16) }, second, first, loc, cx);
    return;
  }
  if (first === 'delete') {
    const cidr = cidrValue(second, loc, cx);
    const tree = cidr.addr.length === 4 ? geo.tree4 : geo.tree6;
    if (!tree.delete(cidr.addr, prefixBits(cidr.mask))) cx.warn(`no network "${second}" to delete`, 'no-network', loc);
    return;
  }
  cidrAdd(geo, cidrValue(first, loc, cx), second, first, loc, cx);
}

/** The 65,536-address blocks a range covers, as `[block, low start, low end]` (`ngx_http_geo_add_range`'s walk). */
function* blocksOf(start: number, end: number): Generator<readonly [number, number, number]> {
  for (let n = start; n <= end; n = (n + 0x10000) & 0xffff0000) {
    const h = n >>> 16;
    const s = n === start ? n & 0xffff : 0;
    const e = (n | 0xffff) >>> 0 > end ? end & 0xffff : 0xffff;
    yield [h, s, e];
    if (h === 0xffff) break;
  }
}

const dotted = (h: number, low: number): string => `${h >> 8}.${h & 0xff}.${low >> 8}.${low & 0xff}`;

/**
 * `ngx_http_geo_add_range`: each block's ranges are kept in order; a new
 * range may equal an old one (replaced, with a warning), lie inside one
 * (which is split around it), share one end with it, or lie between two;
 * any other overlap is an error.
 * @throws DirectiveFailure `range "NET" overlaps "A-B"`
 */
function addRange<V extends ScriptView>(geo: GeoDef<V>, start: number, end: number, value: string, net: string, loc: SourceLoc, cx: SetContext): void {
  for (const [h, s, e] of blocksOf(start, end)) {
    let a = geo.blocks.get(h);
    if (!a) geo.blocks.set(h, (a = []));
    placeRange(a, h, s, e, value, net, loc, cx);
  }
}

function placeRange(a: GeoRange[], h: number, s: number, e: number, value: string, net: string, loc: SourceLoc, cx: SetContext): void {
  for (let i = a.length - 1; i >= 0; i--) {
    const r = a[i]!;
    if (e < r.start) continue;
    if (s > r.end) {
      a.splice(i + 1, 0, { start: s, end: e, value });
      return;
    }
    if (s === r.start && e === r.end) {
      cx.warn(`duplicate range "${net}", value: "${value}", old value: "${r.value}"`, 'duplicate-range', loc);
      r.value = value;
      return;
    }
    if (s > r.start && e < r.end) {
      a.splice(i + 1, 0, { start: s, end: e, value }, { start: e + 1, end: r.end, value: r.value });
      r.end = s - 1;
      return;
    }
    if (s === r.start && e < r.end) {
      a.splice(i, 0, { start: s, end: e, value });
      r.start = e + 1;
      return;
    }
    if (s > r.start && e === r.end) {
      a.splice(i + 1, 0, { start: s, end: e, value });
      r.end = s - 1;
      return;
    }
    fail(`range "${net}" overlaps "${dotted(h, r.start)}-${dotted(h, r.end)}"`, loc);
  }
  a.unshift({ start: s, end: e, value });
}

/** `ngx_http_geo_delete_range`: true when some block had no range exactly as given. */
function deleteRange<V extends ScriptView>(geo: GeoDef<V>, start: number, end: number): boolean {
  let missing = false;
  for (const [h, s, e] of blocksOf(start, end)) {
    const a = geo.blocks.get(h);
    const i = a ? a.findIndex((r) => r.start === s && r.end === e) : -1;
    if (i === -1) missing = true;
    else a!.splice(i, 1);
  }
  return missing;
}

/**
 * `ngx_http_geo_range`: `default VALUE`, `delete START-END` or
 * `START-END VALUE`, both ends in `ngx_inet_addr`'s form.
 * @throws DirectiveFailure `invalid range "X"`
 */
function rangeEntry<V extends ScriptView>(geo: GeoDef<V>, first: string, second: string, loc: SourceLoc, cx: SetContext): void {
  if (first === 'default') {
    if (geo.rangeDefault !== undefined) {
      cx.warn(`duplicate default geo range value: "${second}", old value: "${geo.rangeDefault}"`, 'duplicate-default', loc);
    }
    geo.rangeDefault = second;
    return;
  }
  const del = first === 'delete';
  const net = del ? second : first;
  const dash = net.indexOf('-');
  const start = dash === -1 ? undefined : inetAddr(net.slice(0, dash));
  const end = dash === -1 ? undefined : inetAddr(net.slice(dash + 1));
  if (start === undefined || end === undefined || start > end) fail(`invalid range "${net}"`, loc);
  if (del) {
    if (deleteRange(geo, start, end)) cx.warn(`no address range "${net}" to delete`, 'no-range', loc);
    return;
  }
  addRange(geo, start, end, second, net, loc, cx);
}

/**
 * `ngx_http_geo` (`ngx_stream_geo`): one entry of the block; `proxy` and
 * `proxy_recursive` are http's only (`withProxies`).
 * @throws DirectiveFailure nginx's messages for a bad entry
 */
function readEntry<V extends ScriptView>(geo: GeoDef<V>, e: Directive, cx: SetContext, withProxies: boolean): void {
  if (e.block !== null) fail('unexpected "{"', e.loc);
  const words = [e.name, ...e.args];
  if (words.length === 1) {
    if (e.name === 'ranges') {
      if (geo.tree4 || geo.tree6) fail('the "ranges" directive must be the first directive inside "geo" block', e.loc);
      geo.ranges = true;
      return;
    }
    if (e.name === 'proxy_recursive' && withProxies) {
      geo.proxyRecursive = true;
      return;
    }
    if (e.name === 'volatile') {
      geo.volatile = true;
      return;
    }
  }
  if (words.length !== 2) fail('invalid number of the geo parameters', e.loc);
  const [first, second] = words as [string, string];
  if (first === 'proxy' && withProxies) {
    geo.proxies.push(cidrValue(second, e.loc, cx));
    return;
  }
  if (geo.ranges) rangeEntry(geo, first, second, e.loc, cx);
  else cidrEntry(geo, first, second, e.loc, cx);
}

/**
 * `ngx_http_geo_block` (`ngx_stream_geo_block`): `geo [$address] $variable
 * { … }` read into a `GeoDef`, its variable declared in `vars` before the
 * entries are read (`volatile` among them). A stream block (`withProxies`
 * false) has no `proxy` entries.
 * @throws DirectiveFailure nginx's messages for a bad name or entry
 */
export function readGeoBlock<V extends ScriptView>(d: Directive, cx: SetContext, vars: VariableRegistry<V>, withProxies: boolean): GeoDef<V> {
  const first = d.args[0]!;
  if (!first.startsWith('$')) fail(`invalid variable name "${first}"`);
  let addressVariable: string | undefined;
  let name = first;
  if (d.args.length === 2) {
    addressVariable = first.slice(1);
    if (addressVariable.length === 0) fail('invalid variable name "$"');
    vars.reference(addressVariable, d.loc);
    name = d.args[1]!;
    if (!name.startsWith('$')) fail(`invalid variable name "${name}"`);
  }
  const geo: GeoDef<V> = {
    addressVariable, volatile: false, ranges: false, proxies: [], proxyRecursive: false,
    tree4: undefined, tree6: undefined, blocks: new Map(), rangeDefault: undefined, bound: undefined,
  };
  vars.declare(name.slice(1), {
    kind: 'lazy', compute: (r) => geo.bound!(r), get volatile() {
      return geo.volatile;
    },
  });
  for (const e of d.block ?? []) {
    if (e.kind === 'error') throw e.error;
    try {
      readEntry(geo, e, cx, withProxies);
    } catch (err) {
      if (err instanceof DirectiveFailure && !err.loc) throw new DirectiveFailure(err.text, err.kind, e.loc);
      throw err;
    }
  }
  if (!geo.ranges) {
    // an unset default is the empty value (NGX_BUSY is fine: `default` set it)
    geo.tree4 ??= new RadixTree();
    geo.tree6 ??= new RadixTree();
    geo.tree4.insert(new Uint8Array(4), 0, '');
    geo.tree6.insert(new Uint8Array(16), 0, '');
  }
  return geo;
}

export const geoDirectives: readonly DirectiveSpec[] = [
  {
    name: 'geo', module: GEO, contexts: ['http'], args: ['TAKE1', 'TAKE2'], block: 'raw', effect: 'runtime',
    set: (d, cx) => void cx.scope.registry(geoBlocks).push(readGeoBlock(d, cx, cx.scope.variables, true)),
  },
];

/** What `ngx_http_geo_addr` finds: an address, `unix` for a unix domain socket's client, undefined when none. */
type GeoAddr = InetAddr | 'unix' | undefined;

/**
 * `ngx_http_get_forwarded_addr_internal`: from the right of `X-Forwarded-For`,
 * while the address so far is a trusted proxy, the next entry (an address,
 * with or without port) replaces it; once without `recursive`.
 */
function forwardedAddr(addr: InetAddr | 'unix', xff: string, proxies: readonly InetCidr[], recursive: boolean): InetAddr | 'unix' {
  let len = xff.length;
  let p: number;
  do {
    if (!cidrMatch(addr, proxies)) return addr;
    for (p = len - 1; p > 0; p--, len--) if (xff[p] !== ' ' && xff[p] !== ',') break;
    for (; p > 0; p--) {
      if (xff[p] === ' ' || xff[p] === ',') {
        p++;
        break;
      }
    }
    const parsed = parseAddrPort(xff.slice(Math.max(p, 0), len));
    if (!parsed) return addr;
    addr = parsed;
    len = p - 1;
  } while (recursive && p > 0);
  return addr;
}

/** The IPv4 address to look up in the IPv4 tree or the ranges, or undefined for IPv6 proper. */
function ipv4Of(a: GeoAddr): number | undefined {
  if (a === undefined || a === 'unix') return 0xffffffff;
  const b = a.length === 4 ? a : isV4Mapped(a) ? a.subarray(12) : undefined;
  return b && ((b[0]! << 24) | (b[1]! << 16) | (b[2]! << 8) | b[3]!) >>> 0;
}

const v4Key = (n: number): InetAddr => Uint8Array.of(n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);

/**
 * Binds a geo block: the address (`ngx_http_geo_addr`: the client's, or the
 * variable's, then `X-Forwarded-For` from trusted proxies), then the lookup.
 */
export function bindGeo(geo: GeoDef, vars: VariableRegistry): void {
  bindGeoLookup(geo, vars, (r) => r.clientAddr, (r) => {
    const xff = r.headers['x-forwarded-for'];
    return Array.isArray(xff) ? xff.join(', ') : xff;
  });
}

/**
 * Binds a geo block of any module: `clientAddr` is the session's or
 * request's client address (`unix:` for a unix domain socket), `forwarded`
 * its `X-Forwarded-For` (read only with `proxy` entries).
 */
export function bindGeoLookup<V extends ScriptView>(
  geo: GeoDef<V>, vars: VariableRegistry<V>, clientAddr: (r: V) => string, forwarded: (r: V) => string | undefined,
): void {
  // an unknown variable is refused later, by the check of every reference
  const source: VariableGetter<V> | undefined = geo.addressVariable === undefined ? undefined : vars.getter(geo.addressVariable) ?? (() => undefined);
  const address = (r: V): GeoAddr => {
    let a: GeoAddr;
    if (!source) {
      const client = clientAddr(r);
      a = client === 'unix:' ? 'unix' : parseAddr(client);
    } else {
      const text = source(r);
      a = text === undefined ? undefined : parseAddr(text);
    }
    if (a === undefined || geo.proxies.length === 0) return a;
    const xff = forwarded(r);
    if (xff === undefined) return a;
    return forwardedAddr(a, xff, geo.proxies, geo.proxyRecursive);
  };
  if (geo.ranges) {
    const dflt = geo.rangeDefault ?? '';
    const blocks = new Map([...geo.blocks].filter(([, a]) => a.length > 0));
    geo.bound = (r) => {
      const n = ipv4Of(address(r)) ?? 0xffffffff;
      const low = n & 0xffff;
      const hit = blocks.get(n >>> 16)?.find((x) => low >= x.start && low <= x.end);
      return hit ? hit.value : dflt;
    };
    return;
  }
  const tree4 = geo.tree4!;
  const tree6 = geo.tree6!;
  geo.bound = (r) => {
    const a = address(r);
    const n = ipv4Of(a);
    return (n !== undefined ? tree4.find(v4Key(n)) : tree6.find(a as InetAddr)) ?? '';
  };
}
