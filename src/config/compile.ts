/**
 * The compile step: configuration files → checked levels → the frozen
 * `RouteTable` the engine serves from, plus warnings (nginx's `[warn]` lines
 * with file:line) and the "no effect in jinx" notes.
 *
 * Each module's merge of a level, its checks and the files it loads live in
 * its module (`modules/X.ts`, or a file next to it); this file keeps the
 * order `ngx_http_block` (`src/http/ngx_http.c`) runs them in after the
 * checker has read every directive: upstream names are resolved, each
 * module's merge checks run, locations are sorted (`duplicate location`),
 * variables are checked (`unknown "x" variable`), then every level is
 * merged and the listen addresses and server names are indexed
 * (`a duplicate default server`, `conflicting server name`); then what
 * `ngx_init_cycle` checks.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { ConfigNode } from '../parser/ast.js';
import { loadConfig, type ConfigSnapshot, type LoadedFile } from '../parser/load.js';
import { ConfigError, type ConfigWarning } from '../errors.js';
import { checkConfig, DirectiveRegistry, type CheckResult, type LevelNode, type NoEffectNote } from './check.js';
import { inheritedIntoIf, type CompileContext } from './compile-context.js';
import { checkCoreMerge, checkDuplicateLocations, coreLocConf, limitExceptConf, listenGroups, locationTree, primaryServerName } from './http-core-compile.js';
import { accessConf } from './modules/access.js';
import { additionConf } from './modules/addition.js';
import { autoindexConf } from './modules/autoindex.js';
import { randomIndexConf } from './modules/random-index.js';
import { davConf } from './modules/dav.js';
import { refererConf } from './modules/referer.js';
import { secureLinkConf } from './modules/secure-link.js';
import { browserConf } from './modules/browser.js';
import { sliceConf } from './modules/slice.js';
import { mp4Conf } from './modules/mp4.js';
import { useridConf } from './modules/userid.js';
import { authBasicConf } from './modules/auth-basic.js';
import { authRequestConf } from './modules/auth-request.js';
import { mirrorConf } from './modules/mirror.js';
import { cacheZones, proxyCache } from './modules/cache.js';
import { cgiPassAddress, keepCgiTempDir } from './modules/cgi-upstream.js';
import { charsetConf, linkCharsets } from './modules/charset.js';
import * as core from './modules/core.js';
import * as fastcgi from './modules/fastcgi.js';
import { SCGI_SLOTS, scgiConf } from './modules/scgi.js';
import { loadUwsgiTls, UWSGI_SLOTS, uwsgiConf } from './modules/uwsgi.js';
import { grpcConf, grpcPassAddress, loadGrpcTls } from './modules/grpc.js';
import { memcachedConf, memcachedPassAddress } from './modules/memcached.js';
import { gzipConf } from './modules/gzip.js';
import { headersConf } from './modules/headers.js';
import { http2LocConf } from './modules/http2.js';
import * as http from './modules/http-core.js';
import { allDirectives, allVariables } from './modules/index.js';
import { limitConnConf } from './modules/limit-conn.js';
import { limitReqConf } from './modules/limit-req.js';
import { accessLogsConf, accessLogTargets, compileLogFormats } from './modules/log.js';
import { bindGeo, geoBlocks } from './modules/geo.js';
import { bindMap, mapBlocks } from './modules/map.js';
import { bindSplitClients, splitClientsBlocks } from './modules/split-clients.js';
import * as proxy from './modules/proxy.js';
import { realIpConf } from './modules/realip.js';
import * as rewrite from './modules/rewrite.js';
import { ssiConf } from './modules/ssi.js';
import { checkSslListens, serverCertificates, serverTlsConf, sslVerifyClient, type ServerCertificates } from './modules/ssl.js';
import { compileStream, streamSockets } from './modules/stream.js';
import { subFilterConf } from './modules/sub.js';
import { checkUpstreamMerge, resolveUpstreams, splitHostPort, upstreamGroups } from './modules/upstream.js';
import type { ListenGroup, LocationConf, RouteTable, ScriptOp, VirtualServer } from './route-table.js';
import { ConfigScope, type HostTable } from './scope.js';
import { ConfChain, LevelMerge, type LevelConf } from './spec.js';
import { VariableRegistry, type VariableGetter } from './variables.js';

/** Where the configuration comes from. */
export interface CompileOptions {
  /** Absolute path of the main configuration file. */
  readonly confFile: string;
  /** nginx's prefix (`-p`), absolute, ending with `/`. */
  readonly prefix: string;
  /** Directives given with `-g`. */
  readonly globalDirectives?: string;
  /** Read the files from this instead of the disk (a worker reads what its master read). */
  readonly snapshot?: ConfigSnapshot;
  /** Called with each warning as it is found (also when an error follows); `CompiledConfig.warnings` has them all. */
  readonly onWarning?: (w: ConfigWarning) => void;
  /**
   * Called once the files have been read and their blocks checked, before
   * the checks nginx makes after that (`init_conf` of the core modules):
   * where `nginx -t` prints `syntax is ok`.
   */
  readonly onParsed?: () => void;
  /**
   * `jinx lint`: each error of reading and checking goes here and the
   * check goes on (`checkConfig`'s `recover`), and so do the duplicate
   * locations (the first of each server) and every unknown variable; the
   * other checks after reading still stop at the first (thrown).
   */
  readonly recover?: (err: ConfigError) => void;
  /** `--offline`: no name is resolved, no certificate or password file read (`ConfigScope.offline`). */
  readonly offline?: boolean;
  /** Called with the statements read and what the check found, before the compile step (for `jinx lint`). */
  readonly onChecked?: (nodes: readonly ConfigNode[], checked: CheckResult) => void;
}

