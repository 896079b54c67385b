/**
 * The compiled configuration the engine serves from: listen sockets, server
 * names, location trees, and for every location the merged settings of every
 * module, with values already bound. Built by `compile.ts`, frozen, and
 * swapped whole on reload.
 */
import type { UpstreamBalancer } from './scope.js';
import type { SourceLoc } from '../parser/ast.js';
import type { ConfigWarning } from '../errors.js';
import type { LogLevel } from '../log-levels.js';
import type { CompiledValue, VariableGetter } from './variables.js';
import type { RequestView } from './request-view.js';
import type { CertificateCacheConf, SessionCacheConf } from './modules/ssl.js';
import type { CertificatePair } from './certificates.js';
import type { Cidr } from './cidr.js';
import type { ExpiresDef } from './modules/headers.js';
import type { OpenLogFileCacheDef } from './modules/log.js';
import type { ResolverDef } from './modules/http-core.js';
import type { ScriptOp } from './modules/rewrite.js';
import type { MimeTypeSet, TempPathValue } from './spec.js';
import type { CharsetTables } from './modules/charset.js';
import type { CacheConf, CacheZoneConf } from './modules/cache.js';

/** Where an `error_log` writes, and from which level up. */
export interface ErrorLogTarget {
  /** Absolute file path, or `stderr`. */
  readonly path: string;
  readonly level: LogLevel;
}

/** Settings of the main and events contexts. */
export interface MainConf {
  readonly daemon: boolean;
  readonly pidFile: string;
  /**
   * Whether `pid` is set in the configuration: `-t` opens the pid file as
   * nginx -t does only then (jinx's compiled-in `logs/nginx.pid` is not
   * opened by `-t`; the reference build's is `/run/nginx.pid`).
   */
  readonly pidFileConfigured: boolean;
  readonly workerProcesses: number;
  readonly workerConnections: number;
  /** `master_process`: an nginx worker counts its channel to the master among its connections. */
  readonly masterProcess: boolean;
  /** `worker_shutdown_timeout` (ngx_set_shutdown_timer): connections left this long after a graceful shutdown or reload are closed; 0: none. */
  readonly workerShutdownTimeoutMs: number;
  readonly errorLogs: readonly ErrorLogTarget[];
}

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

/** A named regex capture bound to an indexed variable. */
export interface NamedCapture {
  readonly name: string;
  readonly index: number;
}

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

/** TLS certificate settings of a server. */
export interface TlsServerConf {
  /** Certificate chains and keys, read when the configuration was loaded. */
  readonly certificates: readonly CertificatePair[];
  /**
   * `ssl_certificate` / `ssl_certificate_key` pairs when any has variables
   * (`$ssl_server_name` …): evaluated and read at every handshake, relative
   * paths against `confPrefix`, encrypted keys opened with `passwords`
   * (`ngx_http_ssl_certificate`); `certificates` is then empty.
   */
  readonly certificateValues: PerHandshakeCertificates | undefined;
  readonly protocols: readonly string[];
  readonly ciphers: string;
  readonly preferServerCiphers: boolean;
  readonly rejectHandshake: boolean;
  readonly sessionTimeoutSec: number;
  /** `ssl_verify_client`. */
  readonly verifyClient: 'off' | 'on' | 'optional' | 'optional_no_ca';
  /** PEM certificates of `ssl_client_certificate`, read when the configuration was loaded (only with `ssl_verify_client`). */
  readonly clientCa: Buffer | undefined;
  /** PEM certificates of `ssl_trusted_certificate`: client certificates may chain to them too. */
  readonly trusted: Buffer | undefined;
  readonly verifyDepth: number;
  /** PEM CRLs of `ssl_crl`. */
  readonly crl: Buffer | undefined;
  /** PEM DH parameters of `ssl_dhparam` (DHE ciphers are offered only with them). */
  readonly dhparam: Buffer | undefined;
  /** `ssl_ecdh_curve`: an OpenSSL curve list, or `auto`. */
  readonly ecdhCurve: string;
  /** `ssl_session_tickets`. */
  readonly sessionTickets: boolean;
  /** `ssl_session_cache`, undefined for `off`/`none`. */
  readonly sessionCache: SessionCacheConf | undefined;
}

