/**
 * The core http module's part of the compile step, next to
 * `modules/http-core.ts` (its directives): its merge of a level
 * (`ngx_http_core_merge_loc_conf`), the checks of its merge (types hash,
 * duplicate locations), the location trees (`ngx_http_init_locations`) and
 * the listening sockets with their server names (`ngx_http_optimize_servers`).
 */
import type { SourceLoc } from '../parser/ast.js';
import { ConfigError } from '../errors.js';
import type { LevelNode } from './check.js';
import { levelsInOrder, type CompileContext } from './compile-context.js';
import { checkHashSizes, nameHashKeys, serverNamesHashWarnings } from './hash.js';
import { levelErrorLogs } from './modules/core.js';
import * as http from './modules/http-core.js';
import { http2Enabled } from './modules/http2.js';
import { namedCaptures } from './modules/rewrite.js';
import type { CompiledLocation, ListenGroup, LocationConf, LocationTree, PrefixNode, ServerSet, VirtualServer } from './route-table.js';
import { LevelMerge, parseSize, type ConfChain } from './spec.js';
import type { ValueSource } from './variables.js';
import { ServerNameTable } from './server-name-table.js';

/** nginx's default `listen` when a server has none: port 80 for root, 8000 otherwise. */
const DEFAULT_PORT = process.getuid?.() === 0 ? 80 : 8000;

/** The default `root` (`html` under the prefix) and `index` (`index.html`), bound once per compile (`CompileContext.memo`). */
const DEFAULT_ROOT = Symbol('default root');
const DEFAULT_INDEX = Symbol('default index');

/**
 * The parts of a level's core settings that are built rather than read
 * (bound values, maps, lists) and what the level keeps for the start (its
 * `error_log`s, its client body temp path): a function of the settings it
 * reads, made once for a level and the levels below it that set none of
 * them (`LevelMerge`).
 */
const coreBuilt = new LevelMerge((c: ConfChain, cx: CompileContext) => {
  const vars = cx.scope.variables;
  const docRoot = c.get(http.docRoot);
  const rootPath = docRoot ? vars.bind(docRoot.path) : cx.memo(DEFAULT_ROOT, () => vars.bind(vars.value(cx.scope.fullPath('html'), { file: '', line: 0 })));
  const indexes = c.list(http.indexFiles);
  const tryFiles = c.get(http.tryFiles);
  const errorPages = new Map<number, http.ErrorPage>();
  for (const e of c.list(http.errorPages)) {
    if (!errorPages.has(e.code)) errorPages.set(e.code, { target: vars.bind(e.target), overwrite: e.overwrite });
  }
  const errorLogs = levelErrorLogs(cx, c);
  const bodyTemp = c.get(http.clientBodyTempPath) ?? { dir: cx.scope.fullPath('client_body_temp'), levels: [] };
  cx.tempDirs.add(bodyTemp.dir);
  const keepaliveDisable = c.get(http.keepaliveDisable);
  return {
    earlyHints: c.list(http.earlyHints).map((v) => vars.bind(v)),
    root: { alias: docRoot?.alias ?? false, path: rootPath, aliasRegex: docRoot?.aliasRegex ?? false, aliasLength: docRoot?.aliasLength ?? 0 },
    index: indexes.length > 0 ? indexes.map((i) => vars.bind(i)) : cx.memo(DEFAULT_INDEX, () => [vars.bind(vars.value('index.html', { file: '', line: 0 }))]),
    tryFiles: tryFiles && {
      files: tryFiles.files.map((f) => ({ value: vars.bind(f.value), testDir: f.testDir })),
      fallback: 'code' in tryFiles.fallback ? { code: tryFiles.fallback.code } : { uri: vars.bind(tryFiles.fallback.uri) },
    },
    errorPages,
    errorLogs,
    bodyTemp,
    keepaliveDisable: { msie6: keepaliveDisable.includes('msie6'), safari: keepaliveDisable.includes('safari') },
    limitRate: sizeValue(cx, c.get(http.limitRate)),
    limitRateAfter: sizeValue(cx, c.get(http.limitRateAfter)),
    lingering: { close: c.get(http.lingeringClose), timeMs: c.get(http.lingeringTimeMs), timeoutMs: c.get(http.lingeringTimeoutMs) },
  };
});

