/**
 * The compile step: configuration files → checked levels → the frozen
 * `RouteTable` the engine serves from, plus warnings (nginx's `[warn]` lines
 * with file:line) and the "no effect in jinx" notes.
 *
 * After the checker has read every directive, the order of the remaining
 * checks follows `ngx_http_block` (`src/http/ngx_http.c`): upstream names are
 * resolved, locations are sorted (`duplicate location`), variables are
 * checked (`unknown "x" variable`), then listen addresses and server names
 * are indexed (`a duplicate default server`, `conflicting server name`).
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { ConfigNode, SourceLoc } from '../parser/ast.js';
import { loadConfig, type LoadedFile } from '../parser/load.js';
import { ConfigError, type ConfigWarning } from '../errors.js';
import { checkHashSizes } from './hash.js';
import { compileLogFormat } from './log-format.js';
import {
  checkCiphers, checkEcdhCurve, loadCertificatePair, loadCrl, loadDhparam, loadTrustedCertificates, type CertificatePair,
} from './certificates.js';
import { checkConfig, DirectiveRegistry, type LevelNode, type NoEffectNote } from './check.js';
import type { LocationDef } from './modules/http-core.js';
import * as core from './modules/core.js';
import * as http from './modules/http-core.js';
import * as rewrite from './modules/rewrite.js';
import { accessRules } from './modules/access.js';
import { authBasicRealm, authBasicUserFile } from './modules/auth-basic.js';
import { authRequestSets, authRequestUri } from './modules/auth-request.js';
import * as fastcgi from './modules/fastcgi.js';
import * as charset from './modules/charset.js';
import * as gzip from './modules/gzip.js';
import * as ssi from './modules/ssi.js';
import * as sub from './modules/sub.js';
import * as addition from './modules/addition.js';
import * as limitReq from './modules/limit-req.js';
import { addHeaders, addTrailers, expires } from './modules/headers.js';
import { allDirectives, allVariables } from './modules/index.js';
import { accessLogs, COMBINED_FORMAT, openLogFileCache } from './modules/log.js';
import { bindMap } from './modules/map.js';
import { bindCache, fastcgiCache, proxyCache } from './modules/cache.js';
import * as proxy from './modules/proxy.js';
import { realIpFrom, realIpHeader, realIpRecursive } from './modules/realip.js';
import * as ssl from './modules/ssl.js';
import { http2BodyPrereadSize, http2ChunkSize, http2Enabled, http2MaxConcurrentStreams } from './modules/http2.js';
import { splitHostPort } from './modules/upstream.js';
import { ConfigScope, type HostTable } from './scope.js';
import { ConfChain, type LevelConf, type Slot } from './spec.js';
import { VariableRegistry, type ValueSource, type VariableGetter } from './variables.js';
import type {
  AccessLogTarget, AccessRule, CompiledLocation, CompiledLogFormat, CookieFlags, CookieMatch, CookieRewrite, ErrorLogTarget, ErrorPage, FastcgiConf, ListenGroup,
  LimitReqConf, LimitReqZone, LocationConf, LocationTree, CharsetConf, CharsetSetting, GzipConf, NextUpstreamConf, PerHandshakeCertificates, TlsServerConf, PrefixNode, ProxyConf, RouteTable, ServerSet, UpstreamGroup, UpstreamPeer, UpstreamTlsConf,
  VirtualServer,
} from './route-table.js';

/** Where the configuration comes from. */
export interface CompileOptions {
  /** Absolute path of the main configuration file. */
  readonly confFile: string;
  /** nginx's prefix (`-p`), absolute, ending with `/`. */
  readonly prefix: string;
  /** Directives given with `-g`. */
  readonly globalDirectives?: string;
  /** Called with each warning as it is found (also when an error follows); `CompiledConfig.warnings` has them all. */
  readonly onWarning?: (w: ConfigWarning) => void;
  /**
   * Called once the files have been read and their blocks checked, before
   * the checks nginx makes after that (`init_conf` of the core modules):
   * where `nginx -t` prints `syntax is ok`.
   */
  readonly onParsed?: () => void;
}

/** A compiled configuration and what the compile step found. */
export interface CompiledConfig {
  readonly table: RouteTable;
  readonly warnings: readonly ConfigWarning[];
  readonly noEffect: readonly NoEffectNote[];
  readonly files: readonly LoadedFile[];
}

/** The slots `checkUpstreamMerge` reads for one module, and its directives' prefix. */
interface UpstreamMergeSlots {
  readonly prefix: 'proxy' | 'fastcgi';
  readonly buffers: Slot<{ readonly count: number; readonly sizeBytes: number }>;
  readonly bufferSize: Slot<number>;
  readonly busyBuffersSize: Slot<number | undefined>;
  readonly tempFileWriteSize: Slot<number | undefined>;
  readonly maxTempFileSize: Slot<number>;
  readonly cacheZone: Slot<string | ValueSource | false | undefined>;
  /** FastCGI has no default cache key: a cache without one is a warning. */
  readonly cacheKey?: Slot<unknown>;
  readonly nextUpstream: Slot<readonly string[]>;
  readonly nextUpstreamTries: Slot<number>;
  readonly nextUpstreamTimeoutMs: Slot<number>;
}

/** `*_next_upstream` merged: `off` leaves no condition (`ngx_http_proxy_merge_loc_conf`). */
function nextUpstreamConf(c: ConfChain, s: UpstreamMergeSlots): NextUpstreamConf {
  const conditions = c.get(s.nextUpstream);
  return {
    nextUpstream: new Set(conditions.includes('off') ? [] : conditions),
    nextUpstreamTries: c.get(s.nextUpstreamTries),
    nextUpstreamTimeoutMs: c.get(s.nextUpstreamTimeoutMs),
  };
}

/**
 * `*_busy_buffers_size` and `*_temp_file_write_size` as nginx defaults them
 * (`ngx_http_proxy_merge_loc_conf`): twice the larger of `*_buffer_size` and
 * one of `*_buffers`.
 */
function spoolSizes(c: ConfChain, m: UpstreamMergeSlots): { busyBytes: number; tempFileWriteBytes: number } {
  const size = Math.max(c.get(m.bufferSize), c.get(m.buffers).sizeBytes);
  return { busyBytes: c.get(m.busyBuffersSize) ?? 2 * size, tempFileWriteBytes: c.get(m.tempFileWriteSize) ?? 2 * size };
}

const PROXY_MERGE: UpstreamMergeSlots = {
  prefix: 'proxy', buffers: proxy.proxyBuffers, bufferSize: proxy.proxyBufferSize, busyBuffersSize: proxy.proxyBusyBuffersSize,
  tempFileWriteSize: proxy.proxyTempFileWriteSize, maxTempFileSize: proxy.proxyMaxTempFileSize, cacheZone: proxyCache.zone,
  nextUpstream: proxy.proxyNextUpstream, nextUpstreamTries: proxy.proxyNextUpstreamTries, nextUpstreamTimeoutMs: proxy.proxyNextUpstreamTimeoutMs,
};

const FASTCGI_MERGE: UpstreamMergeSlots = {
  prefix: 'fastcgi', buffers: fastcgi.fastcgiBuffers, bufferSize: fastcgi.fastcgiBufferSize, busyBuffersSize: fastcgi.fastcgiBusyBuffersSize,
  tempFileWriteSize: fastcgi.fastcgiTempFileWriteSize, maxTempFileSize: fastcgi.fastcgiMaxTempFileSize, cacheZone: fastcgiCache.zone,
  cacheKey: fastcgiCache.key, nextUpstream: fastcgi.fastcgiNextUpstream, nextUpstreamTries: fastcgi.fastcgiNextUpstreamTries,
  nextUpstreamTimeoutMs: fastcgi.fastcgiNextUpstreamTimeoutMs,
};

/** `proxy_cache_key`'s default in nginx 1.30 (`ngx_http_proxy_merge_loc_conf`; its entries say `KEY: http://HOST:PORT/URI`). */
const PROXY_CACHE_KEY = '$scheme://$proxy_host$request_uri';

/**
 * The request headers a location with a cache sends in place of the
 * client's (`ngx_http_proxy_cache_headers`, `ngx_http_fastcgi_cache_headers`):
 * the validators of a stale entry being revalidated, else nothing.
 */
const CACHE_REQUEST_HEADERS: readonly [string, string][] = [
  ['If-Modified-Since', '$upstream_cache_last_modified'], ['If-Unmodified-Since', ''], ['If-None-Match', '$upstream_cache_etag'],
  ['If-Match', ''], ['Range', ''], ['If-Range', ''],
];

/** nginx's default `listen` when a server has none: port 80 for root, 8000 otherwise. */
const DEFAULT_PORT = process.getuid?.() === 0 ? 80 : 8000;

/** The directive table, built once. */
export const registry = new DirectiveRegistry(allDirectives);

/**
 * Collects the host names `proxy_pass` URLs, upstream `server` entries and
 * `set_real_ip_from` name, so they can be resolved before the synchronous check.
 */
