/**
 * The compiled configuration the engine serves from: listen sockets, server
 * names, location trees, and for every location the merged settings of every
 * module, with values already bound. Built by `compile.ts`, frozen, and
 * swapped whole on reload.
 */
import type { SourceLoc } from '../parser/ast.js';
import type { ConfigWarning } from '../errors.js';
import type { NamedCapture } from './regex.js';
import type { VariableGetter } from './variables.js';
import type { BrowserConf, RefererConf, SecureLinkConf, UseridConf } from './request-view.js';
import type { AccessRule } from './modules/access.js';
import type { AdditionConf } from './modules/addition.js';
import type { AuthBasicConf } from './modules/auth-basic.js';
import type { AuthRequestConf } from './modules/auth-request.js';
import type { AutoindexConf } from './modules/autoindex.js';
import type { MirrorConf } from './modules/mirror.js';
import type { Mp4Conf } from './modules/mp4.js';
import type { CacheZoneConf } from './modules/cache.js';
import type { CharsetConf } from './modules/charset.js';
import type { ErrorLogTarget, MainConf } from './modules/core.js';
import type { FastcgiConf } from './modules/fastcgi.js';
import type { UwsgiConf } from './modules/uwsgi.js';
import type { DavConf } from './modules/dav.js';
import type { MemcachedConf } from './modules/memcached.js';
import type { CgiConf } from './modules/cgi-upstream.js';
import type { GzipConf } from './modules/gzip.js';
import type { AddHeader, ExpiresConf } from './modules/headers.js';
import type { Http2LocConf } from './modules/http2.js';
import type { ContentHandlerName, HttpCoreLocConf } from './modules/http-core.js';
import type { LimitConnConf } from './modules/limit-conn.js';
import type { LimitReqConf } from './modules/limit-req.js';
import type { AccessLogTarget } from './modules/log.js';
import type { ProxyConf } from './modules/proxy.js';
import type { RealIpConf } from './modules/realip.js';
import type { ScriptOpOf } from './modules/rewrite.js';
import type { SsiConf } from './modules/ssi.js';
import type { TlsServerConf } from './modules/ssl.js';
import type { StreamSocket, StreamTable } from './modules/stream.js';
import type { SubFilterConf } from './modules/sub.js';
import type { UpstreamGroup } from './modules/upstream.js';

// the modules' compiled types, where the runtime has always found them
export type { AccessRule } from './modules/access.js';
export type { AdditionConf } from './modules/addition.js';
export type { AuthBasicConf } from './modules/auth-basic.js';
export type { AuthRequestConf } from './modules/auth-request.js';
export type { AutoindexConf, AutoindexFormat } from './modules/autoindex.js';
export type { MirrorConf } from './modules/mirror.js';
export type { CharsetConf, CharsetSetting } from './modules/charset.js';
export type { ErrorLogTarget, MainConf } from './modules/core.js';
export type { FastcgiConf } from './modules/fastcgi.js';
export type { UwsgiConf } from './modules/uwsgi.js';
export type { MemcachedConf } from './modules/memcached.js';
export type { CgiConf, CgiTarget } from './modules/cgi-upstream.js';
export type { GzipConf } from './modules/gzip.js';
export type { AddHeader, ExpiresConf } from './modules/headers.js';
export type { Http2LocConf } from './modules/http2.js';
export type { ErrorPage, HttpCoreLocConf, TryFiles } from './modules/http-core.js';
export type { LimitConnConf, LimitConnZone } from './modules/limit-conn.js';
export type { LimitReqConf, LimitReqZone } from './modules/limit-req.js';
export type { CompiledLogFormat } from './log-format.js';
export type { AccessLogTarget } from './modules/log.js';
export type { CookieFlags, CookieMatch, CookieRewrite, ProxyConf, ProxyHeader, ProxyTarget } from './modules/proxy.js';
export type { UpstreamTlsConf } from './modules/proxy-ssl.js';
export type { RealIpConf } from './modules/realip.js';
export type { SsiConf } from './modules/ssi.js';
export type { PerHandshakeCertificates, TlsServerConf } from './modules/ssl.js';
export type { StreamAccessLog, StreamContent, StreamListenGroup, StreamProxyConf, StreamServer, StreamSocket, StreamTable } from './modules/stream.js';
export type { SubFilterConf } from './modules/sub.js';
export type { NextUpstreamConf, StickyConf, UpstreamConf, UpstreamGroup, UpstreamPeer } from './modules/upstream.js';
export type { CacheConf } from './modules/cache.js';