/** A compiled configuration and what the compile step found. */
export interface CompiledConfig {
  readonly table: RouteTable;
  readonly warnings: readonly ConfigWarning[];
  readonly noEffect: readonly NoEffectNote[];
  /** The checked level tree (main → http → server → location …), for `jinx explain` and lint. */
  readonly root: LevelNode;
  readonly files: readonly LoadedFile[];
  /** What was read, for a worker to compile the same (`CompileOptions.snapshot`). */
  readonly snapshot: ConfigSnapshot;
}

/** The directive table, built once. */
export const registry = new DirectiveRegistry(allDirectives);

/**
 * The host names that directives name (`DirectiveSpec.resolves`:
 * `proxy_pass` URLs, upstream `server` entries, `set_real_ip_from` …), so
 * they can be resolved before the synchronous check. A spec for upstream
 * blocks applies in one; a stream module's spec applies in `stream`. The
 * name of an `upstream` block of the same module (http or stream) is not
 * a host: nginx's `ngx_http_upstream_add` / `ngx_stream_upstream_add` find
 * the block by name (case-insensitively) and never resolve it.
 */
export function hostsToResolve(top: readonly ConfigNode[]): Set<string> {
  const out = new Set<string>();
  const upstreams = { http: new Set<string>(), stream: new Set<string>() };
  const passed = { http: new Set<string>(), stream: new Set<string>() };
  const stack: { readonly nodes: readonly ConfigNode[]; readonly inUpstream: boolean; readonly inStream: boolean }[] = [
    { nodes: top, inUpstream: false, inStream: false },
  ];
  while (stack.length > 0) {
    const { nodes, inUpstream, inStream } = stack.pop()!;
    const module = inStream ? 'stream' : 'http';
    for (const n of nodes) {
      if (n.kind !== 'directive') continue;
      if (n.name === 'upstream' && n.block && n.args.length === 1) upstreams[module].add(n.args[0]!.toLowerCase());
      const spec = registry.resolving(n.name)?.find((s) => (
        s.contexts.some((c) => c === 'upstream' || c === 'stream_upstream') ? inUpstream : s.contexts.some((c) => c.startsWith('stream')) === inStream
      ));
      const lone = n.args.length === 1 && !n.args[0]!.includes('$') ? n.args[0]! : undefined;
      let hostPort: string | undefined;
      if (spec?.resolves === 'url') hostPort = lone && /^https?:\/\/([^/]*)/i.exec(lone)?.[1];
      else if (spec?.resolves === 'address') hostPort = lone;
      else if (spec?.resolves === 'server') hostPort = n.args[0];
      else if (spec?.resolves === 'name' && n.args.length === 1 && !n.args[0]!.startsWith('unix:') && !n.args[0]!.includes('/')) {
        if (!isIP(n.args[0]!)) out.add(n.args[0]!.toLowerCase());
      }
      if (hostPort && !hostPort.startsWith('unix:')) {
        const hp = splitHostPort(hostPort);
        if (hp && !isIP(hp.host)) (spec?.resolves === 'server' ? out : passed[module]).add(hp.host.toLowerCase());
      }
      if (n.block) stack.push({ nodes: n.block, inUpstream: n.name === 'upstream', inStream: inStream || n.name === 'stream' });
    }
  }
  for (const module of ['http', 'stream'] as const) {
    for (const host of passed[module]) if (!upstreams[module].has(host)) out.add(host);
  }
  return out;
}