/** `ssl_certificate` pairs with variables, read per handshake (or taken from `ssl_certificate_cache`). */
export interface PerHandshakeCertificates {
  readonly pairs: readonly { readonly cert: CompiledValue; readonly key: CompiledValue }[];
  readonly confPrefix: string;
  readonly passwords: readonly string[] | undefined;
  /** `ssl_certificate_cache`, undefined when off. */
  readonly cache: CertificateCacheConf | undefined;
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

/** One entry of an `allow`/`deny` list. */
export interface AccessRule {
  readonly allow: boolean;
  /** `all`, or an address with prefix length. */
  readonly all: boolean;
  readonly family: 'ipv4' | 'ipv6' | 'unix' | 'all';
  readonly addr: readonly number[];
  readonly prefixLength: number;
  readonly text: string;
}

/** `error_page CODES [=[RESPONSE]] URI`. */
export interface ErrorPage {
  readonly target: CompiledValue;
  /** `=CODE` replaces the status; `=` alone takes the status of the redirected request. */
  readonly overwrite: number | 'from-target' | undefined;
}

/** An `add_header NAME VALUE [always]`. */
export interface AddHeader {
  readonly name: string;
  readonly value: CompiledValue;
  readonly always: boolean;
}

/** `try_files FILE … URI|=CODE`. */
export interface TryFiles {
  /** Items before the last: a directory is wanted for those written with a final `/`. */
  readonly files: readonly { readonly value: CompiledValue; readonly testDir: boolean }[];
  readonly fallback: { readonly uri: CompiledValue } | { readonly code: number };
}

/** An `access_log` target. */
export interface AccessLogTarget {
  /** The file; for a name with variables, its template. */
  readonly path: string;
  /** A name with variables: the file is opened for each line (`ngx_http_log_script_write`). */
  readonly pathValue: CompiledValue | undefined;
  /** `open_log_file_cache` of the location, for names with variables (shared by the locations that inherit it). */
  readonly openFileCache: OpenLogFileCacheDef | undefined;
  /** `gzip[=LEVEL]`: each buffer is written as one gzip member of this level; 0: plain. */
  readonly gzipLevel: number;
  readonly format: CompiledLogFormat;
  readonly condition: CompiledValue | undefined;
  /** `buffer=SIZE`: lines are written once this many bytes are pending (0: at once). */
  readonly bufferBytes: number;
  /** `flush=TIME`: pending lines are written at least this often (0: no timer). */
  readonly flushMs: number;
}

/** A compiled `log_format`. */
export interface CompiledLogFormat {
  readonly name: string;
  readonly render: (r: RequestView) => string;
}

/** `proxy_set_header` after merging with nginx's defaults. */
export interface ProxyHeader {
  readonly name: string;
  readonly lowerName: string;
  readonly value: CompiledValue;
}

/** Where a `proxy_pass` sends requests. */
export type ProxyTarget =
  | {
      readonly kind: 'static';
      readonly scheme: 'http' | 'https';
      /** The upstream group (an `upstream` block, or the URL's host:port). */
      readonly group: string;
      /** The URI part of the URL, or undefined when none was given. */
      readonly uri: string | undefined;
      /** `$proxy_host`: host[:port] as written in the URL (port omitted when default). */
      readonly hostHeader: string;
    }
  | { readonly kind: 'variable'; readonly url: CompiledValue };

/** Settings of the proxy module in a location. */
/**
 * `proxy_next_upstream` and its kin (`ngx_http_upstream_conf_t`'s
 * `next_upstream`, `next_upstream_tries`, `next_upstream_timeout`).
 */
export interface NextUpstreamConf {
  /** nginx's condition names (`error`, `timeout`, `invalid_header`, `http_502`, `non_idempotent` …); empty with `off`. */
  readonly nextUpstream: ReadonlySet<string>;
  /** At most this many servers per request; 0: no limit. */
  readonly nextUpstreamTries: number;
  /** No further server after this many ms from the first; 0: no limit. */
  readonly nextUpstreamTimeoutMs: number;
}

export interface ProxyConf extends NextUpstreamConf {
  readonly target: ProxyTarget;
  /** The location prefix that a URI part replaces (nginx's `plcf->location`). */
  readonly locationPrefix: string;
  readonly headers: readonly ProxyHeader[];
  /** Lowercase names of `headers`: client headers with these names are not passed. */
  readonly headerNames: ReadonlySet<string>;
  readonly httpVersion: '1.0' | '1.1';
  readonly hideHeaders: ReadonlySet<string>;
  readonly passRequestBody: boolean;
  readonly passRequestHeaders: boolean;
  readonly connectTimeoutMs: number;
  readonly sendTimeoutMs: number;
  readonly readTimeoutMs: number;
  readonly bufferSizeBytes: number;
  readonly interceptErrors: boolean;
  /** `proxy_redirect`: rules replace a prefix of the value, or (a regex) the whole value. */
  readonly redirect: 'default' | 'off' | readonly (
    { readonly from: CompiledValue; readonly to: CompiledValue } | { readonly regex: RegExp; readonly to: CompiledValue }
  )[];
  readonly ignoreClientAbort: boolean;
  /** `proxy_buffering`: read the upstream at full speed, spooling what the client has not taken. */
  readonly buffering: boolean;
  /** Whether an upstream's `X-Accel-Buffering` turns buffering on or off (not in `proxy_ignore_headers`). */
  readonly accelBuffering: boolean;
  /** Whether an upstream's `X-Accel-Redirect` is followed (not in `proxy_ignore_headers`). */
  readonly accelRedirect: boolean;
  /** `proxy_request_buffering`: read the whole request body before connecting. */
  readonly requestBuffering: boolean;
  /** Bytes of a response kept in memory before spooling (`proxy_buffers` number × size). */
  readonly memoryBytes: number;
  /** Size of one of `proxy_buffers`: with buffering, the client gets the body in whole buffers. */
  readonly bufferBytes: number;
  readonly tempPath: TempPathValue;
  readonly maxTempFileBytes: number;
  /** `proxy_busy_buffers_size`: bytes handed to the client connection and not yet sent, at most. */
  readonly busyBytes: number;
  /** `proxy_temp_file_write_size`: bytes written to the temp file at a time, at most. */
  readonly tempFileWriteBytes: number;
  /**
   * The `proxy_ssl_*` settings, for a `proxy_pass https://…` or one with
   * variables (nginx's `plcf->ssl`); undefined for plain HTTP.
   */
  readonly tls: UpstreamTlsConf | undefined;
  /** `proxy_method`: the upstream request's method; undefined: the client's. */
  readonly method: CompiledValue | undefined;
  /** `proxy_set_body`: the body sent in place of the client's. */
  readonly setBody: CompiledValue | undefined;
  /** `proxy_cookie_domain`, `proxy_cookie_path`, `proxy_cookie_flags` rules; undefined when there are none (or `off`). */
  readonly cookieDomains: readonly CookieRewrite[] | undefined;
  readonly cookiePaths: readonly CookieRewrite[] | undefined;
  readonly cookieFlags: readonly CookieFlags[] | undefined;
  /** `proxy_cache` and its kin; undefined when the location does not cache. */
  readonly cache: CacheConf | undefined;
}

/** What a cookie rule matches: a value (with variables) or a regex. */
export type CookieMatch =
  | { readonly kind: 'value'; readonly value: CompiledValue }
  | { readonly kind: 'regex'; readonly regex: RegExp };

/**
 * A rule of `proxy_cookie_domain` (`kind: 'value'` matches the whole domain,
 * case-insensitively) or `proxy_cookie_path` (a prefix); a regex replaces
 * the whole value, `$1`… taken from it.
 */
export interface CookieRewrite {
  readonly match: CookieMatch;
  readonly replacement: CompiledValue;
}

/** A rule of `proxy_cookie_flags`: the cookie's name (case-insensitive) or a regex, and its flags. */
export interface CookieFlags {
  readonly cookie: CookieMatch;
  readonly flags: readonly CompiledValue[];
}

/**
 * TLS to upstream servers (`ngx_http_proxy_set_ssl` in
 * `src/http/modules/ngx_http_proxy_module.c`, merged with nginx's defaults;
 * used as `ngx_http_upstream_ssl_init_connection` uses them,
 * `src/http/ngx_http_upstream.c`). Files are read when the configuration is.
 */
export interface UpstreamTlsConf {
  /** The settings below as text: locations with equal settings share connection pools. */
  readonly key: string;
  /** `proxy_ssl_server_name`: send the name as SNI (never for an IP address). */
  readonly serverName: boolean;
  /** `proxy_ssl_name`; undefined: the host of `proxy_pass` (`$proxy_host` without the port). */
  readonly name: CompiledValue | undefined;
  /** `proxy_ssl_verify`: check the chain against `trusted` and the name against the certificate. */
  readonly verify: boolean;
  /** `proxy_ssl_verify_depth`. */
  readonly verifyDepth: number;
  /** The PEM certificates of `proxy_ssl_trusted_certificate` (read when `verify` is on). */
  readonly trusted: Buffer | undefined;
  /** `proxy_ssl_certificate` and `…_key`: the client certificate, if any. */
  readonly certificate: CertificatePair | undefined;
  /**
   * `proxy_ssl_certificate` and `…_key` with variables: the files are read
   * when a request needs them (an empty certificate: none), relative paths
   * against `confPrefix` (`ngx_http_upstream_ssl_certificate`).
   */
  readonly certificateFiles: { readonly cert: CompiledValue; readonly key: CompiledValue; readonly confPrefix: string } | undefined;
  /** `proxy_ssl_protocols`. */
  readonly protocols: readonly string[];
  /** `proxy_ssl_ciphers` (an OpenSSL cipher list, TLS 1.2 and older). */
  readonly ciphers: string;
  /** `proxy_ssl_password_file`: the passphrases of an encrypted `proxy_ssl_certificate_key`. */
  readonly passwords: readonly string[] | undefined;
  /** `proxy_ssl_crl`: revoked certificates, read when `verify` is on. */
  readonly crl: Buffer | undefined;
  /** `proxy_ssl_session_reuse`: resume TLS sessions on new connections. */
  readonly sessionReuse: boolean;
}

/** All settings a request needs from its location, merged from the levels above. */
export interface LocationConf {
  /**
   * `root` or `alias`. An alias replaces the first `aliasLength` bytes of the
   * URI, the length of the name of the location it was set in (nginx's
   * `clcf->alias`, inherited with the path), or, set in a regex location
   * (`aliasRegex`), is the whole path.
   */
  readonly root: { readonly alias: boolean; readonly path: CompiledValue; readonly aliasRegex: boolean; readonly aliasLength: number };
  readonly index: readonly CompiledValue[];
  readonly tryFiles: TryFiles | undefined;
  readonly types: ReadonlyMap<string, string>;
  readonly defaultType: string;
  readonly errorPages: ReadonlyMap<number, ErrorPage>;
  readonly recursiveErrorPages: boolean;
  readonly internal: boolean;
  /**
   * The location's `limit_except` block: the methods it lets through (GET
   * brings HEAD), and the settings a request with another method uses
   * instead of the location's (`ngx_http_update_location_config`).
   */
  readonly limitExcept: { readonly methods: ReadonlySet<string>; readonly conf: LocationConf } | undefined;
  readonly clientMaxBodySizeBytes: number;
  readonly clientBodyBufferSizeBytes: number;
  /** `subrequest_output_buffer_size`: the most a subrequest kept in memory (`include … set=`) may send. */
  readonly subrequestOutputBufferSizeBytes: number;
  readonly clientBodyTempPath: TempPathValue;
  /** `client_body_in_file_only`: `on` keeps the file after the request, `clean` removes it. */
  readonly clientBodyInFileOnly: 'off' | 'on' | 'clean';
  readonly clientBodyTimeoutMs: number;
  /** `client_header_timeout` (a server's; its locations carry it). */
  readonly clientHeaderTimeoutMs: number;
  /**
   * `large_client_header_buffers` (a server's; its locations carry it): over
   * HTTP/2, the largest header field and, times `count`, header block.
   */
  readonly largeClientHeaderBuffers: { readonly count: number; readonly sizeBytes: number };
  /** `client_header_buffer_size` (a server's; its locations carry it): the first buffer a request's head is read into. */
  readonly clientHeaderBufferSizeBytes: number;
  /** `max_headers` (a server's; its locations carry it). */
  readonly maxHeaders: number;
  /** `merge_slashes`, `underscores_in_headers`, `ignore_invalid_headers` (a server's; its locations carry them). */
  readonly mergeSlashes: boolean;
  readonly underscoresInHeaders: boolean;
  readonly ignoreInvalidHeaders: boolean;
  /**
   * `http2` (a server's; its locations carry it): whether HTTP/2 reaches the
   * server (by ALPN with its SNI name, by the connection preface as the
   * default server of a plain address, by `:authority` on a connection
   * another server accepted), unless the address's `listen … http2` says so for all.
   */
  readonly http2: boolean;
  /** `http2_max_concurrent_streams` (a server's; its locations carry it). */
  readonly http2MaxConcurrentStreams: number;
  /** `http2_body_preread_size` (a server's; its locations carry it): the streams' initial window. */
  readonly http2BodyPrereadSizeBytes: number;
  /** `http2_chunk_size`: the largest DATA frame of a response. */
  readonly http2ChunkSizeBytes: number;
  readonly logNotFound: boolean;
  /** `etag`: static files carry an ETag. */
  readonly etag: boolean;
  /** `if_modified_since`. */
  readonly ifModifiedSince: 'off' | 'exact' | 'before';
  /** `max_ranges`; undefined: no limit. */
  readonly maxRanges: number | undefined;
  readonly serverTokens: 'on' | 'off' | 'build';
  readonly absoluteRedirect: boolean;
  readonly serverNameInRedirect: boolean;
  readonly portInRedirect: boolean;
  readonly msiePadding: boolean;
  readonly errorLogs: readonly ErrorLogTarget[];
  readonly accessLogs: readonly AccessLogTarget[];
  /** Location-level rewrite directives (and those of an `if` block). */
  readonly script: readonly ScriptOp[];
  readonly access: readonly AccessRule[];
  readonly satisfy: 'all' | 'any';
  /**
   * `auth_basic` and `auth_basic_user_file`; a file name made from a leading
   * variable that is not absolute is taken relative to `confPrefix` (the
   * configuration's directory) when evaluated, as nginx's `conf_prefix`
   * complex values are.
   */
  readonly authBasic: { readonly realm: CompiledValue; readonly userFile: CompiledValue; readonly confPrefix: string | undefined } | undefined;
  readonly addHeaders: readonly AddHeader[];
  /** `add_trailer`: trailers of responses sent in chunks (HTTP/1.1) or over HTTP/2. */
  readonly addTrailers: readonly AddHeader[];
  readonly proxy: ProxyConf | undefined;
  readonly keepaliveTimeoutMs: number;
  readonly keepaliveRequests: number;
  /** `keepalive_timeout`'s second argument, sent as `Keep-Alive: timeout=N`. */
  readonly keepaliveHeaderSec: number | undefined;
  /** `keepalive_time`: how long after it was accepted a connection may still be kept alive. */
  readonly keepaliveTimeMs: number;
  /** `keepalive_disable`: no keep-alive for POSTs from MSIE 6 and older, or for Safari on Mac OS X. */
  readonly keepaliveDisable: { readonly msie6: boolean; readonly safari: boolean };
  readonly sendTimeoutMs: number;
  /** `lingering_close`, `lingering_time`, `lingering_timeout`. */
  readonly lingering: { readonly close: 'off' | 'on' | 'always'; readonly timeMs: number; readonly timeoutMs: number };
  readonly resetTimedoutConnection: boolean;
  readonly chunkedTransferEncoding: boolean;
  /** `expires`; with variables, parsed per response. */
  readonly expires: ExpiresDef | { readonly kind: 'variable'; readonly modified: boolean; readonly value: CompiledValue };
  readonly realIp: RealIpConf | undefined;
  readonly authRequest: AuthRequestConf | undefined;
  readonly fastcgi: FastcgiConf | undefined;
  /** `fastcgi_split_path_info` and `fastcgi_index`, for `$fastcgi_script_name` and `$fastcgi_path_info`. */
  readonly fastcgiSplit: { readonly regex: RegExp | undefined; readonly index: string | undefined };
  readonly resolver: ResolverDef | undefined;
  readonly resolverTimeoutMs: number;
  readonly uninitializedVariableWarn: boolean;
  readonly gzip: GzipConf;
  readonly charset: CharsetConf;
  readonly limitReq: LimitReqConf;
  readonly ssi: SsiConf;
  readonly sub: SubFilterConf;
  readonly addition: AdditionConf;
}

/** The sub filter's settings of a location (`ngx_http_sub_loc_conf_t`). */
export interface SubFilterConf {
  /**
   * `sub_filter`: search strings (lowercase ASCII) and replacements, in
   * the configuration's order; empty when the filter is off.
   */
  readonly pairs: readonly { readonly match: CompiledValue; readonly value: CompiledValue }[];
  readonly types: MimeTypeSet;
  /** `sub_filter_once`: each search string is replaced at its first place only. */
  readonly once: boolean;
  /** `sub_filter_last_modified`: keep `Last-Modified`, and the `ETag` made weak. */
  readonly lastModified: boolean;
}

/** The addition filter's settings of a location (`ngx_http_addition_conf_t`); an empty URI is none. */
export interface AdditionConf {
  readonly beforeBody: string;
  readonly afterBody: string;
  readonly types: MimeTypeSet;
}

/** The SSI filter's settings of a location (`ngx_http_ssi_loc_conf_t`). */
export interface SsiConf {
  readonly enable: boolean;
  readonly silentErrors: boolean;
  /** `ssi_last_modified`: keep `Last-Modified` and a weak `ETag`. */
  readonly lastModified: boolean;
  /** `ssi_value_length`: the longest parameter value, in bytes. */
  readonly valueLengthBytes: number;
  readonly types: MimeTypeSet;
}

/**
 * Compression settings of a location: the gzip filter's, `gzip_static`,
 * `gunzip`, and the core module's `gzip_*` that `ngx_http_gzip_ok` reads.
 */
export interface GzipConf {
  readonly enable: boolean;
  /** `gzip_comp_level`, 1..9. */
  readonly level: number;
  /** `gzip_window` and `gzip_hash` as zlib's window bits and memory level. */
  readonly windowBits: number;
  readonly memLevel: number;
  readonly minLengthBytes: number;
  readonly types: MimeTypeSet;
  /** Size of one of `gzip_buffers`: compressed data leaves in pieces of at most this. */
  readonly bufferBytes: number;
  readonly static: 'off' | 'on' | 'always';
  readonly gunzip: boolean;
  /** Size of one of `gunzip_buffers`. */
  readonly gunzipBufferBytes: number;
  readonly vary: boolean;
  /** `gzip_http_version` as nginx's `http_version` (1000 for 1.0, 1001 for 1.1). */
  readonly httpVersion: number;
  /** `gzip_proxied` flags (`off`, `expired`, `no-cache`, …, `any`). */
  readonly proxied: ReadonlySet<string>;
  /** `gzip_disable msie6`. */
  readonly disableMsie6: boolean;
  /** `gzip_disable` regexes, matched against `User-Agent`. */
  readonly disable: readonly RegExp[];
}

/** A charset setting bound: `off`, a charset by its index in `CharsetTables`, or a variable naming one. */
export type CharsetSetting =
  | { readonly kind: 'off' }
  | { readonly kind: 'name'; readonly index: number }
  | { readonly kind: 'variable'; readonly get: (r: RequestView) => string | undefined };

/** The charset filter's settings of a location. */
export interface CharsetConf {
  readonly charset: CharsetSetting;
  readonly source: CharsetSetting;
  readonly override: boolean;
  readonly types: MimeTypeSet;
  /** The configuration's charsets and `charset_map` tables, shared by every location. */
  readonly tables: CharsetTables;
}

/** A `limit_req_zone`, bound: its key, its rate in thousandths of a request per second, and its size. */
export interface LimitReqZone {
  readonly name: string;
  readonly key: CompiledValue;
  readonly rateMilli: number;
  readonly sizeBytes: number;
}

/** The limit_req settings of a location (`ngx_http_limit_req_conf_t`). */
export interface LimitReqConf {
  /** Its `limit_req`s in order, `burst` and `delay` in thousandths of a request. */
  readonly limits: readonly { readonly zone: LimitReqZone; readonly burstMilli: number; readonly delayMilli: number }[];
  /** `limit_req_log_level` for refused requests; delayed ones are logged one level lower (info stays info). */
  readonly logLevel: LogLevel;
  readonly delayLogLevel: LogLevel;
  readonly status: number;
  readonly dryRun: boolean;
}

/** Where a `fastcgi_pass` sends requests. */
export type FastcgiTarget =
  | { readonly kind: 'group'; readonly group: string }
  | { readonly kind: 'unix'; readonly path: string }
  | { readonly kind: 'variable'; readonly address: CompiledValue };

/** Settings of the FastCGI module in a location. */
export interface FastcgiConf extends NextUpstreamConf {
  readonly target: FastcgiTarget;
  /** `fastcgi_param`s in order, after merging. */
  readonly params: readonly { readonly name: string; readonly value: CompiledValue; readonly ifNotEmpty: boolean }[];
  /** Names set by `fastcgi_param`: request headers are not passed as `HTTP_*` under these names. */
  readonly paramNames: ReadonlySet<string>;
  readonly index: string | undefined;
  readonly splitPathInfo: RegExp | undefined;
  readonly connectTimeoutMs: number;
  readonly sendTimeoutMs: number;
  readonly readTimeoutMs: number;
  /** Bytes allowed for the response header (`fastcgi_buffer_size`). */
  readonly bufferSizeBytes: number;
  readonly buffering: boolean;
  /** Whether an upstream's `X-Accel-Buffering` turns buffering on or off (not in `fastcgi_ignore_headers`). */
  readonly accelBuffering: boolean;
  /** Whether an upstream's `X-Accel-Redirect` is followed (not in `fastcgi_ignore_headers`). */
  readonly accelRedirect: boolean;
  readonly requestBuffering: boolean;
  readonly memoryBytes: number;
  /** Size of one of `fastcgi_buffers`. */
  readonly bufferBytes: number;
  readonly tempPath: TempPathValue;
  readonly maxTempFileBytes: number;
  /** `fastcgi_busy_buffers_size`. */
  readonly busyBytes: number;
  /** `fastcgi_temp_file_write_size`. */
  readonly tempFileWriteBytes: number;
  readonly interceptErrors: boolean;
  readonly keepConn: boolean;
  /** Lowercase names of response headers not passed to the client. */
  readonly hideHeaders: ReadonlySet<string>;
  readonly passRequestBody: boolean;
  readonly passRequestHeaders: boolean;
  readonly ignoreClientAbort: boolean;
  /** `fastcgi_catch_stderr`: a header-time STDERR record with one of these strings makes the response invalid. */
  readonly catchStderr: readonly string[];
  /** `fastcgi_cache` and its kin; undefined when the location does not cache. */
  readonly cache: CacheConf | undefined;
}

/** Real client address settings of the realip module. */
export interface RealIpConf {
  readonly from: readonly (Cidr | 'unix')[];
  /** Header name, lowercase. */
  readonly header: string;
  /** `real_ip_header proxy_protocol`: the address and port come from the connection's PROXY protocol header. */
  readonly proxyProtocol: boolean;
  readonly recursive: boolean;
}

/** `auth_request URI` with its `auth_request_set` assignments. */
export interface AuthRequestConf {
  readonly uri: string;
  /** `auth_request_set`: the variable's index, the value, and the variable's set handler if it has one (`$args`). */
  readonly sets: readonly {
    readonly index: number; readonly value: CompiledValue;
    readonly handler: ((r: RequestView, value: string) => string | undefined) | undefined;
  }[];
}

/** The compiled configuration. */
export interface RouteTable {
  readonly main: MainConf;
  readonly listens: readonly ListenGroup[];
  /** The stream module's listening sockets (one per wildcard, as nginx binds them): jinx does not serve them, `-t` binds them as nginx does. */
  readonly streamListens: readonly { readonly host: string; readonly port: number; readonly addrText: string; readonly udp: boolean }[];
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

/** A resolved upstream group. */
export interface UpstreamGroup {
  readonly name: string;
  readonly peers: readonly UpstreamPeer[];
  /** Idle connections kept (`keepalive`; 0 for a group made from a `proxy_pass`/`fastcgi_pass` address). */
  readonly keepalive: number;
  readonly keepaliveTimeoutMs: number;
  /** `keepalive_time`: a connection open longer than this is closed after its request. */
  readonly keepaliveTimeMs: number;
  /** Requests a kept connection carries at most (`keepalive_requests`). */
  readonly keepaliveRequests: number;
  /** How a peer is picked (`ip_hash`, `least_conn`, else round robin). */
  readonly balancer: UpstreamBalancer;
}

/** One address of an upstream group. */
export interface UpstreamPeer {
  /** `IP:port` as nginx prints it (`[::1]:80` for IPv6, `unix:PATH` for a unix domain socket). */
  readonly name: string;
  /** The IP address, or `unix:PATH`. */
  readonly host: string;
  /** The port; 0 for a unix domain socket. */
  readonly port: number;
  /** The socket file of a peer on a unix domain socket. */
  readonly unixPath: string | undefined;
  readonly weight: number;
  readonly backup: boolean;
  readonly down: boolean;
  readonly maxFails: number;
  readonly failTimeoutMs: number;
}