/** One listening socket: an address:port and the servers that listen on it. */
export interface ListenGroup {
  /** Address to bind: an IP literal, `0.0.0.0`/`::` for wildcards, `unix:PATH` for a unix domain socket. */
  readonly host: string;
  /** The TCP port; 0 for a unix domain socket. */
  readonly port: number;
  /** nginx's text for this address, `127.0.0.1:80`, `0.0.0.0:80`, `[::]:80`, `unix:/run/app.sock`. */
  readonly addrText: string;
  /** The socket file of a `listen unix:PATH`. */
  readonly unixPath: string | undefined;
  readonly ssl: boolean;
  readonly http2: boolean;
  /** `listen … proxy_protocol`: connections start with a PROXY protocol header. */
  readonly proxyProtocol: boolean;
  /** Servers by the local address a connection arrived on (one entry, the bound address, unless this is a wildcard that also serves specific addresses). */
  readonly byLocalAddr: ReadonlyMap<string, ServerSet>;
  /** The servers for any other local address of a wildcard socket. */
  readonly servers: ServerSet;
  readonly loc: SourceLoc;
}

/** The servers reachable on one address:port, for name-based selection. */
export interface ServerSet {
  readonly defaultServer: VirtualServer;
  /** A `listen … http2` of the address (nginx's `addr_conf->http2`): HTTP/2 for every server there. */
  readonly http2Listen: boolean;
  readonly exact: ReadonlyMap<string, VirtualServer>;
  /** `*.example.com` and `.example.com` names: suffix (with the leading dot) → server, longest first. */
  readonly headWildcards: readonly (readonly [string, VirtualServer])[];
  /** `www.example.*` names: prefix (with the trailing dot) → server, longest first. */
  readonly tailWildcards: readonly (readonly [string, VirtualServer])[];
  readonly regexes: readonly ServerRegex[];
}

/** A `server_name ~regex`. */
export interface ServerRegex {
  readonly regex: RegExp;
  /** Capture groups of the regex: any makes nginx build a name table even for a lone server. */
  readonly captureCount: number;
  readonly server: VirtualServer;
  /** Indexes of the named captures that become variables. */
  readonly namedCaptures: readonly NamedCapture[];
}

/** A bound rewrite directive; an `if` in a location carries its block's `LocationConf`. */
export type ScriptOp = ScriptOpOf<LocationConf>;

/** One `server { … }` block. */
export interface VirtualServer {
  /** The first `server_name`, or `""`: what `$server_name` and the error log's `server:` show. */
  readonly name: string;
  /** Rewrite directives at server level, run before the location is chosen. */
  readonly script: readonly ScriptOp[];
  readonly locations: LocationTree;
  /** The server-level merged settings, in effect until a location is chosen. */
  readonly conf: LocationConf;
  readonly tls: TlsServerConf | undefined;
  /**
   * `ssl_verify_client` of the server, with or without a certificate of its
   * own (nginx's `sscf->verify`, checked per request in `ngx_http_process_request`).
   */
  readonly verifyClient: 'off' | 'on' | 'optional' | 'optional_no_ca';
  readonly loc: SourceLoc;
}

/** Locations of one level, indexed as `ngx_http_init_locations` does. */
export interface LocationTree {
  /** `location = /path`. */
  readonly exact: ReadonlyMap<string, CompiledLocation>;
  /** Prefix locations as a character trie, walked once per lookup. */
  readonly prefixes: PrefixNode;
  /** `~` and `~*` locations in configuration order. */
  readonly regexes: readonly CompiledLocation[];
  /** `@name` locations. */
  readonly named: ReadonlyMap<string, CompiledLocation>;
}

/** A node of the prefix trie. */
export interface PrefixNode {
  readonly location: CompiledLocation | undefined;
  readonly children: ReadonlyMap<string, PrefixNode>;
}

/** How a location matches, nginx's location modifiers. */
export type LocationMatch = 'exact' | 'prefix' | 'prefix-no-regex' | 'regex' | 'regex-caseless' | 'named';

/** One `location` block. */
export interface CompiledLocation {
  readonly match: LocationMatch;
  /** The URI, regex source or `@name` as written. */
  readonly name: string;
  readonly regex: RegExp | undefined;
  readonly namedCaptures: readonly NamedCapture[];
  readonly conf: LocationConf;
  readonly nested: LocationTree | undefined;
  /**
   * For a prefix location ending in `/` whose handler is proxy/fastcgi: a
   * request for the URI without the slash is redirected (nginx's auto_redirect).
   */
  readonly autoRedirect: boolean;
  readonly loc: SourceLoc;
}

/**
 * All settings a request needs from its location, merged from the levels
 * above: the core module's, then each module's conf of the level.
 */