/** `--offline`: every name stands for TEST-NET-1's first address (RFC 5737), never reached: the configuration is only checked. */
const OFFLINE_HOSTS: HostTable = { lookup: () => ['192.0.2.1'] };

/** Resolves names with the system resolver (nginx uses getaddrinfo at configuration time). */
async function resolveHosts(names: Iterable<string>): Promise<HostTable> {
  const table = new Map<string, string[]>();
  await Promise.all([...names].map(async (name) => {
    try {
      const addrs = await lookup(name, { all: true });
      table.set(name, addrs.map((a) => a.address));
    } catch {
      // left out: the check reports "host not found"
    }
  }));
  return { lookup: (host) => table.get(host.toLowerCase()) };
}

/**
 * Reads, checks and compiles a configuration.
 * @throws ConfigError the first error, worded and placed as nginx does (with
 *   `recover`, the first of the checks after the directives were read that it does not take)
 */
export async function compileConfig(opts: CompileOptions): Promise<CompiledConfig> {
  const loaded = loadConfig({
    confFile: opts.confFile,
    confPrefix: opts.confFile.slice(0, opts.confFile.lastIndexOf('/') + 1),
    globalDirectives: opts.globalDirectives,
    snapshot: opts.snapshot,
    recover: opts.recover !== undefined,
  });
  const hosts = opts.offline ? OFFLINE_HOSTS : await resolveHosts(hostsToResolve(loaded.nodes));
  const variables = new VariableRegistry(allVariables);
  // ngx_http_rewrite_var: a `set` variable read before this request set it
  variables.setUninitializedHandler((r, name) => {
    if (r.loc.uninitializedVariableWarn) r.logError('warn', `using uninitialized "${name}" variable`);
  });
  const scope = new ConfigScope(opts.prefix, opts.confFile.slice(0, opts.confFile.lastIndexOf('/') + 1), variables, hosts, opts.offline, opts.snapshot?.directiveFiles);
  const onWarning = opts.onWarning ?? (() => undefined);
  const checked = checkConfig(loaded.nodes, registry, scope, onWarning, opts.recover);
  opts.onChecked?.(loaded.nodes, checked);
  const table = new Compiler(scope, checked.root, [...checked.warnings], onWarning, opts.onParsed ?? (() => undefined), opts.recover).compile();
  const snapshot = { ...loaded.snapshot, directiveFiles: scope.filesRead };
  return { table, warnings: table.warnings, noEffect: checked.noEffect, root: checked.root, files: loaded.files, snapshot };
}

/** The slots of the modules that pass requests as CGI parameters, in nginx's module order. */
const CGI_SLOTS = [fastcgi.FASTCGI_SLOTS, UWSGI_SLOTS, SCGI_SLOTS];

/** The content handlers that pass the request upstream, which a `limit_except` block takes from its location. */
const UPSTREAM_HANDLERS: ReadonlySet<string> = new Set(['proxy_pass', 'fastcgi_pass', 'uwsgi_pass', 'scgi_pass', 'grpc_pass']);

/**
 * The modules' merges of a level that are functions of the settings they
 * read (and the compile's scope), as one `LevelMerge`: made once for a
 * level and the levels below it that set none of those settings. 1,000
 * server blocks of a `listen`, a `server_name` and two locations each
 * (`return`) make it once for all their 3,000 levels. What it keeps (the
 * client body, proxy and fastcgi temp paths, the error and access logs) is
 * kept in that order, once for the levels that share the result. The
 * merges that read the level tree or their level's own settings (rewrite's
 * script, `internal`, `limit_except`, proxy, fastcgi, secure_link,
 * valid_referers, the browser lists) run for each level.
 */
const moduleSettings = new LevelMerge((c: ConfChain, cx: CompileContext) => {
  const vars = cx.scope.variables;
  proxy.keepProxyTempDir(cx, c);
  for (const s of CGI_SLOTS) keepCgiTempDir(cx, c, s);
  return {
    accessLogs: accessLogsConf(cx, c),
    limitReq: limitReqConf(cx, c),
    limitConn: limitConnConf(cx, c),
    ...http2LocConf(c),
    access: accessConf(c),
    authBasic: authBasicConf(c, cx.scope),
    ...headersConf(c, cx.scope),
    realIp: realIpConf(c),
    authRequest: authRequestConf(c, vars),
    mirror: mirrorConf(c),
    fastcgiSplit: fastcgi.fastcgiSplitConf(c),
    uninitializedVariableWarn: c.get(rewrite.uninitializedVariableWarn),
    rewriteLog: c.get(rewrite.rewriteLog),
    gzip: gzipConf(c),
    charset: charsetConf(c, cx.scope),
    ssi: ssiConf(c),
    sub: subFilterConf(c, vars),
    addition: additionConf(c),
    contentHandler: c.get(http.contentHandler),
    autoindex: autoindexConf(c),
    randomIndex: randomIndexConf(c),
    dav: davConf(c),
    sliceBytes: sliceConf(c),
    mp4: mp4Conf(c),
    userid: useridConf(c, vars),
  };
});