/**
 * The core module's settings of a level (`ngx_http_core_merge_loc_conf`),
 * values bound; its `error_log`s and client body temp path are kept for
 * the start. A new object for each level (`locationConf` adds the other
 * modules' settings to it), its built parts shared (`coreBuilt`).
 */
export function coreLocConf(cx: CompileContext, node: LevelNode, c: ConfChain): http.HttpCoreLocConf {
  const b = coreBuilt.of(c, cx);
  return {
    root: b.root,
    index: b.index,
    tryFiles: b.tryFiles,
    types: c.get(http.types) ?? http.DEFAULT_TYPES,
    defaultType: c.get(http.defaultType),
    errorPages: b.errorPages,
    earlyHints: b.earlyHints,
    recursiveErrorPages: c.get(http.recursiveErrorPages),
    internal: node.conf.own(http.internal)?.value ?? false,
    clientMaxBodySizeBytes: c.get(http.clientMaxBodySize),
    clientBodyBufferSizeBytes: c.get(http.clientBodyBufferSize),
    subrequestOutputBufferSizeBytes: c.get(http.subrequestOutputBufferSize),
    clientBodyTempPath: b.bodyTemp,
    clientBodyInFileOnly: c.get(http.clientBodyInFileOnly),
    clientBodyTimeoutMs: c.get(http.clientBodyTimeoutMs),
    aioThreads: (c.get(http.aio) ?? 'off') !== 'off',
    clientHeaderTimeoutMs: c.get(http.clientHeaderTimeoutMs),
    largeClientHeaderBuffers: c.get(http.largeClientHeaderBuffers),
    clientHeaderBufferSizeBytes: c.get(http.clientHeaderBufferSize),
    maxHeaders: c.get(http.maxHeaders),
    mergeSlashes: c.get(http.mergeSlashes),
    underscoresInHeaders: c.get(http.underscoresInHeaders),
    ignoreInvalidHeaders: c.get(http.ignoreInvalidHeaders),
    logNotFound: c.get(http.logNotFound),
    etag: c.get(http.etag),
    ifModifiedSince: c.get(http.ifModifiedSince),
    maxRanges: c.get(http.maxRanges),
    serverTokens: c.get(http.serverTokens),
    absoluteRedirect: c.get(http.absoluteRedirect),
    serverNameInRedirect: c.get(http.serverNameInRedirect),
    portInRedirect: c.get(http.portInRedirect),
    msiePadding: c.get(http.msiePadding),
    errorLogs: b.errorLogs,
    satisfy: c.get(http.satisfy),
    keepaliveTimeoutMs: c.get(http.keepaliveTimeoutMs),
    keepaliveRequests: c.get(http.keepaliveRequests),
    keepaliveHeaderSec: c.get(http.keepaliveHeaderSec),
    keepaliveTimeMs: c.get(http.keepaliveTimeMs),
    keepaliveMinTimeoutMs: c.get(http.keepaliveMinTimeoutMs),
    keepaliveDisable: b.keepaliveDisable,
    sendTimeoutMs: c.get(http.sendTimeoutMs),
    limitRate: b.limitRate,
    limitRateAfter: b.limitRateAfter,
    lingering: b.lingering,
    resetTimedoutConnection: c.get(http.resetTimedoutConnection),
    chunkedTransferEncoding: c.get(http.chunkedTransferEncoding),
    logSubrequest: c.get(http.logSubrequest),
    resolver: c.get(http.resolver),
    resolverTimeoutMs: c.get(http.resolverTimeoutMs),
  };
}

/** A size with variables, bound; its bytes when it has none. */
function sizeValue(cx: CompileContext, src: ValueSource | undefined): http.SizeValue | undefined {
  if (!src) return undefined;
  if (src.parts.every((p) => typeof p === 'string')) return { bytes: parseSize(src.text) ?? 0 };
  return { value: cx.scope.variables.bind(src) };
}

/** A location's `limit_except` block (a child of the location), with `conf` the merge of its level. */
export function limitExceptConf(node: LevelNode, conf: (node: LevelNode) => LocationConf): LocationConf['limitExcept'] {
  const block = node.context === 'location' ? node.children.find((c) => c.context === 'limit_except') : undefined;
  const methods = block?.conf.own(http.limitExceptMethods)?.value;
  if (!block || !methods) return undefined;
  return { methods: new Set(methods), conf: conf(block) };
}