function collectHosts(top: readonly ConfigNode[], out: Set<string>): void {
  const stack: { readonly nodes: readonly ConfigNode[]; readonly inUpstream: boolean; readonly inStream: boolean }[] = [
    { nodes: top, inUpstream: false, inStream: false },
  ];
  while (stack.length > 0) {
    const { nodes, inUpstream, inStream } = stack.pop()!;
    for (const n of nodes) {
      if (n.kind !== 'directive') continue;
      let hostPort: string | undefined;
      if (n.name === 'proxy_pass' && n.args.length === 1 && !n.args[0]!.includes('$')) {
        hostPort = inStream ? n.args[0] : /^https?:\/\/([^/]*)/i.exec(n.args[0]!)?.[1];
      } else if (n.name === 'fastcgi_pass' && n.args.length === 1 && !n.args[0]!.includes('$') && !n.args[0]!.startsWith('unix:')) {
        hostPort = n.args[0];
      } else if (n.name === 'server' && inUpstream && n.args.length > 0) hostPort = n.args[0];
      else if (n.name === 'set_real_ip_from' && n.args.length === 1 && !n.args[0]!.startsWith('unix:') && !n.args[0]!.includes('/')) {
        if (!isIP(n.args[0]!)) out.add(n.args[0]!.toLowerCase());
      }
      if (hostPort && !hostPort.startsWith('unix:')) {
        const hp = splitHostPort(hostPort);
        if (hp && !isIP(hp.host)) out.add(hp.host.toLowerCase());
      }
      if (n.block) stack.push({ nodes: n.block, inUpstream: n.name === 'upstream', inStream: inStream || n.name === 'stream' });
    }
  }
}

/**
 * The levels under `roots`, each before the levels nested in it, in
 * configuration order (nginx's merge order), without recursion: any nesting
 * depth. `upstream` blocks and what they hold are left out.
 */
function levelsInOrder(roots: readonly LevelNode[]): LevelNode[] {
  const out: LevelNode[] = [];
  const stack = [...roots].reverse();
  while (stack.length > 0) {
    const node = stack.pop()!;
    out.push(node);
    for (let i = node.children.length - 1; i >= 0; i--) {
      const child = node.children[i]!;
      if (child.context !== 'upstream') stack.push(child);
    }
  }
  return out;
}

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
 * @throws ConfigError the first error, worded and placed as nginx does
 */
export async function compileConfig(opts: CompileOptions): Promise<CompiledConfig> {
  const loaded = loadConfig({
    confFile: opts.confFile,
    confPrefix: opts.confFile.slice(0, opts.confFile.lastIndexOf('/') + 1),
    globalDirectives: opts.globalDirectives,
  });
  const names = new Set<string>();
  collectHosts(loaded.nodes, names);
  const hosts = await resolveHosts(names);
  const variables = new VariableRegistry(allVariables);
  const scope = new ConfigScope(opts.prefix, opts.confFile.slice(0, opts.confFile.lastIndexOf('/') + 1), variables, hosts);
  const onWarning = opts.onWarning ?? (() => undefined);
  const checked = checkConfig(loaded.nodes, registry, scope, onWarning);
  const table = new Compiler(scope, checked.root, [...checked.warnings], onWarning, opts.onParsed ?? (() => undefined)).compile();
  return { table, warnings: table.warnings, noEffect: checked.noEffect, files: loaded.files };
}

/** A server's certificates: read now, or (with variables) to be read per handshake. */
interface ServerCertificates {
  readonly loaded: CertificatePair[];
  readonly perHandshake: readonly { readonly cert: ValueSource; readonly key: ValueSource }[] | undefined;
  readonly passwords: readonly string[] | undefined;
  /** The other files of a TLS server, read after its certificates; undefined for a server without TLS. */
  readonly files: TlsFiles | undefined;
}

/** What a TLS server reads besides its certificates. */
type TlsFiles = Pick<TlsServerConf, 'verifyClient' | 'clientCa' | 'trusted' | 'verifyDepth' | 'crl' | 'dhparam'>;

/** A location's upstream TLS settings as read before variables are bound (`proxy_ssl_name` and certificates with variables are bound later). */
type LoadedTls = Omit<UpstreamTlsConf, 'name' | 'certificateFiles'> & {
  readonly certificateSources: { readonly cert: ValueSource; readonly key: ValueSource } | undefined;
};

/** Whether a value has variables (nginx's `ccv.complex_value->lengths`). */
const hasVariables = (v: ValueSource): boolean => v.parts.some((p) => typeof p !== 'string');

/** Turns the checked level tree into the route table. */
class Compiler {
  private readonly nodeOf = new Map<LevelConf, LevelNode>();
  private readonly confCache = new Map<LevelConf, LocationConf>();
  private readonly chains = new Map<LevelNode, ConfChain>();
  private readonly logFormats = new Map<string, CompiledLogFormat>();
  private readonly accessLogTargets: AccessLogTarget[] = [];
  private readonly errorLogTargets: ErrorLogTarget[] = [];
  private readonly upstreams = new Map<string, UpstreamGroup>();
  private readonly certificateCache = new Map<string, CertificatePair>();
  private readonly trustedCache = new Map<string, Buffer>();
  private readonly checkedCiphers = new Set<string>();
  private readonly checkedCurves = new Set<string>();
  /** The upstream TLS settings of every level that proxies over TLS, read by `loadProxyTls` (the name is bound later). */
  private readonly proxyTls = new Map<LevelNode, LoadedTls>();
  /** Every temp path of every level, default or set: nginx creates them all. */
  private readonly tempDirs = new Set<string>();
  /** `limit_req_zone`s bound, by name. */
  private readonly limitReqZones = new Map<string, LimitReqZone>();

  constructor(
    private readonly scope: ConfigScope,
    private readonly root: LevelNode,
    private readonly warnings: ConfigWarning[],
    private readonly onWarning: (w: ConfigWarning) => void,
    private readonly onParsed: () => void,
  ) {
    const stack = [root];
    while (stack.length > 0) {
      const n = stack.pop()!;
      this.nodeOf.set(n.conf, n);
      stack.push(...n.children);
    }
  }

  private warn(w: ConfigWarning): void {
    this.warnings.push(w);
    this.onWarning(w);
  }

  compile(): RouteTable {
    const mainChain = this.chain(this.root);
    const errorLogs = this.errorLogs(mainChain);
    const httpNode = this.root.children.find((c) => c.context === 'http');
    let listens: ListenGroup[] = [];
    if (httpNode) {
      this.resolveUpstreams(httpNode);
      for (const map of this.scope.maps) bindMap(map, this.scope.variables);
      const servers = httpNode.children.filter((c) => c.context === 'server');
      const certificates = servers.map((s) => this.certificates(s));
      this.checkTypesHash(servers);
      this.checkUpstreamMerge(httpNode, servers, PROXY_MERGE);
      this.checkUpstreamMerge(httpNode, servers, FASTCGI_MERGE);
      this.loadProxyTls(servers);
      for (const s of servers) this.checkDuplicateLocations(s);
      this.checkSslListens(servers, certificates);
      this.linkCharsets(servers);
      this.scope.variables.checkReferences();
      this.compileLogFormats();
      const httpChain = this.chain(httpNode);
      for (const def of [...httpChain.list(proxyCache.paths), ...httpChain.list(fastcgiCache.paths)]) this.tempDirs.add(def.dir);
      this.locationConf(httpNode);
      const compiled = servers.map((s, i) => ({ node: s, server: this.server(s, certificates[i]!) }));
      listens = this.listenGroups(compiled);
    }
    const streamListens = this.streamSockets();
    this.onParsed();
    // ngx_init_cycle from here: init_conf of the core modules, then shared memory
    this.checkCpuAffinity(mainChain);
    const events = this.root.children.find((c) => c.context === 'events');
    if (!events) throw new ConfigError('missing-section', 'no "events" section in configuration', undefined, { phase: 'init' });
    const main = {
      daemon: mainChain.get(core.daemon),
      pidFile: this.scope.fullPath(mainChain.get(core.pidFile)),
      pidFileConfigured: mainChain.has(core.pidFile),
      workerProcesses: mainChain.get(core.workerProcesses),
      workerConnections: new ConfChain(events.conf, undefined).get(core.workerConnections),
      masterProcess: mainChain.get(core.masterProcess),
      workerShutdownTimeoutMs: mainChain.get(core.workerShutdownTimeoutMs),
      errorLogs,
    };
    const sockets = listens.length + streamListens.length;
    if (main.workerConnections < sockets + 1) {
      throw new ConfigError('invalid-value', `${main.workerConnections} worker_connections are not enough for ${sockets} listening sockets`,
        undefined, { phase: 'init' });
    }
    this.checkSharedZones();
    return Object.freeze({
      main: Object.freeze(main),
      listens: Object.freeze(listens),
      streamListens,
      variableCount: this.scope.variables.indexedCount,
      variable: variableLookup(this.scope.variables),
      upstreams: this.upstreams,
      accessLogTargets: this.accessLogTargets,
      errorLogTargets: [...errorLogs, ...this.errorLogTargets],
      tempDirs: [...this.tempDirs],
      cacheZones: [...this.scope.cacheZones.values()].map(({ loc: _loc, ...zone }) => zone),
      warnings: this.warnings,
    });
  }