/** Runs the modules over the checked level tree, in nginx's order, into the route table. */
class Compiler implements CompileContext {
  private readonly nodeOf = new Map<LevelConf, LevelNode>();
  private readonly confCache = new Map<LevelConf, LocationConf>();
  private readonly chains = new Map<LevelNode, ConfChain>();
  private readonly memos = new Map<symbol, unknown>();
  readonly tempDirs = new Set<string>();

  constructor(
    readonly scope: ConfigScope,
    private readonly root: LevelNode,
    private readonly warnings: ConfigWarning[],
    private readonly onWarning: (w: ConfigWarning) => void,
    private readonly onParsed: () => void,
    private readonly recover: ((err: ConfigError) => void) | undefined,
  ) {
    const stack = [root];
    while (stack.length > 0) {
      const n = stack.pop()!;
      this.nodeOf.set(n.conf, n);
      stack.push(...n.children);
    }
  }

  warn(w: ConfigWarning): void {
    this.warnings.push(w);
    this.onWarning(w);
  }

  /**
   * Runs a check nginx makes once everything is read; with `recover`
   * (`jinx lint`) its error is handed over and the compile goes on (as far
   * as it can: the engine reports a later fault only when no error was).
   */
  private recovering(check: () => void): void {
    if (!this.recover) return check();
    try {
      check();
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      this.recover(err);
    }
  }

  memo<T>(key: symbol, make: () => T): T {
    if (!this.memos.has(key)) this.memos.set(key, make());
    return this.memos.get(key) as T;
  }

  /** The merge chain of a level, built once per level, without recursion. */
  chain(node: LevelNode): ConfChain {
    const known = this.chains.get(node);
    if (known) return known;
    const path: LevelNode[] = [];
    let n: LevelNode | undefined = node;
    for (; n && !this.chains.has(n); n = n.parent) path.push(n);
    let chain = n ? this.chains.get(n) : undefined;
    for (let i = path.length - 1; i >= 0; i--) {
      chain = new ConfChain(path[i]!.conf, chain);
      this.chains.set(path[i]!, chain);
    }
    return chain!;
  }

  compile(): RouteTable {
    const mainChain = this.chain(this.root);
    const errorLogs = core.errorLogsConf(mainChain);
    const httpNode = this.root.children.find((c) => c.context === 'http');
    let listens: ListenGroup[] = [];
    if (httpNode) {
      resolveUpstreams(this, httpNode, [proxy.proxyPassAddress, ...CGI_SLOTS.map(cgiPassAddress), grpcPassAddress, memcachedPassAddress]);
      for (const map of this.scope.registry(mapBlocks)) bindMap(map, this.scope.variables);
      for (const geo of this.scope.registry(geoBlocks)) bindGeo(geo, this.scope.variables);
      for (const split of this.scope.registry(splitClientsBlocks)) bindSplitClients(split, this.scope.variables);
      const servers = httpNode.children.filter((c) => c.context === 'server');
      const certificates = servers.map((s) => serverCertificates(this, s));
      checkCoreMerge(this, httpNode, servers);
      checkUpstreamMerge(this, httpNode, servers, proxy.PROXY_MERGE);
      for (const s of CGI_SLOTS) checkUpstreamMerge(this, httpNode, servers, s.merge);
      proxy.loadProxyTls(this, servers);
      loadUwsgiTls(this, servers);
      loadGrpcTls(this, servers);
      for (const s of servers) this.recovering(() => checkDuplicateLocations(s));
      checkSslListens(this, servers, certificates);
      linkCharsets(this, servers);
      this.scope.variables.checkReferences(this.recover);
      compileLogFormats(this);
      const httpChain = this.chain(httpNode);
      for (const paths of [proxyCache.paths, ...CGI_SLOTS.map((s) => s.cache.paths)]) {
        for (const def of httpChain.list(paths)) this.tempDirs.add(def.dir);
      }
      this.locationConf(httpNode);
      const compiled = servers.map((s, i) => ({ node: s, server: this.server(s, certificates[i]!) }));
      listens = listenGroups(this, compiled);
    }
    const streamListens = streamSockets(this.scope);
    const streamNode = this.root.children.find((c) => c.context === 'stream');
    const stream = streamNode ? compileStream(this, streamNode) : undefined;
    this.onParsed();
    // ngx_init_cycle from here: init_conf of the core modules, then shared memory
    core.checkCpuAffinity(this, mainChain);
    const main = core.mainConf(this, this.root, errorLogs, listens.length + streamListens.length);
    core.checkSharedZones(this);
    return Object.freeze({
      main: Object.freeze(main),
      listens: Object.freeze(listens),
      streamListens,
      stream,
      variableCount: this.scope.variables.indexedCount,
      variable: variableLookup(this.scope.variables),
      upstreams: upstreamGroups(this),
      accessLogTargets: accessLogTargets(this),
      errorLogTargets: [...errorLogs, ...core.errorLogTargets(this)],
      tempDirs: [...this.tempDirs],
      cacheZones: [...this.scope.registry(cacheZones).values()].map(({ loc: _loc, ...zone }) => zone),
      warnings: this.warnings,
    });
  }