/**
 * What `ngx_http_core_merge_srv_conf` and `ngx_http_core_merge_loc_conf`
 * check, in nginx's order (levels in configuration order, a server before
 * its locations): a server's `large_client_header_buffers` size at least
 * its `connection_pool_size`, reported at the end of the http block; the
 * types hash of every server and of every level with a `types` block of its
 * own (the others share their parent's), with that level's `types_hash_*`
 * sizes (`checkHashSizes`).
 * @throws ConfigError the first of these `[emerg]`s
 */
export function checkCoreMerge(cx: CompileContext, httpNode: LevelNode, servers: readonly LevelNode[]): void {
  for (const node of levelsInOrder(servers)) {
    if (node.context !== 'server' && !node.conf.own(http.types)) continue;
    const c = cx.chain(node);
    if (node.context === 'server' && c.get(http.largeClientHeaderBuffers).sizeBytes < c.get(http.connectionPoolSizeBytes)) {
      const at = httpNode.directive!;
      throw new ConfigError('invalid-value', 'the "large_client_header_buffers" size must be equal to or greater than "connection_pool_size"',
        { file: at.loc.file, line: at.closeLine ?? at.loc.line });
    }
    const keys = (c.get(http.types) ?? http.DEFAULT_TYPES).keys();
    checkHashSizes('types_hash', keys, c.get(http.typesHashMaxSize) ?? 1024, c.get(http.typesHashBucketSize) ?? 64);
  }
}

/**
 * `duplicate location "NAME"` among the prefix, exact and named locations
 * of one level (`ngx_http_add_location`'s check, `ngx_http_init_locations`),
 * levels taken in configuration order, nested ones after their parent
 * location and before its next sibling.
 * @throws ConfigError `duplicate location "NAME"`
 */