  /**
   * The stream sockets nginx opens, grouped as `ngx_stream_optimize_servers`
   * does: on a port (and protocol) with a wildcard address only the
   * wildcards are bound.
   */
  private streamSockets(): RouteTable['streamListens'] {
    const seen = new Set<string>();
    const unique = this.scope.stream.listens.filter((l) => {
      const key = `${l.udp}|${l.host}|${l.port}`;
      return !seen.has(key) && seen.add(key);
    });
    const wildcardPorts = new Set(unique.filter((l) => l.wildcard).map((l) => `${l.udp}|${l.port}`));
    return unique
      .filter((l) => l.wildcard || !wildcardPorts.has(`${l.udp}|${l.port}`))
      .map((l) => ({ host: l.host, port: l.port, addrText: l.addrText, udp: l.udp }));
  }

  /**
   * `ngx_core_module_init_conf` (`src/core/nginx.c`): a number of
   * `worker_cpu_affinity` masks other than one or `worker_processes` is a warning.
   */
  private checkCpuAffinity(mainChain: ConfChain): void {
    const affinity = mainChain.get(core.cpuAffinity);
    if (!affinity || affinity.auto || affinity.masks === 1 || affinity.masks === mainChain.get(core.workerProcesses)) return;
    this.warn({
      level: 'warn', code: 'cpu-affinity-masks', loc: undefined,
      text: 'the number of "worker_processes" is not equal to the number of "worker_cpu_affinity" masks, using last mask for remaining worker processes',
    });
  }

  /** `ngx_init_cycle`: every shared memory zone needs a size by now (`zone NAME;` names one sized elsewhere). */
  private checkSharedZones(): void {
    for (const [name, zone] of this.scope.sharedZones) {
      if (zone.size === 0) throw new ConfigError('invalid-value', `zero size shared memory zone "${name}"`, undefined, { phase: 'init' });
    }
  }

  /**
   * `ngx_http_core_merge_loc_conf` builds the types hash of every server and
   * of every level with a `types` block of its own (the others share their
   * parent's), with that level's `types_hash_*` sizes: `checkHashSizes`.
   */
  private checkTypesHash(servers: readonly LevelNode[]): void {
    for (const node of levelsInOrder(servers)) {
      if (node.context !== 'server' && !node.conf.own(http.types)) continue;
      const c = this.chain(node);
      const keys = (c.get(http.types) ?? http.DEFAULT_TYPES).keys();
      checkHashSizes('types_hash', keys, c.get(http.typesHashMaxSize) ?? 1024, c.get(http.typesHashBucketSize) ?? 64);
    }
  }

  /**
   * What `ngx_http_proxy_merge_loc_conf` and `ngx_http_fastcgi_merge_loc_conf`
   * check on every server and location (config order, nested ones after
   * their parent), reported at the end of the http block: at least two
   * buffers; busy buffers, temp file writes and the temp file limit against
   * the largest buffer (`proxy_buffer_size` or one of `proxy_buffers`); a
   * cache zone that no `*_cache_path` defines.
   */
  private checkUpstreamMerge(httpNode: LevelNode, servers: readonly LevelNode[], m: UpstreamMergeSlots): void {
    const at = { file: httpNode.directive!.loc.file, line: httpNode.directive!.closeLine ?? httpNode.directive!.loc.line };
    const failAt = (text: string): never => {
      throw new ConfigError('invalid-value', text, at);
    };
    const p = m.prefix;
    const largest = `the maximum of the value of "${p}_buffer_size" and one of the "${p}_buffers"`;
    for (const node of levelsInOrder(servers)) {
      const c = this.chain(node);
      const bufs = c.get(m.buffers);
      if (bufs.count < 2) failAt(`there must be at least 2 "${p}_buffers"`);
      const size = Math.max(c.get(m.bufferSize), bufs.sizeBytes);
      const busy = c.get(m.busyBuffersSize) ?? 2 * size;
      if (busy < size) failAt(`"${p}_busy_buffers_size" must be equal to or greater than ${largest}`);
      if (busy > (bufs.count - 1) * bufs.sizeBytes) {
        failAt(`"${p}_busy_buffers_size" must be less than the size of all "${p}_buffers" minus one buffer`);
      }
      if ((c.get(m.tempFileWriteSize) ?? 2 * size) < size) failAt(`"${p}_temp_file_write_size" must be equal to or greater than ${largest}`);
      const maxTemp = c.get(m.maxTempFileSize);
      if (maxTemp !== 0 && maxTemp < size) {
        failAt(`"${p}_max_temp_file_size" must be equal to zero to disable temporary files usage or must be equal to or greater than ${largest}`);
      }
      const zone = c.get(m.cacheZone);
      if (typeof zone === 'string' && !this.scope.sharedZones.get(zone)?.defined) failAt(`"${p}_cache" zone "${zone}" is unknown`);
      if (zone && m.cacheKey && !c.has(m.cacheKey)) {
        this.warn({ level: 'warn', code: 'no-cache-key', text: `no "${p}_cache_key" for "${p}_cache"`, loc: at });
      }
    }
  }

  /**
   * `ngx_http_proxy_set_ssl` (`src/http/modules/ngx_http_proxy_module.c`)
   * for every location (and `if` block) whose `proxy_pass` is `https://…` or
   * has variables, in configuration order as nginx's merge runs it: the
   * cipher list, the client certificate and key, then with `proxy_ssl_verify`
   * the trusted certificates. nginx reports these errors without a place.
   */
  private loadProxyTls(servers: readonly LevelNode[]): void {
    for (const node of levelsInOrder(servers)) {
      const pass = this.inheritedIntoIf(node, (n) => n.conf.own(proxy.proxyPass)?.value);
      if (pass && (pass.kind === 'variable' || pass.scheme === 'https')) this.proxyTls.set(node, this.upstreamTls(this.chain(node)));
    }
  }

  /** `ngx_ssl_ciphers` once per distinct list (`checkCiphers`). */
  private checkCiphersOnce(ciphers: string): void {
    if (this.checkedCiphers.has(ciphers)) return;
    checkCiphers(ciphers);
    this.checkedCiphers.add(ciphers);
  }

  private upstreamTls(c: ConfChain): LoadedTls {
    const ciphers = c.get(proxy.proxySslCiphers);
    this.checkCiphersOnce(ciphers);
    let certificate: CertificatePair | undefined;
    let certificateSources: LoadedTls['certificateSources'];
    const passwords = c.get(proxy.proxySslPasswords);
    const cert = c.get(proxy.proxySslCertificate);
    const key = c.get(proxy.proxySslCertificateKey);
    if (cert !== undefined && cert.text !== '') {
      if (key === undefined) throw new ConfigError('file', `no "proxy_ssl_certificate_key" is defined for certificate "${cert.text}"`);
      if (hasVariables(cert) || hasVariables(key)) {
        // read per request (nginx: per connection)
        certificateSources = { cert, key };
      } else {
        const [certPath, keyPath] = [this.scope.confPath(cert.text), this.scope.confPath(key.text)];
        const cacheKey = `${certPath}\0${keyPath}\0${passwords?.join('\n') ?? ''}`;
        certificate = this.certificateCache.get(cacheKey);
        if (!certificate) this.certificateCache.set(cacheKey, (certificate = loadCertificatePair(certPath, keyPath, false, passwords)));
      }
    }
    const verify = c.get(proxy.proxySslVerify);
    let trusted: Buffer | undefined;
    const trustedFile = c.get(proxy.proxySslTrustedCertificate);
    if (verify) {
      if (!trustedFile) throw new ConfigError('file', 'no proxy_ssl_trusted_certificate for proxy_ssl_verify');
      const path = this.scope.confPath(trustedFile);
      trusted = this.trustedCache.get(path);
      if (!trusted) this.trustedCache.set(path, (trusted = loadTrustedCertificates(path)));
    }
    const crlFile = c.get(proxy.proxySslCrl);
    const crl = verify && crlFile !== undefined ? loadCrl(this.scope.confPath(crlFile)) : undefined;
    const settings = {
      serverName: c.get(proxy.proxySslServerName),
      verify,
      verifyDepth: c.get(proxy.proxySslVerifyDepth),
      trusted,
      certificate,
      certificateSources,
      passwords,
      crl,
      protocols: c.get(proxy.proxySslProtocols),
      ciphers,
      sessionReuse: c.get(proxy.proxySslSessionReuse),
    };
    return {
      key: JSON.stringify([
        settings.serverName, verify, settings.verifyDepth, verify ? trustedFile : '', verify ? crlFile ?? '' : '', certificate?.certPath ?? cert?.text ?? '',
        certificate?.keyPath ?? key?.text ?? '', passwords ?? [], settings.protocols, ciphers, settings.sessionReuse,
      ]),
      ...settings,
    };
  }