  /**
   * The merged settings of a level (location, `if` block or server), built
   * once per level: each module's merge (`merge_loc_conf`), in the order
   * nginx's modules run theirs; the temp paths and log targets they keep
   * are made in that order.
   */
  private locationConf(node: LevelNode): LocationConf {
    const cached = this.confCache.get(node.conf);
    if (cached) return cached;
    const c = this.chain(node);
    const coreConf = coreLocConf(this, node, c);
    const settings = moduleSettings.of(c, this);
    const conf: LocationConf = Object.assign(coreConf, {
      limitExcept: limitExceptConf(node, (n) => this.locationConf(n)),
      script: node.context === 'location' || node.context === 'lif' ? this.script(node.conf) : [],
      proxy: proxy.proxyConf(this, node, c),
      fastcgi: fastcgi.fastcgiConf(this, node, c),
      uwsgi: uwsgiConf(this, node, c),
      scgi: scgiConf(this, node, c),
      grpc: grpcConf(this, node, c),
      memcached: memcachedConf(this, node, c),
      secureLink: secureLinkConf(c, this.scope.variables),
      referers: refererConf(c),
      browser: browserConf(c),
    }, settings);
    // a block without a content handler of its own: an `if` keeps its location's (nginx's
    // ngx_http_update_location_config changes r->content_handler only to a handler the block has), a
    // `limit_except` takes proxy_pass, fastcgi_pass, uwsgi_pass, scgi_pass and grpc_pass with their settings
    // (clcf->lmt_excpt in ngx_http_proxy_merge_loc_conf and ngx_http_fastcgi_merge_loc_conf)
    if (conf.contentHandler === undefined && (node.context === 'lif' || node.context === 'limit_except')) {
      const outer = inheritedIntoIf(node, (n) => n.conf.own(http.contentHandler)?.value);
      if (node.context === 'lif' || (outer !== undefined && UPSTREAM_HANDLERS.has(outer))) Object.assign(conf, { contentHandler: outer });
    }
    Object.freeze(conf);
    this.confCache.set(node.conf, conf);
    return conf;
  }

  /** The rewrite module's script of a level, `if` blocks bound with their merged settings. */
  private script(conf: LevelConf): ScriptOp[] {
    return rewrite.levelScript(conf, this.scope.variables, (block) => this.locationConf(this.nodeOf.get(block)!));
  }

  /** One `server` block: its script, its locations, its own settings, then its TLS context. */
  private server(node: LevelNode, certificates: ServerCertificates): VirtualServer {
    const script = this.script(node.conf);
    const locations = locationTree(this, node, (n) => this.locationConf(n));
    const conf = this.locationConf(node);
    return {
      name: primaryServerName(node),
      script,
      locations,
      conf,
      tls: serverTlsConf(this, node, certificates),
      verifyClient: this.chain(node).get(sslVerifyClient),
      loc: node.directive!.loc,
    };
  }
}

/**
 * `ngx_http_get_variable` by name at request time (SSI's `echo` and
 * expressions): the getter of a variable the configuration knows, looked up
 * once per name; undefined for a name no module defines.
 */
function variableLookup(registry: VariableRegistry): (name: string) => VariableGetter | undefined {
  const cache = new Map<string, VariableGetter | undefined>();
  return (name) => {
    const key = name.toLowerCase();
    if (cache.has(key)) return cache.get(key);
    const getter = registry.getter(key);
    if (cache.size < 1024) cache.set(key, getter);
    return getter;
  };
}