export function checkDuplicateLocations(server: LevelNode): void {
  const seen = new Map<LevelNode, Set<string>>();
  const stack = server.children.filter((c) => c.context === 'location').reverse();
  while (stack.length > 0) {
    const c = stack.pop()!;
    const def = c.conf.own(http.locationDef)!.value!;
    if (!def.regex) {
      const parent = c.parent!;
      let names = seen.get(parent);
      if (!names) seen.set(parent, (names = new Set()));
      const key = `${def.match === 'exact' ? '=' : def.match === 'named' ? '@' : ''}${def.name}`;
      if (names.has(key)) throw new ConfigError('invalid-value', `duplicate location "${def.name}"`, def.loc);
      names.add(key);
    }
    for (let i = c.children.length - 1; i >= 0; i--) if (c.children[i]!.context === 'location') stack.push(c.children[i]!);
  }
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/**
 * The locations of a level (a server), indexed, with their nested ones,
 * without recursion. Each location's settings (`conf`) are built in
 * configuration order, a location before those nested in it (nginx's merge
 * order), then the trees are indexed innermost first.
 */
export function locationTree(cx: CompileContext, level: LevelNode, conf: (node: LevelNode) => LocationConf): LocationTree {
  const compiled = new Map<LevelNode, Mutable<CompiledLocation>>();
  const order: LevelNode[] = [];
  const locationsOf = (n: LevelNode): LevelNode[] => n.children.filter((c) => c.context === 'location');
  const stack = locationsOf(level).reverse();
  while (stack.length > 0) {
    const node = stack.pop()!;
    compiled.set(node, location(cx, node, conf(node)));
    order.push(node);
    stack.push(...locationsOf(node).reverse());
  }
  const index = (n: LevelNode): LocationTree | undefined => {
    const children = locationsOf(n);
    return children.length === 0 ? undefined : indexLocations(children.map((c) => compiled.get(c)!));
  };
  for (let i = order.length - 1; i >= 0; i--) compiled.get(order[i]!)!.nested = index(order[i]!);
  return index(level) ?? { exact: new Map(), prefixes: { location: undefined, children: new Map() }, regexes: [], named: new Map() };
}

/** One location with its settings; `nested` is filled by `locationTree`. */
function location(cx: CompileContext, node: LevelNode, conf: LocationConf): Mutable<CompiledLocation> {
  const def = node.conf.own(http.locationDef)!.value!;
  const handler = conf.proxy !== undefined || conf.fastcgi !== undefined || conf.uwsgi !== undefined || conf.scgi !== undefined
    || conf.grpc !== undefined || conf.memcached !== undefined;
  return {
    match: def.match,
    name: def.name,
    regex: def.regex?.regex,
    namedCaptures: def.regex ? namedCaptures(def.regex, cx.scope.variables) : [],
    conf,
    nested: undefined,
    autoRedirect: handler && (def.match === 'prefix' || def.match === 'prefix-no-regex' || def.match === 'exact') && def.name.endsWith('/'),
    loc: def.loc,
  };
}

interface MutablePrefixNode extends PrefixNode {
  location: CompiledLocation | undefined;
  readonly children: Map<string, MutablePrefixNode>;
}

/** One level's locations indexed as `ngx_http_init_locations` does: exact, named, regexes in order, prefixes in a trie. */
function indexLocations(locations: readonly CompiledLocation[]): LocationTree {
  const exact = new Map<string, CompiledLocation>();
  const regexes: CompiledLocation[] = [];
  const named = new Map<string, CompiledLocation>();
  const trie: MutablePrefixNode = { location: undefined, children: new Map() };
  for (const loc of locations) {
    if (loc.match === 'exact') exact.set(loc.name, loc);
    else if (loc.match === 'named') named.set(loc.name, loc);
    else if (loc.regex) regexes.push(loc);
    else {
      let node = trie;
      for (const ch of loc.name) {
        let next = node.children.get(ch);
        if (!next) node.children.set(ch, (next = { location: undefined, children: new Map() }));
        node = next;
      }
      node.location = loc;
    }
  }
  return { exact, prefixes: trie, regexes, named };
}

/** The name a server is known by (`$server_name`, the error log's `server:`): its first `server_name`, a leading dot dropped. */
export function primaryServerName(node: LevelNode): string {
  const first = node.conf.ownList(http.serverNames)?.[0]?.value.name ?? '';
  return first.startsWith('.') ? first.slice(1) : first;
}

/**
 * The listening sockets of the http servers (`ngx_http_optimize_servers`):
 * every address with its servers, on a port with a wildcard only the
 * wildcards bound, the specific addresses served through them.
 * @throws ConfigError `duplicate listen options for ADDR`, `a duplicate default server for ADDR`
 */
export function listenGroups(cx: CompileContext, servers: readonly { node: LevelNode; server: VirtualServer }[]): ListenGroup[] {
  interface Addr {
    host: string;
    port: number;
    addrText: string;
    unixPath: string | undefined;
    ssl: boolean;
    http2: boolean;
    /** `listen … http2` on the address. */
    http2Listen: boolean;
    proxyProtocol: boolean;
    optionsSet: boolean;
    defaultServer: VirtualServer | undefined;
    servers: { server: VirtualServer; node: LevelNode }[];
    /** The servers of `servers`, to find one in constant time (1,000 servers on one address were 500,000 comparisons). */
    serverSet: Set<VirtualServer>;
    loc: SourceLoc;
  }
  const addrs = new Map<string, Addr>();
  for (const s of servers) {
    const own = s.node.conf.ownList(http.listens)?.map((e) => e.value) ?? [{
      host: '0.0.0.0', port: DEFAULT_PORT, addrText: `0.0.0.0:${DEFAULT_PORT}`, wildcard: true, defaultServer: false, ssl: false,
      http2: false, udp: false, ipv6only: true, setsOptions: false, proxyProtocol: false, loc: s.server.loc,
    }];
    const http2 = cx.chain(s.node).get(http2Enabled);
    for (const l of own) {
      const key = `${l.host}|${l.port}`;
      let a = addrs.get(key);
      if (!a) {
        a = {
          host: l.host, port: l.port, addrText: l.addrText, unixPath: l.unixPath, ssl: false, http2: false, http2Listen: false, proxyProtocol: false,
          optionsSet: false, defaultServer: undefined, servers: [], serverSet: new Set(), loc: l.loc,
        };
        addrs.set(key, a);
      }
      if (l.setsOptions) {
        if (a.optionsSet) throw new ConfigError('invalid-value', `duplicate listen options for ${a.addrText}`, l.loc);
        a.optionsSet = true;
      }
      if (l.defaultServer) {
        if (a.defaultServer) throw new ConfigError('invalid-value', `a duplicate default server for ${a.addrText}`, l.loc);
        a.defaultServer = s.server;
      }
      a.ssl ||= l.ssl;
      a.proxyProtocol ||= l.proxyProtocol;
      a.http2 ||= l.http2 || http2;
      a.http2Listen ||= l.http2;
      if (!a.serverSet.has(s.server)) {
        a.serverSet.add(s.server);
        a.servers.push(s);
      }
    }
  }
  const set = (a: Addr): ServerSet => serverSet(cx, a.addrText, a.defaultServer ?? a.servers[0]!.server, a.servers, a.http2Listen);
  const groups: ListenGroup[] = [];
  const byPort = new Map<number, Addr[]>();
  for (const a of addrs.values()) byPort.set(a.port, [...(byPort.get(a.port) ?? []), a]);
  for (const [port, list] of byPort) {
    const wildcard = list.find((a) => a.host === '0.0.0.0') ?? list.find((a) => a.host === '::');
    const bound = wildcard ? [wildcard, ...list.filter((a) => a !== wildcard && (a.host === '::' || a.host === '0.0.0.0'))] : list;
    for (const a of bound) {
      const byLocalAddr = new Map<string, ServerSet>();
      if (a === wildcard) for (const specific of list.filter((x) => !bound.includes(x))) byLocalAddr.set(specific.host, set(specific));
      groups.push({
        host: a.host, port, addrText: a.addrText, unixPath: a.unixPath,
        ssl: a.ssl || [...byLocalAddr.keys()].some((h) => list.find((x) => x.host === h)?.ssl),
        http2: a.http2, proxyProtocol: a.proxyProtocol || [...byLocalAddr.keys()].some((h) => list.find((x) => x.host === h)?.proxyProtocol),
        byLocalAddr, servers: set(a), loc: a.loc,
      });
    }
  }
  return groups;
}

/** The server names of one address (`ngx_http_server_names`): exact, head and tail wildcards, regexes; `conflicting server name` warnings. */
function serverSet(
  cx: CompileContext, addrText: string, defaultServer: VirtualServer, servers: readonly { server: VirtualServer; node: LevelNode }[],
  http2Listen: boolean,
): ServerSet {
  const table = new ServerNameTable<VirtualServer>();
  const { exact, heads, tails } = table;
  const regexes: ServerSet['regexes'][number][] = [];
  const plain: string[] = [];
  for (const { server, node } of servers) {
    const names = node.conf.ownList(http.serverNames)?.map((e) => e.value) ?? [{ name: '', regex: undefined }];
    for (const n of names) {
      if (n.regex) {
        regexes.push({ regex: n.regex.regex, captureCount: n.regex.captureCount, server, namedCaptures: namedCaptures(n.regex, cx.scope.variables) });
        continue;
      }
      plain.push(n.name);
      table.add(n.name, server, () => {
        cx.warn({ level: 'warn', code: 'conflicting-server-name', text: `conflicting server name "${n.name}" on ${addrText}, ignored`, loc: undefined });
      });
    }
  }
  // ngx_http_optimize_servers: one server on an address gets no name table unless a regex of its names captures,
  // so neither SNI nor Host is looked up there (and nginx's 421 rule never applies)
  if (servers.length === 1 && !regexes.some((x) => x.captureCount > 0)) {
    return { defaultServer, http2Listen, exact: new Map(), headWildcards: [], tailWildcards: [], regexes: [] };
  }
  const hashKeys = nameHashKeys(plain);
  const httpChain = cx.chain(servers[0]!.node.parent!);
  for (const text of serverNamesHashWarnings(hashKeys, httpChain.get(http.serverNamesHashMaxSize), httpChain.get(http.serverNamesHashBucketSize))) {
    cx.warn({ level: 'warn', code: 'server-names-hash', text, loc: undefined });
  }
  heads.sort((a, b) => b[0].length - a[0].length);
  tails.sort((a, b) => b[0].length - a[0].length);
  return { defaultServer, http2Listen, exact, headWildcards: heads, tailWildcards: tails, regexes };
}