  /** The merge chain of a level, built once per level, without recursion. */
  private chain(node: LevelNode): ConfChain {
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

  private errorLogs(chain: ConfChain): ErrorLogTarget[] {
    const list = chain.list(core.errorLogs);
    return list.length > 0 ? list : [{ path: 'stderr', level: 'error' }];
  }

  // --- upstreams -------------------------------------------------------------

  private resolveUpstreams(httpNode: LevelNode): void {
    for (const decl of this.scope.upstreams.values()) {
      if (decl.servers.length === 0) {
        const d = this.findUpstreamDirective(httpNode, decl.name);
        throw new ConfigError('invalid-value', 'no servers are inside upstream', { file: decl.loc.file, line: d ?? decl.loc.line });
      }
      const peers: UpstreamPeer[] = [];
      for (const s of decl.servers) {
        if (s.unixPath !== undefined) {
          peers.push(this.peer(s.host, 0, s, s.unixPath));
          continue;
        }
        const addrs = isIP(s.host) ? [s.host] : this.scope.hosts.lookup(s.host) ?? [];
        for (const a of addrs) peers.push(this.peer(a, s.port, s));
      }
      this.upstreams.set(decl.name.toLowerCase(), {
        name: decl.name, peers, keepalive: decl.keepalive, keepaliveTimeoutMs: decl.keepaliveTimeoutMs, keepaliveTimeMs: decl.keepaliveTimeMs,
        keepaliveRequests: decl.keepaliveRequests,
        balancer: decl.balancer,
      });
    }
    // every level, upstream blocks too, as the recursive walk did (they hold no proxy_pass)
    const stack = [httpNode];
    while (stack.length > 0) {
      const n = stack.pop()!;
      const pass = n.conf.own(proxy.proxyPass)?.value;
      if (pass?.kind === 'static') this.implicitUpstream(pass.host, pass.port, pass.scheme === 'https' ? 443 : 80, pass.loc);
      const fcgi = n.conf.own(fastcgi.fastcgiPass)?.value;
      if (fcgi?.kind === 'static') this.implicitUpstream(fcgi.host, fcgi.port, undefined, fcgi.loc);
      for (let i = n.children.length - 1; i >= 0; i--) stack.push(n.children[i]!);
    }
  }

  private findUpstreamDirective(httpNode: LevelNode, name: string): number | undefined {
    const node = httpNode.children.find((c) => c.context === 'upstream' && c.directive?.args[0]?.toLowerCase() === name.toLowerCase());
    return node?.directive?.closeLine;
  }

  /** A peer at an IP and port, or (`unixPath`) at `unix:PATH`, with its `server` parameters. */
  private peer(
    addr: string, port: number, s?: { weight: number; backup: boolean; down: boolean; maxFails: number; failTimeoutMs: number }, unixPath?: string,
  ): UpstreamPeer {
    return {
      name: unixPath !== undefined ? addr : isIP(addr) === 6 ? `[${addr}]:${port}` : `${addr}:${port}`, host: addr, port, unixPath,
      weight: s?.weight ?? 1, backup: s?.backup ?? false, down: s?.down ?? false,
      maxFails: s?.maxFails ?? 1, failTimeoutMs: s?.failTimeoutMs ?? 10_000,
    };
  }

  /**
   * The group a static `proxy_pass`/`fastcgi_pass` uses: an `upstream` block
   * of that name, or the host:port resolved now (`ngx_http_upstream_add`,
   * `ngx_http_upstream_init_round_robin`).
   */
  private implicitUpstream(hostText: string, port: number | undefined, defaultPort: number | undefined, loc: SourceLoc): void {
    const explicit = this.scope.upstreams.get(hostText.toLowerCase());
    if (explicit) {
      if (port !== undefined) throw new ConfigError('invalid-value', `upstream "${hostText}" may not have port ${port}`, loc);
      return;
    }
    const key = groupKey(hostText, port);
    if (this.upstreams.has(key)) return;
    if (hostText.startsWith('unix:')) {
      // ngx_parse_unix_domain_url: one peer, the socket file
      const peers = [this.peer(hostText, 0, undefined, hostText.slice('unix:'.length))];
      this.upstreams.set(key, { name: key, peers, keepalive: 0, keepaliveTimeoutMs: 60_000, keepaliveTimeMs: 3_600_000, keepaliveRequests: 1000, balancer: 'round_robin' });
      return;
    }
    const effectivePort = port ?? defaultPort;
    if (effectivePort === undefined) throw new ConfigError('invalid-value', `no port in upstream "${hostText}"`, loc);
    const host = hostText.replace(/^\[|\]$/g, '');
    const addrs = isIP(host) ? [host] : this.scope.hosts.lookup(host);
    if (!addrs) throw new ConfigError('host-not-found', `host not found in upstream "${hostText}"`, loc);
    this.upstreams.set(key, {
      name: key, peers: addrs.map((a) => this.peer(a, effectivePort)), keepalive: 0, keepaliveTimeoutMs: 60_000, keepaliveTimeMs: 3_600_000, keepaliveRequests: 1000,
      balancer: 'round_robin',
    });
  }

  // --- locations -------------------------------------------------------------

  /**
   * `duplicate location "NAME"` among the prefix, exact and named locations
   * of one level (`ngx_http_add_location`'s check, `ngx_http_init_locations`),
   * levels taken in configuration order, nested ones after their parent
   * location and before its next sibling.
   */
  private checkDuplicateLocations(server: LevelNode): void {
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

  /**
   * The locations of a level (a server), indexed, with their nested ones,
   * without recursion. Each location's settings are built in configuration
   * order, a location before those nested in it (nginx's merge order), then
   * the trees are indexed innermost first.
   */
  private locationTree(level: LevelNode): LocationTree | undefined {
    const compiled = new Map<LevelNode, Mutable<CompiledLocation>>();
    const order: LevelNode[] = [];
    const locationsOf = (n: LevelNode): LevelNode[] => n.children.filter((c) => c.context === 'location');
    const stack = locationsOf(level).reverse();
    while (stack.length > 0) {
      const node = stack.pop()!;
      compiled.set(node, this.location(node));
      order.push(node);
      stack.push(...locationsOf(node).reverse());
    }
    const index = (n: LevelNode): LocationTree | undefined => {
      const children = locationsOf(n);
      return children.length === 0 ? undefined : indexLocations(children.map((c) => compiled.get(c)!));
    };
    for (let i = order.length - 1; i >= 0; i--) compiled.get(order[i]!)!.nested = index(order[i]!);
    return index(level);
  }

  /** One location with its settings; `nested` is filled by `locationTree`. */
  private location(node: LevelNode): Mutable<CompiledLocation> {
    const def: LocationDef = node.conf.own(http.locationDef)!.value!;
    const conf = this.locationConf(node);
    const handler = conf.proxy !== undefined || conf.fastcgi !== undefined;
    return {
      match: def.match,
      name: def.name,
      regex: def.regex?.regex,
      namedCaptures: def.regex ? rewrite.namedCaptures(def.regex, this.scope.variables) : [],
      conf,
      nested: undefined,
      autoRedirect: handler && (def.match === 'prefix' || def.match === 'prefix-no-regex' || def.match === 'exact') && def.name.endsWith('/'),
      loc: def.loc,
    };
  }

  /** The merged settings of a level (location, `if` block or server), built once per level. */
  private locationConf(node: LevelNode): LocationConf {
    const cached = this.confCache.get(node.conf);
    if (cached) return cached;
    const c = this.chain(node);
    const vars = this.scope.variables;
    const docRoot = c.get(http.docRoot);
    const rootPath = docRoot ? vars.bind(docRoot.path) : vars.bind(vars.value(this.scope.fullPath('html'), node.directive?.loc ?? { file: '', line: 0 }));
    const indexes = c.list(http.indexFiles);
    const tryFiles = c.get(http.tryFiles);
    const errorPages = new Map<number, ErrorPage>();
    for (const e of c.list(http.errorPages)) {
      if (!errorPages.has(e.code)) errorPages.set(e.code, { target: vars.bind(e.target), overwrite: e.overwrite });
    }
    const realIpSources = c.list(realIpFrom);
    const authUri = c.get(authRequestUri);
    const realm = c.get(authBasicRealm);
    const userFile = c.get(authBasicUserFile);
    const errorLogs = this.errorLogs(c);
    this.errorLogTargets.push(...errorLogs);
    const bodyTemp = c.get(http.clientBodyTempPath) ?? { dir: this.scope.fullPath('client_body_temp'), levels: [] };
    this.tempDirs.add(bodyTemp.dir);
    this.tempDirs.add((c.get(proxy.proxyTempPath) ?? { dir: this.scope.fullPath('proxy_temp') }).dir);
    this.tempDirs.add((c.get(fastcgi.fastcgiTempPath) ?? { dir: this.scope.fullPath('fastcgi_temp') }).dir);
    const expiresConf = c.get(expires);
    const conf: LocationConf = {
      root: { alias: docRoot?.alias ?? false, path: rootPath, aliasRegex: docRoot?.aliasRegex ?? false, aliasLength: docRoot?.aliasLength ?? 0 },
      index: indexes.length > 0 ? indexes.map((i) => vars.bind(i)) : [vars.bind(vars.value('index.html', { file: '', line: 0 }))],
      tryFiles: tryFiles && {
        files: tryFiles.files.map((f) => ({ value: vars.bind(f.value), testDir: f.testDir })),
        fallback: 'code' in tryFiles.fallback ? { code: tryFiles.fallback.code } : { uri: vars.bind(tryFiles.fallback.uri) },
      },
      types: c.get(http.types) ?? http.DEFAULT_TYPES,
      defaultType: c.get(http.defaultType),
      errorPages,
      recursiveErrorPages: c.get(http.recursiveErrorPages),
      internal: node.conf.own(http.internal)?.value ?? false,
      limitExcept: this.limitExcept(node),
      clientMaxBodySizeBytes: c.get(http.clientMaxBodySize),
      clientBodyBufferSizeBytes: c.get(http.clientBodyBufferSize),
      subrequestOutputBufferSizeBytes: c.get(http.subrequestOutputBufferSize),
      clientBodyTempPath: bodyTemp,
      clientBodyInFileOnly: c.get(http.clientBodyInFileOnly),
      clientBodyTimeoutMs: c.get(http.clientBodyTimeoutMs),
      clientHeaderTimeoutMs: c.get(http.clientHeaderTimeoutMs),
      largeClientHeaderBuffers: c.get(http.largeClientHeaderBuffers),
      clientHeaderBufferSizeBytes: c.get(http.clientHeaderBufferSize),
      maxHeaders: c.get(http.maxHeaders),
      mergeSlashes: c.get(http.mergeSlashes),
      underscoresInHeaders: c.get(http.underscoresInHeaders),
      ignoreInvalidHeaders: c.get(http.ignoreInvalidHeaders),
      http2: c.get(http2Enabled),
      http2MaxConcurrentStreams: c.get(http2MaxConcurrentStreams),
      http2BodyPrereadSizeBytes: c.get(http2BodyPrereadSize),
      http2ChunkSizeBytes: c.get(http2ChunkSize),
      logNotFound: c.get(http.logNotFound),
      etag: c.get(http.etag),
      ifModifiedSince: c.get(http.ifModifiedSince),
      maxRanges: c.get(http.maxRanges),
      serverTokens: c.get(http.serverTokens),
      absoluteRedirect: c.get(http.absoluteRedirect),
      serverNameInRedirect: c.get(http.serverNameInRedirect),
      portInRedirect: c.get(http.portInRedirect),
      msiePadding: c.get(http.msiePadding),
      errorLogs,
      accessLogs: this.accessLogs(c),
      script: node.context === 'location' || node.context === 'lif' ? this.script(node.conf) : [],
      access: c.list(accessRules).map((r): AccessRule => ({
        allow: r.allow,
        all: r.match === 'all',
        family: r.match === 'all' ? 'all' : r.match === 'unix' ? 'unix' : r.match.family,
        addr: typeof r.match === 'string' ? [] : r.match.bytes,
        prefixLength: typeof r.match === 'string' ? 0 : r.match.prefixLength,
        text: r.text,
      })),
      satisfy: c.get(http.satisfy),
      authBasic: realm && userFile
        ? { realm: vars.bind(realm), userFile: vars.bind(userFile), confPrefix: userFile.text.startsWith('$') ? this.scope.confPrefix : undefined }
        : undefined,
      addHeaders: c.list(addHeaders).map((h) => ({ name: h.name, value: vars.bind(h.value), always: h.always })),
      addTrailers: c.list(addTrailers).map((h) => ({ name: h.name, value: vars.bind(h.value), always: h.always })),
      proxy: this.proxyConf(node, c),
      keepaliveTimeoutMs: c.get(http.keepaliveTimeoutMs),
      keepaliveRequests: c.get(http.keepaliveRequests),
      keepaliveHeaderSec: c.get(http.keepaliveHeaderSec),
      keepaliveTimeMs: c.get(http.keepaliveTimeMs),
      keepaliveDisable: { msie6: c.get(http.keepaliveDisable).includes('msie6'), safari: c.get(http.keepaliveDisable).includes('safari') },
      sendTimeoutMs: c.get(http.sendTimeoutMs),
      lingering: { close: c.get(http.lingeringClose), timeMs: c.get(http.lingeringTimeMs), timeoutMs: c.get(http.lingeringTimeoutMs) },
      resetTimedoutConnection: c.get(http.resetTimedoutConnection),
      chunkedTransferEncoding: c.get(http.chunkedTransferEncoding),
      expires: expiresConf.kind === 'variable' ? { ...expiresConf, value: this.scope.variables.bind(expiresConf.value) } : expiresConf,
      realIp: realIpSources.length > 0
        ? {
            from: realIpSources, header: c.get(realIpHeader).toLowerCase(), proxyProtocol: c.get(realIpHeader) === 'proxy_protocol',
            recursive: c.get(realIpRecursive),
          }
        : undefined,
      authRequest: authUri === 'off' ? undefined : {
        uri: authUri, sets: c.list(authRequestSets).map((s) => ({ index: s.index, value: vars.bind(s.value), handler: s.handler })),
      },
      fastcgi: this.fastcgiConf(node, c),
      fastcgiSplit: { regex: c.get(fastcgi.fastcgiSplitPathInfo)?.regex, index: c.get(fastcgi.fastcgiIndex) },
      resolver: c.get(http.resolver),
      resolverTimeoutMs: c.get(http.resolverTimeoutMs),
      uninitializedVariableWarn: c.get(rewrite.uninitializedVariableWarn),
      gzip: this.gzipConf(c),
      charset: this.charsetConf(c),
      limitReq: this.limitReqConf(c),
      ssi: {
        enable: c.get(ssi.ssiEnable),
        silentErrors: c.get(ssi.ssiSilentErrors),
        lastModified: c.get(ssi.ssiLastModified),
        valueLengthBytes: c.get(ssi.ssiValueLength),
        types: c.get(ssi.ssiTypes) ?? new Set(ssi.SSI_DEFAULT_TYPES),
      },
      sub: {
        pairs: c.list(sub.subFilters).map((p) => ({ match: vars.bind(p.match), value: vars.bind(p.value) })),
        types: c.get(sub.subFilterTypes) ?? new Set(sub.SUB_DEFAULT_TYPES),
        once: c.get(sub.subFilterOnce),
        lastModified: c.get(sub.subFilterLastModified),
      },
      addition: {
        beforeBody: c.get(addition.addBeforeBody),
        afterBody: c.get(addition.addAfterBody),
        types: c.get(addition.additionTypes) ?? new Set(addition.ADDITION_DEFAULT_TYPES),
      },
    };
    Object.freeze(conf);
    this.confCache.set(node.conf, conf);
    return conf;
  }

  /** A location's `limit_except` block, compiled as a child of the location. */
  private limitExcept(node: LevelNode): LocationConf['limitExcept'] {
    const block = node.context === 'location' ? node.children.find((c) => c.context === 'limit_except') : undefined;
    const methods = block?.conf.own(http.limitExceptMethods)?.value;
    if (!block || !methods) return undefined;
    return { methods: new Set(methods), conf: this.locationConf(block) };
  }

  /** The compression settings of a level (`ngx_http_gzip_merge_conf`, the core module's `gzip_*`). */
  private gzipConf(c: ConfChain): GzipConf {
    return {
      enable: c.get(gzip.gzipEnable),
      level: c.get(gzip.gzipCompLevel),
      windowBits: c.get(gzip.gzipWindowBits),
      memLevel: c.get(gzip.gzipMemLevel),
      minLengthBytes: c.get(gzip.gzipMinLength),
      types: c.get(gzip.gzipTypes) ?? new Set(gzip.GZIP_DEFAULT_TYPES),
      bufferBytes: c.get(gzip.gzipBuffers).sizeBytes,
      static: c.get(gzip.gzipStatic),
      gunzip: c.get(gzip.gunzipEnable),
      gunzipBufferBytes: c.get(gzip.gunzipBuffers).sizeBytes,
      vary: c.get(gzip.gzipVary),
      httpVersion: c.get(gzip.gzipHttpVersion) === '1.0' ? 1000 : 1001,
      proxied: new Set(c.get(gzip.gzipProxied)),
      disableMsie6: c.get(gzip.gzipDisableMsie6),
      disable: c.get(gzip.gzipDisableRegexes),
    };
  }

  /** The charset filter's settings of a level (`ngx_http_charset_merge_loc_conf`); unset charsets are `off`. */
  private charsetConf(c: ConfChain): CharsetConf {
    const bind = (ref: charset.CharsetRef | undefined): CharsetSetting => {
      if (!ref || ref.kind === 'off') return { kind: 'off' };
      if (ref.kind === 'name') return ref;
      const get = this.scope.variables.getter(ref.name)!;
      return { kind: 'variable', get };
    };
    return {
      charset: bind(c.get(charset.charsetSlot)),
      source: bind(c.get(charset.sourceCharsetSlot)),
      override: c.get(charset.overrideCharset),
      types: c.get(charset.charsetTypes) ?? new Set(charset.CHARSET_DEFAULT_TYPES),
      tables: this.scope.charsets,
    };
  }

  /**
   * What `ngx_http_charset_merge_loc_conf` notes on every server and
   * location (in configuration order), then `ngx_http_charset_postconfiguration`:
   * a level that recodes between two named charsets needs a `charset_map`
   * between them. nginx reports it without a place.
   */
  private linkCharsets(servers: readonly LevelNode[]): void {
    const tables = this.scope.charsets;
    for (const node of levelsInOrder(servers)) {
      const c = this.chain(node);
      const dst = c.get(charset.charsetSlot);
      const src = c.get(charset.sourceCharsetSlot);
      if (dst?.kind === 'name' && src?.kind === 'name' && dst.index !== src.index) tables.needRecode(src.index, dst.index);
    }
    const missing = tables.link();
    if (missing) throw new ConfigError('invalid-value', missing);
  }

  /** The limit_req settings of a level (`ngx_http_limit_req_merge_conf`), zones bound once. */
  private limitReqConf(c: ConfChain): LimitReqConf {
    const logLevel = c.get(limitReq.limitReqLogLevel);
    const delayLogLevel = logLevel === 'info' ? 'info' : logLevel === 'notice' ? 'info' : logLevel === 'warn' ? 'notice' : 'warn';
    return {
      limits: c.list(limitReq.limitReqs).map((l) => ({ zone: this.limitReqZone(l.zone), burstMilli: l.burstMilli, delayMilli: l.delayMilli })),
      logLevel,
      delayLogLevel,
      status: c.get(limitReq.limitReqStatus),
      dryRun: c.get(limitReq.limitReqDryRun),
    };
  }

  private limitReqZone(name: string): LimitReqZone {
    let zone = this.limitReqZones.get(name);
    if (!zone) {
      // a zone no limit_req_zone defines is "zero size shared memory zone" once the configuration is read
      const decl = this.scope.limitReqZones.get(name);
      zone = decl
        ? { name, key: this.scope.variables.bind(decl.key), rateMilli: decl.rateMilli, sizeBytes: decl.sizeBytes }
        : { name, key: this.scope.variables.bind(this.scope.variables.value('', { file: '', line: 0 })), rateMilli: 1000, sizeBytes: 0 };
      this.limitReqZones.set(name, zone);
    }
    return zone;
  }

  /**
   * A setting an `if` block takes from its location when it has none of its
   * own (nginx's merge for "noname" locations, e.g. `proxy_pass`).
   */
  private inheritedIntoIf<T>(node: LevelNode, own: (n: LevelNode) => T | undefined): T | undefined {
    for (let n: LevelNode | undefined = node; n; n = n.parent) {
      const v = own(n);
      if (v !== undefined) return v;
      if (n.context !== 'lif' && n.context !== 'limit_except') return undefined;
    }
    return undefined;
  }

  private script(conf: LevelConf): rewrite.ScriptOp[] {
    return rewrite.bindScript(
      conf.ownList(rewrite.script)?.map((e) => e.value) ?? [],
      this.scope.variables,
      (block) => this.locationConf(this.nodeOf.get(block)!),
      (block) => block.ownList(rewrite.script)?.map((e) => e.value) ?? [],
    );
  }

  private proxyConf(node: LevelNode, c: ConfChain): ProxyConf | undefined {
    const pass = this.inheritedIntoIf(node, (n) => n.conf.own(proxy.proxyPass)?.value);
    if (!pass) return undefined;
    const vars = this.scope.variables;
    const set = c.list(proxy.proxySetHeader);
    const names = new Set(set.map((h) => h.name.toLowerCase()));
    // nginx 1.30 sends no Connection header by default: keepalive decides whether the connection is reused
    const cache = bindCache(c, proxyCache, vars, this.scope.cacheZones, vars.value(PROXY_CACHE_KEY, pass.loc), c.get(proxy.proxyIgnoreHeaders));
    const defaults: [string, string][] = [
      ['Host', '$proxy_host'], ['Connection', ''], ['TE', ''], ['Keep-Alive', ''], ['Expect', ''], ['Upgrade', ''],
      // ngx_http_proxy_cache_headers: with a cache, the client's validators and ranges are not passed
      ...(cache ? CACHE_REQUEST_HEADERS : []),
    ];
    const headers = [
      ...set.map((h) => ({ name: h.name, lowerName: h.name.toLowerCase(), value: vars.bind(h.value) })),
      ...defaults.filter(([n]) => !names.has(n.toLowerCase())).map(([name, value]) => ({
        name, lowerName: name.toLowerCase(), value: vars.bind(vars.value(value, pass.loc)),
      })),
    ];
    const hide = new Set(['date', 'server', 'x-pad', 'x-accel-expires', 'x-accel-redirect', 'x-accel-limit-rate',
      'x-accel-buffering', 'x-accel-charset']);
    for (const h of c.list(proxy.proxyHideHeader)) hide.add(h.toLowerCase());
    for (const h of c.list(proxy.proxyPassHeader)) hide.delete(h.toLowerCase());
    const redirects = c.list(proxy.proxyRedirect);
    const method = c.get(proxy.proxyMethod);
    const setBody = c.get(proxy.proxySetBody);
    return {
      target: pass.kind === 'static'
        ? {
            kind: 'static', scheme: pass.scheme, group: groupKey(pass.host, pass.port), uri: pass.uri,
            // ngx_http_proxy_set_vars: a unix domain socket's Host is `localhost`
            hostHeader: pass.host.startsWith('unix:') ? 'localhost'
              : pass.port === undefined || pass.port === (pass.scheme === 'https' ? 443 : 80) ? pass.host
              : `${pass.host}:${pass.port}`,
          }
        : { kind: 'variable', url: vars.bind(pass.url) },
      locationPrefix: pass.locationPrefix,
      headers,
      headerNames: new Set(headers.map((h) => h.lowerName)),
      httpVersion: c.get(proxy.proxyHttpVersion),
      hideHeaders: hide,
      passRequestBody: c.get(proxy.proxyPassRequestBody),
      passRequestHeaders: c.get(proxy.proxyPassRequestHeaders),
      connectTimeoutMs: c.get(proxy.proxyConnectTimeoutMs),
      sendTimeoutMs: c.get(proxy.proxySendTimeoutMs),
      readTimeoutMs: c.get(proxy.proxyReadTimeoutMs),
      bufferSizeBytes: c.get(proxy.proxyBufferSize),
      interceptErrors: c.get(proxy.proxyInterceptErrors),
      redirect: redirects.length === 0 || redirects.includes('default')
        ? 'default'
        : redirects.includes('off')
          ? 'off'
          : redirects.filter((r): r is Exclude<typeof r, string> => typeof r !== 'string')
            .map((r) => ('regex' in r ? { regex: r.regex.regex, to: vars.bind(r.to) } : { from: vars.bind(r.from), to: vars.bind(r.to) })),
      ignoreClientAbort: c.get(proxy.proxyIgnoreClientAbort),
      buffering: c.get(proxy.proxyBuffering),
      accelBuffering: !c.get(proxy.proxyIgnoreHeaders).includes('X-Accel-Buffering'),
      accelRedirect: !c.get(proxy.proxyIgnoreHeaders).includes('X-Accel-Redirect'),
      requestBuffering: c.get(proxy.proxyRequestBuffering),
      memoryBytes: c.get(proxy.proxyBuffers).count * c.get(proxy.proxyBuffers).sizeBytes,
      bufferBytes: c.get(proxy.proxyBuffers).sizeBytes,
      tempPath: c.get(proxy.proxyTempPath) ?? { dir: this.scope.fullPath('proxy_temp'), levels: [] },
      maxTempFileBytes: c.get(proxy.proxyMaxTempFileSize),
      ...spoolSizes(c, PROXY_MERGE),
      ...nextUpstreamConf(c, PROXY_MERGE),
      tls: this.proxyTlsConf(node, c),
      method: method && vars.bind(method),
      setBody: setBody && vars.bind(setBody),
      cookieDomains: this.cookieRewrites(c.list(proxy.proxyCookieDomain)),
      cookiePaths: this.cookieRewrites(c.list(proxy.proxyCookiePath)),
      cookieFlags: this.cookieFlags(c.list(proxy.proxyCookieFlags)),
      cache,
    };
  }

  /** The bound `proxy_cookie_domain`/`_path` rules of a location; undefined for none or `off`. */
  private cookieRewrites(rules: readonly (proxy.CookieRewriteDef | 'off')[]): CookieRewrite[] | undefined {
    const vars = this.scope.variables;
    const bound = rules.filter((r): r is proxy.CookieRewriteDef => r !== 'off').map((r) => ({
      match: this.cookieMatch(r.match), replacement: vars.bind(r.replacement),
    }));
    return bound.length > 0 ? bound : undefined;
  }

  /** The bound `proxy_cookie_flags` rules of a location; undefined for none or `off`. */
  private cookieFlags(rules: readonly (proxy.CookieFlagsDef | 'off')[]): CookieFlags[] | undefined {
    const vars = this.scope.variables;
    const bound = rules.filter((r): r is proxy.CookieFlagsDef => r !== 'off').map((r) => ({
      cookie: this.cookieMatch(r.cookie), flags: r.flags.map((f) => vars.bind(f)),
    }));
    return bound.length > 0 ? bound : undefined;
  }

  private cookieMatch(m: proxy.CookieRewriteDef['match']): CookieMatch {
    return m.kind === 'regex' ? { kind: 'regex', regex: m.regex.regex } : { kind: 'value', value: this.scope.variables.bind(m.value) };
  }

  /** The upstream TLS settings read for `node`, with `proxy_ssl_name` bound. */
  private proxyTlsConf(node: LevelNode, c: ConfChain): UpstreamTlsConf | undefined {
    const loaded = this.proxyTls.get(node);
    if (!loaded) return undefined;
    const { certificateSources, ...settings } = loaded;
    const vars = this.scope.variables;
    const name = c.get(proxy.proxySslName);
    return {
      ...settings,
      name: name && vars.bind(name),
      certificateFiles: certificateSources && {
        cert: vars.bind(certificateSources.cert), key: vars.bind(certificateSources.key), confPrefix: this.scope.confPrefix,
      },
    };
  }

  private fastcgiConf(node: LevelNode, c: ConfChain): FastcgiConf | undefined {
    const pass = this.inheritedIntoIf(node, (n) => n.conf.own(fastcgi.fastcgiPass)?.value);
    if (!pass) return undefined;
    const vars = this.scope.variables;
    const params = c.list(fastcgi.fastcgiParams).map((p) => ({ name: p.name, value: vars.bind(p.value), ifNotEmpty: p.ifNotEmpty }));
    const cache = bindCache(c, fastcgiCache, vars, this.scope.cacheZones, vars.value('', pass.loc), c.get(fastcgi.fastcgiIgnoreHeaders));
    if (cache) {
      // ngx_http_fastcgi_cache_headers: the client's validators and ranges are not passed, as params only when not empty
      const set = new Set(params.map((p) => p.name.toUpperCase()));
      for (const [name, value] of CACHE_REQUEST_HEADERS) {
        const param = `HTTP_${name.toUpperCase().replace(/-/g, '_')}`;
        if (!set.has(param)) params.push({ name: param, value: vars.bind(vars.value(value, pass.loc)), ifNotEmpty: true });
      }
    }
    const hide = new Set(['status', 'x-accel-expires', 'x-accel-redirect', 'x-accel-limit-rate', 'x-accel-buffering', 'x-accel-charset']);
    for (const h of c.list(fastcgi.fastcgiHideHeader)) hide.add(h.toLowerCase());
    for (const h of c.list(fastcgi.fastcgiPassHeader)) hide.delete(h.toLowerCase());
    const buffers = c.get(fastcgi.fastcgiBuffers);
    return {
      target: pass.kind === 'static' ? { kind: 'group', group: groupKey(pass.host, pass.port) }
        : pass.kind === 'unix' ? { kind: 'unix', path: pass.path } : { kind: 'variable', address: vars.bind(pass.address) },
      params,
      paramNames: new Set(params.map((p) => p.name.toUpperCase())),
      index: c.get(fastcgi.fastcgiIndex),
      splitPathInfo: c.get(fastcgi.fastcgiSplitPathInfo)?.regex,
      connectTimeoutMs: c.get(fastcgi.fastcgiConnectTimeoutMs),
      sendTimeoutMs: c.get(fastcgi.fastcgiSendTimeoutMs),
      readTimeoutMs: c.get(fastcgi.fastcgiReadTimeoutMs),
      bufferSizeBytes: c.get(fastcgi.fastcgiBufferSize),
      buffering: c.get(fastcgi.fastcgiBuffering),
      accelBuffering: !c.get(fastcgi.fastcgiIgnoreHeaders).includes('X-Accel-Buffering'),
      accelRedirect: !c.get(fastcgi.fastcgiIgnoreHeaders).includes('X-Accel-Redirect'),
      requestBuffering: c.get(fastcgi.fastcgiRequestBuffering),
      memoryBytes: buffers.count * buffers.sizeBytes,
      bufferBytes: buffers.sizeBytes,
      tempPath: c.get(fastcgi.fastcgiTempPath) ?? { dir: this.scope.fullPath('fastcgi_temp'), levels: [] },
      maxTempFileBytes: c.get(fastcgi.fastcgiMaxTempFileSize),
      ...spoolSizes(c, FASTCGI_MERGE),
      interceptErrors: c.get(fastcgi.fastcgiInterceptErrors),
      keepConn: c.get(fastcgi.fastcgiKeepConn),
      hideHeaders: hide,
      passRequestBody: c.get(fastcgi.fastcgiPassRequestBody),
      passRequestHeaders: c.get(fastcgi.fastcgiPassRequestHeaders),
      ignoreClientAbort: c.get(fastcgi.fastcgiIgnoreClientAbort),
      catchStderr: c.list(fastcgi.fastcgiCatchStderr),
      ...nextUpstreamConf(c, FASTCGI_MERGE),
      cache,
    };
  }

  // --- logs --------------------------------------------------------------------

  private compileLogFormats(): void {
    const vars = this.scope.variables;
    this.logFormats.set('combined', compileLogFormat('combined', COMBINED_FORMAT, 'default', vars));
    for (const f of this.scope.logFormats.values()) this.logFormats.set(f.name, compileLogFormat(f.name, f.text, f.escape, vars));
  }

  private accessLogs(c: ConfChain): AccessLogTarget[] {
    const entries = c.list(accessLogs);
    if (entries.some((e) => e.off)) return [];
    const list = entries.length > 0
      ? entries.flatMap((e) => (e.off ? [] : [{
          path: e.path, pathValue: e.pathValue && this.scope.variables.bind(e.pathValue), openFileCache: c.get(openLogFileCache) ?? undefined,
          gzipLevel: e.gzipLevel, format: this.logFormats.get(e.format)!, condition: e.condition && this.scope.variables.bind(e.condition),
          bufferBytes: e.bufferBytes ?? 0, flushMs: e.flushMs ?? (e.bufferBytes ? 1000 : 0),
        }]))
      : [{
          path: this.scope.fullPath('logs/access.log'), pathValue: undefined, openFileCache: undefined, gzipLevel: 0,
          format: this.logFormats.get('combined')!, condition: undefined, bufferBytes: 0, flushMs: 0,
        }];
    this.accessLogTargets.push(...list);
    return list;
  }

  // --- servers -------------------------------------------------------------------

  /**
   * Loads a server's certificates (merged from http level), pairing
   * `ssl_certificate` and `ssl_certificate_key` in order
   * (`ngx_http_ssl_merge_srv_conf`). When any of them has variables, none
   * is read now: all are bound to be read per handshake
   * (`ngx_http_ssl_compile_certificates`). A server that gets a TLS context
   * (a certificate or `ssl_reject_handshake on`) has its `ssl_ciphers`
   * checked first, as nginx 1.30 does before it reads a certificate.
   * @throws ConfigError `no "ssl_certificate_key" is defined for certificate "…"`, the errors of `checkCiphers` and the loading errors of `loadCertificatePair`
   */
  private certificates(node: LevelNode): ServerCertificates {
    const chain = this.chain(node);
    const certs = chain.list(ssl.sslCertificates);
    const keys = chain.list(ssl.sslCertificateKeys);
    if (keys.length < certs.length) {
      throw new ConfigError('file', `no "ssl_certificate_key" is defined for certificate "${certs[certs.length - 1]!.text}"`);
    }
    if (certs.length > 0 || chain.get(ssl.sslRejectHandshake)) this.checkCiphersOnce(chain.get(ssl.sslCiphers));
    const passwords = chain.get(ssl.sslPasswords);
    const perHandshake = certs.some((c, i) => hasVariables(c) || hasVariables(keys[i]!))
      ? certs.map((cert, i) => ({ cert, key: keys[i]! }))
      : undefined;
    const loaded = perHandshake ? [] : certs.map((c, i) => {
      const [cert, key] = [this.scope.confPath(c.text), this.scope.confPath(keys[i]!.text)];
      const cacheKey = `${cert}\0${key}\0${passwords?.join('\n') ?? ''}`;
      let pair = this.certificateCache.get(cacheKey);
      if (!pair) this.certificateCache.set(cacheKey, (pair = loadCertificatePair(cert, key, false, passwords)));
      return pair;
    });
    if (certs.length === 0 && !chain.get(ssl.sslRejectHandshake)) return { loaded, perHandshake, passwords, files: undefined };
    return { loaded, perHandshake, passwords, files: this.tlsFiles(chain) };
  }

  /**
   * `ngx_http_ssl_init`: on every `listen … ssl` address, the default server
   * needs a certificate, or `ssl_reject_handshake on`, in which case every
   * other server of the address needs one of the two (a handshake's
   * certificate comes from the server SNI names, else the default server's).
   * @throws ConfigError `no "ssl_certificate" is defined for the "listen ... ssl" directive`, at the server
   */
  private checkSslListens(servers: readonly LevelNode[], certificates: readonly ServerCertificates[]): void {
    const addrs = new Map<string, { ssl: boolean; defaultServer: number | undefined; servers: number[] }>();
    servers.forEach((s, i) => {
      for (const { value: l } of s.conf.ownList(http.listens) ?? []) {
        const key = `${l.host}|${l.port}`;
        let a = addrs.get(key);
        if (!a) addrs.set(key, (a = { ssl: false, defaultServer: undefined, servers: [] }));
        a.ssl ||= l.ssl;
        if (l.defaultServer && a.defaultServer === undefined) a.defaultServer = i;
        if (!a.servers.includes(i)) a.servers.push(i);
      }
    });
    const hasCertificate = (i: number): boolean => certificates[i]!.loaded.length > 0 || certificates[i]!.perHandshake !== undefined;
    const rejects = (i: number): boolean => this.chain(servers[i]!).get(ssl.sslRejectHandshake);
    const refuse = (i: number): never => {
      throw new ConfigError('file', 'no "ssl_certificate" is defined for the "listen ... ssl" directive', servers[i]!.directive!.loc);
    };
    for (const a of addrs.values()) {
      if (!a.ssl) continue;
      const first = a.defaultServer ?? a.servers[0]!;
      if (hasCertificate(first)) continue;
      if (!rejects(first)) refuse(first);
      for (const i of a.servers) if (!hasCertificate(i) && !rejects(i)) refuse(i);
    }
  }

  private server(node: LevelNode, certificates: ServerCertificates): VirtualServer {
    const names = node.conf.ownList(http.serverNames)?.map((e) => e.value) ?? [];
    const first = names[0]?.name ?? '';
    const chain = this.chain(node);
    return {
      name: first.startsWith('.') ? first.slice(1) : first,
      script: this.script(node.conf),
      locations: this.locationTree(node) ?? emptyTree(),
      conf: this.locationConf(node),
      tls: certificates.loaded.length > 0 || certificates.perHandshake || chain.get(ssl.sslRejectHandshake)
        ? {
            certificates: certificates.loaded,
            certificateValues: this.perHandshakeCertificates(node, certificates),
            protocols: chain.get(ssl.sslProtocols),
            ciphers: chain.get(ssl.sslCiphers),
            preferServerCiphers: chain.get(ssl.sslPreferServerCiphers),
            rejectHandshake: chain.get(ssl.sslRejectHandshake),
            sessionTimeoutSec: chain.get(ssl.sslSessionTimeoutSec),
            sessionTickets: chain.get(ssl.sslSessionTickets),
            sessionCache: chain.get(ssl.sslSessionCache),
            ecdhCurve: chain.get(ssl.sslEcdhCurve),
            ...certificates.files!,
          }
        : undefined,
      verifyClient: chain.get(ssl.sslVerifyClient),
      loc: node.directive!.loc,
    };
  }

  private perHandshakeCertificates(node: LevelNode, { perHandshake, passwords }: ServerCertificates): PerHandshakeCertificates | undefined {
    if (!perHandshake) return undefined;
    const vars = this.scope.variables;
    return {
      pairs: perHandshake.map((p) => ({ cert: vars.bind(p.cert), key: vars.bind(p.key) })),
      confPrefix: this.scope.confPrefix,
      passwords,
      cache: this.chain(node).get(ssl.sslCertificateCache),
    };
  }

  /**
   * The files of a TLS server after its certificates, in the order of
   * `ngx_http_ssl_merge_srv_conf`: with `ssl_verify_client`, the CA
   * certificates of `ssl_client_certificate` (`on` and `optional` need them
   * or `ssl_trusted_certificate`); then `ssl_trusted_certificate`,
   * `ssl_crl`, `ssl_dhparam` and the `ssl_ecdh_curve` list, each read or
   * checked whether or not client certificates are asked for.
   * @throws ConfigError nginx's `[emerg]`s
   */
  private tlsFiles(chain: ConfChain): TlsFiles {
    const verifyClient = chain.get(ssl.sslVerifyClient);
    const caPath = chain.get(ssl.sslClientCertificate);
    const trustedPath = chain.get(ssl.sslTrustedCertificate);
    if (verifyClient !== 'off' && verifyClient !== 'optional_no_ca' && caPath === undefined && trustedPath === undefined) {
      throw new ConfigError('invalid-value', 'no ssl_client_certificate or ssl_trusted_certificate for ssl_verify_client');
    }
    const clientCa = verifyClient !== 'off' && caPath !== undefined ? loadTrustedCertificates(caPath) : undefined;
    const read = <T>(path: string | undefined, load: (full: string) => T): T | undefined => (path === undefined ? undefined : load(this.scope.confPath(path)));
    const trusted = read(trustedPath, loadTrustedCertificates);
    const crl = read(chain.get(ssl.sslCrl), loadCrl);
    const dhparam = read(chain.get(ssl.sslDhparam), loadDhparam);
    const curves = chain.get(ssl.sslEcdhCurve);
    if (!this.checkedCurves.has(curves)) {
      checkEcdhCurve(curves);
      this.checkedCurves.add(curves);
    }
    return { verifyClient, clientCa, trusted, verifyDepth: chain.get(ssl.sslVerifyDepth), crl, dhparam };
  }

  private listenGroups(servers: readonly { node: LevelNode; server: VirtualServer }[]): ListenGroup[] {
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
      loc: SourceLoc;
    }
    const addrs = new Map<string, Addr>();
    for (const s of servers) {
      const own = s.node.conf.ownList(http.listens)?.map((e) => e.value) ?? [{
        host: '0.0.0.0', port: DEFAULT_PORT, addrText: `0.0.0.0:${DEFAULT_PORT}`, wildcard: true, defaultServer: false, ssl: false,
        http2: false, udp: false, ipv6only: true, setsOptions: false, proxyProtocol: false, loc: s.server.loc,
      }];
      const http2 = this.chain(s.node).get(http2Enabled);
      for (const l of own) {
        const key = `${l.host}|${l.port}`;
        let a = addrs.get(key);
        if (!a) {
          a = {
            host: l.host, port: l.port, addrText: l.addrText, unixPath: l.unixPath, ssl: false, http2: false, http2Listen: false, proxyProtocol: false,
            optionsSet: false, defaultServer: undefined, servers: [], loc: l.loc,
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
        if (!a.servers.some((x) => x.server === s.server)) a.servers.push(s);
      }
    }
    const set = (a: Addr): ServerSet => this.serverSet(a.addrText, a.defaultServer ?? a.servers[0]!.server, a.servers, a.http2Listen);
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

  private serverSet(
    addrText: string, defaultServer: VirtualServer, servers: readonly { server: VirtualServer; node: LevelNode }[], http2Listen: boolean,
  ): ServerSet {
    const exact = new Map<string, VirtualServer>();
    const heads: [string, VirtualServer][] = [];
    const tails: [string, VirtualServer][] = [];
    const regexes: ServerSet['regexes'][number][] = [];
    for (const { server, node } of servers) {
      const names = node.conf.ownList(http.serverNames)?.map((e) => e.value) ?? [{ name: '', regex: undefined }];
      for (const n of names) {
        if (n.regex) {
          regexes.push({ regex: n.regex.regex, captureCount: n.regex.captureCount, server, namedCaptures: rewrite.namedCaptures(n.regex, this.scope.variables) });
          continue;
        }
        const add = (list: [string, VirtualServer][] | Map<string, VirtualServer>, key: string): void => {
          const taken = list instanceof Map ? list.get(key) : list.find(([k]) => k === key)?.[1];
          if (taken && taken !== server) {
            this.warn({ level: 'warn', code: 'conflicting-server-name', text: `conflicting server name "${n.name}" on ${addrText}, ignored`, loc: undefined });
            return;
          }
          if (taken) return;
          if (list instanceof Map) list.set(key, server);
          else list.push([key, server]);
        };
        if (n.name.startsWith('*.')) add(heads, n.name.slice(1));
        else if (n.name.startsWith('.')) {
          add(exact, n.name.slice(1));
          add(heads, n.name);
        } else if (n.name.endsWith('.*')) add(tails, n.name.slice(0, -1));
        else add(exact, n.name);
      }
    }
    // ngx_http_optimize_servers: one server on an address gets no name table unless a regex of its names captures,
    // so neither SNI nor Host is looked up there (and nginx's 421 rule never applies)
    if (servers.length === 1 && !regexes.some((x) => x.captureCount > 0)) {
      return { defaultServer, http2Listen, exact: new Map(), headWildcards: [], tailWildcards: [], regexes: [] };
    }
    heads.sort((a, b) => b[0].length - a[0].length);
    tails.sort((a, b) => b[0].length - a[0].length);
    return { defaultServer, http2Listen, exact, headWildcards: heads, tailWildcards: tails, regexes };
  }
}

interface MutablePrefixNode extends PrefixNode {
  location: CompiledLocation | undefined;
  readonly children: Map<string, MutablePrefixNode>;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

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

function emptyTree(): LocationTree {
  return { exact: new Map(), prefixes: { location: undefined, children: new Map() }, regexes: [], named: new Map() };
}

/** The upstream group key of a static address: its upstream block's name, or `host:port`. */
function groupKey(host: string, port: number | undefined): string {
  return port === undefined ? host.toLowerCase() : `${host.toLowerCase()}:${port}`;
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