export interface LocationConf extends HttpCoreLocConf, Http2LocConf {
  /**
   * The location's `limit_except` block: the methods it lets through (GET
   * brings HEAD), and the settings a request with another method uses
   * instead of the location's (`ngx_http_update_location_config`).
   */
  readonly limitExcept: { readonly methods: ReadonlySet<string>; readonly conf: LocationConf } | undefined;
  readonly accessLogs: readonly AccessLogTarget[];
  /** Location-level rewrite directives (and those of an `if` block). */
  readonly script: readonly ScriptOp[];
  readonly access: readonly AccessRule[];
  readonly authBasic: AuthBasicConf | undefined;
  readonly addHeaders: readonly AddHeader[];
  /** `add_trailer`: trailers of responses sent in chunks (HTTP/1.1) or over HTTP/2. */
  readonly addTrailers: readonly AddHeader[];
  readonly proxy: ProxyConf | undefined;
  /** `expires`; with variables, parsed per response. */
  readonly expires: ExpiresConf;
  readonly realIp: RealIpConf | undefined;
  readonly authRequest: AuthRequestConf | undefined;
  /** `mirror`: background subrequests of the main request before its content phase. */
  readonly mirror: MirrorConf | undefined;
  readonly fastcgi: FastcgiConf | undefined;
  readonly uwsgi: UwsgiConf | undefined;
  readonly scgi: CgiConf | undefined;
  /** `grpc_pass` and its settings, in the proxy's shape. */
  readonly grpc: ProxyConf | undefined;
  readonly memcached: MemcachedConf | undefined;
  /** `fastcgi_split_path_info` and `fastcgi_index`, for `$fastcgi_script_name` and `$fastcgi_path_info`. */
  readonly fastcgiSplit: { readonly regex: RegExp | undefined; readonly index: string | undefined };
  readonly uninitializedVariableWarn: boolean;
  /** `rewrite_log`: the level's rewrite directives trace their regex matches at notice level. */
  readonly rewriteLog: boolean;
  readonly gzip: GzipConf;
  readonly charset: CharsetConf;
  readonly limitReq: LimitReqConf;
  readonly limitConn: LimitConnConf;
  readonly ssi: SsiConf;
  readonly sub: SubFilterConf;
  readonly addition: AdditionConf;
  /**
   * The level's content handler (`proxy_pass`, `fastcgi_pass`, `empty_gif`,
   * `stub_status`: the last of them in the level, as in nginx); undefined
   * for the static, index and autoindex handlers.
   */
  readonly contentHandler: ContentHandlerName | undefined;
  /** `autoindex`, `autoindex_format`, `autoindex_localtime`, `autoindex_exact_size`. */
  readonly autoindex: AutoindexConf;
  /** `random_index`: a directory URI goes to a file of the directory picked at random. */
  readonly randomIndex: boolean;
  /** `dav_methods` and its kin: what the WebDAV handler does where no content handler is set. */
  readonly dav: DavConf;
  readonly secureLink: SecureLinkConf | undefined;
  /** `valid_referers`, for `$invalid_referer`. */
  readonly referers: RefererConf | undefined;
  /** The userid filter's settings (`userid`, `userid_name` …). */
  readonly userid: UseridConf;
  /** `modern_browser`, `ancient_browser` and their values. */
  readonly browser: BrowserConf;
  /** `slice`: the size of the pieces in bytes, 0 for none. */
  readonly sliceBytes: number;
  /** `mp4_buffer_size`, `mp4_max_buffer_size`, `mp4_start_key_frame`. */
  readonly mp4: Mp4Conf;
}

/** The compiled configuration. */
export interface RouteTable {
  readonly main: MainConf;
  readonly listens: readonly ListenGroup[];
  /** The stream module's listening sockets (one per wildcard, as nginx binds them), which `-t` binds as nginx does. */
  readonly streamListens: readonly StreamSocket[];
  /** The stream module's servers and sockets; undefined without a `stream` block. */
  readonly stream: StreamTable | undefined;
  /** Size of the per-request variable array. */
  readonly variableCount: number;
  /** A variable's getter by name, at request time (`ngx_http_get_variable`); undefined for an unknown name. */
  readonly variable: (name: string) => VariableGetter | undefined;
  readonly upstreams: ReadonlyMap<string, UpstreamGroup>;
  /** Every access-log target of the configuration, to open at start. */
  readonly accessLogTargets: readonly AccessLogTarget[];
  /** Every error-log target of the configuration, to open at start. */
  readonly errorLogTargets: readonly ErrorLogTarget[];
  /** Temp-file directories of the configuration, created at start. */
  readonly tempDirs: readonly string[];
  /** The `proxy_cache_path`/`fastcgi_cache_path` zones, loaded at start. */
  readonly cacheZones: readonly CacheZoneConf[];
  readonly warnings: readonly ConfigWarning[];
}

