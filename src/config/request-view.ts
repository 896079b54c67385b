/**
 * The request as configuration code sees it: what variables, compiled values
 * (scripts, complex values, `map`, `if` conditions) and log formats read and
 * write of a request, and nothing of how the runtime carries it. The
 * runtime's request (`HttpRequestState`, nginx's `ngx_http_request_t`)
 * implements it, so config never imports the runtime. The server and
 * location are seen through what variables read of them, so that this file
 * imports no other part of config and closes no import circle with the
 * route table, whose compiled values take a `RequestView`.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { LogLevel } from '../log-levels.js';
import type { ProxyProtocolHeader } from './proxy-protocol-tlv.js';

/**
 * A client certificate as the `$ssl_client_*` variables print it
 * (`ngx_ssl_get_*` in `src/event/ngx_event_openssl.c`).
 */
export interface ClientCertificateView {
  /** `$ssl_client_raw_cert`: the certificate in PEM. */
  readonly raw: string;
  /** `$ssl_client_cert`: the PEM without its last newline, every other line break followed by a tab. */
  readonly tabbed: string;
  /** `$ssl_client_escaped_cert`: the PEM URI-component escaped. */
  readonly escaped: string;
  /** `$ssl_client_s_dn` and `$ssl_client_i_dn`: RFC 2253 form; undefined for a certificate jinx cannot read. */
  readonly subject: string | undefined;
  readonly issuer: string | undefined;
  /** `$ssl_client_s_dn_legacy` and `$ssl_client_i_dn_legacy`: `X509_NAME_oneline`. */
  readonly subjectLegacy: string | undefined;
  readonly issuerLegacy: string | undefined;
  /** `$ssl_client_serial`: upper-case hex. */
  readonly serial: string | undefined;
  /** `$ssl_client_fingerprint`: SHA-1 of the DER encoding, lower-case hex. */
  readonly fingerprint: string;
  /** `$ssl_client_v_start` and `$ssl_client_v_end`, as `ASN1_TIME_print` writes them. */
  readonly validFrom: string | undefined;
  readonly validTo: string | undefined;
  /** `$ssl_client_v_remain`: whole days left at `nowMs` (ms since the epoch), `0` under one. */
  daysLeft(nowMs: number): string | undefined;
}

/** What the `$ssl_*` variables read of a TLS connection (`ngx_http_ssl_vars`). */
export interface TlsView {
  /** `$ssl_server_name`: the SNI name, when the client sent one. */
  readonly serverName: string | undefined;
  /** `$ssl_protocol`: `TLSv1.3` … */
  readonly protocol: string | undefined;
  /** `$ssl_cipher`: OpenSSL's name of the cipher suite. */
  readonly cipher: string | undefined;
  /** `$ssl_alpn_protocol`. */
  readonly alpnProtocol: string | undefined;
  /** `$ssl_session_reused`. */
  readonly sessionReused: boolean;
  /** `$ssl_session_id`: lower-case hex, undefined when the session has none. */
  readonly sessionId: string | undefined;
  /** `$ssl_ciphers`: the client's cipher suites, joined with `:`. */
  readonly ciphers: string | undefined;
  /** `$ssl_curves`: the client's groups, joined with `:`. */
  readonly curves: string | undefined;
  /** `$ssl_client_verify`: `NONE`, `SUCCESS` or `FAILED:REASON`. */
  readonly verifyResult: string;
  /** The client certificate, when the client sent one. */
  readonly clientCertificate: ClientCertificateView | undefined;
  /**
   * `$ssl_curve`: the key exchange's group, given `ssl_prefer_server_ciphers`
   * (`serverPreference`) and `ssl_ecdh_curve` (`ecdhCurve`, `auto` by default).
   */
  curve(serverPreference: boolean, ecdhCurve?: string): string | undefined;
}

/**
 * The connection gauges of the process (nginx's `ngx_stat_active`,
 * `…_reading`, `…_writing`, `…_waiting`), which `$connections_*` read.
 */
export interface ConnectionCountersView {
  readonly active: number;
  readonly reading: number;
  readonly writing: number;
  readonly waiting: number;
}

/** The client connection a request arrived on (nginx's `ngx_connection_t`), as variables read it. */
export interface ConnectionView {
  /** nginx's connection number, printed as `*N` in the error log (`$connection`). */
  readonly id: number;
  /**
   * Peer address of the socket (`unix:` on a unix domain socket), before
   * `set_real_ip_from` is applied; the port is 0 when there is none.
   */
  readonly peerAddr: string;
  readonly peerPort: number;
  /** Local address and port the connection was accepted on (`unix:PATH` and 0 on a unix domain socket). */
  readonly localAddr: string;
  readonly localPort: number;
  /** What the connection's PROXY protocol header said (`listen … proxy_protocol`), if it had addresses. */
  readonly proxyProtocol?: ProxyProtocolHeader | undefined;
  /** TLS details when the connection is over TLS. */
  readonly tls: TlsView | undefined;
  /** Requests served on this connection so far, this one included (`$connection_requests`). */
  readonly requests: number;
  /** When the connection was accepted, in ms since the epoch. */
  readonly acceptedAtMs: number;
  /** The process's connection gauges (`$connections_active` …). */
  readonly counters: ConnectionCountersView;
}

/**
 * One attempt of a request at an upstream peer (nginx's
 * `ngx_http_upstream_state_t`), for `$upstream_*` and the error log's
 * `upstream:` field. Times are milliseconds from the start of the attempt;
 * undefined prints as `-`.
 */
export interface UpstreamState {
  /** `scheme://host:port/uri` as nginx prints it in the error log (schema + peer name + uri). */
  logName: string;
  /** `$upstream_addr`: `IP:port` of the peer tried, or the name when it could not be resolved. */
  addr: string;
  /** `$upstream_status`, `undefined` until a status line arrived. */
  status: number | undefined;
  /** When the attempt started, in ms since the epoch (nginx's `u->start_time`). */
  readonly startMs: number;
  /** `$upstream_connect_time`: until the connection was ready (TLS included). */
  connectTimeMs: number | undefined;
  /** `$upstream_header_time`: until the response header was read. */
  headerTimeMs: number | undefined;
  /** `$upstream_response_time`: until the attempt ended; undefined while it runs. */
  responseTimeMs: number | undefined;
  /** `$upstream_response_length`: body bytes received, set when the attempt ends. */
  responseLength: number;
  /** `$upstream_bytes_received`: bytes read from the peer's connection so far. */
  bytesReceived: number;
  /** `$upstream_bytes_sent`: bytes written to the peer's connection, set when the attempt ends. */
  bytesSent: number;
  /** Response headers of the upstream as received, names and values alternating, for `$upstream_http_*`. */
  headers: readonly string[];
  /** Response trailers of the upstream, names and values alternating, for `$upstream_trailer_*`. */
  trailers: readonly string[];
  /** Earlier attempts of the request at other peers (`proxy_next_upstream`), oldest first. */
  readonly earlier: readonly UpstreamState[];
}

/** What variables read of the request's virtual server (a `VirtualServer` of the route table). */
export interface ServerView {
  /** `$server_name`: the server's first name. */
  readonly name: string;
  /** `ssl_verify_client`: whether the server asks for a client certificate (`$ssl_client_*`). */
  readonly verifyClient: 'off' | 'on' | 'optional' | 'optional_no_ca';
  /** `ssl_prefer_server_ciphers` and `ssl_ecdh_curve`, for `$ssl_curve`; undefined without TLS. */
  readonly tls: { readonly preferServerCiphers: boolean; readonly ecdhCurve: string } | undefined;
}

/** A bound value of the configuration (a `CompiledValue` of variables.ts), as the views read it. */
export interface EvaluatedValue {
  readonly evaluate: (r: RequestView) => string;
}

/**
 * A level's secure_link settings, merged and bound
 * (`ngx_http_secure_link_conf_t`): the old style's secret word, or the
 * `secure_link` and `secure_link_md5` values.
 */
export type SecureLinkConf =
  | { readonly kind: 'secret'; readonly secret: string }
  | { readonly kind: 'md5'; readonly value: EvaluatedValue | undefined; readonly md5: EvaluatedValue | undefined };

/** The URI prefix a `valid_referers` host name requires (`example.com/galleries/`), or null for any. */
export type RefererUriPart = string | null;

/**
 * A level's `valid_referers`, merged (`ngx_http_referer_conf_t`): host names
 * (lowercased; head wildcards as `.example.com`, tail wildcards as
 * `www.example.`, longest first) with their URI prefixes, and regexes.
 */
export interface RefererConf {
  readonly noReferer: boolean;
  readonly blockedReferer: boolean;
  readonly exact: ReadonlyMap<string, RefererUriPart>;
  readonly heads: readonly (readonly [string, RefererUriPart])[];
  readonly tails: readonly (readonly [string, RefererUriPart])[];
  /**
   * `~REGEX` entries, matched against the Referer after its scheme, and the
   * regex names of `server_names`, which nginx matches against the
   * lowercased host alone.
   */
  readonly regexes: readonly RefererRegex[];
}

/** One regex of `valid_referers`, and what it is matched against. */
export interface RefererRegex {
  readonly regex: RegExp;
  readonly subject: 'referer' | 'host';
}

/**
 * A level's userid settings, merged (`ngx_http_userid_conf_t`), the cookie's
 * parts as nginx keeps them: `domain`, `path` and the flags already in their
 * `; domain=…` form.
 */
export interface UseridConf {
  /** `userid`: `off`, `log` (read the cookie only), `v1` or `on` (also set it). */
  readonly enable: 'off' | 'log' | 'v1' | 'on';
  /** `userid_service`; undefined for nginx's default (0 with `v1`, the server's IPv4 address with `on`). */
  readonly service: number | undefined;
  /** `userid_name`: the cookie's name. */
  readonly name: string;
  /** `userid_expires` in seconds: 0 for none, `USERID_MAX_EXPIRES` for `max`. */
  readonly expiresSec: number;
  /** `userid_mark`: the mark character, '' for none. */
  readonly mark: string;
  /** What follows the cookie's expiry: `; domain=…` (`userid_domain`), `; path=…` (`userid_path`), then the `userid_flags`. */
  readonly attributes: string;
  /** `userid_p3p`: the `P3P` header's value, '' for none. */
  readonly p3p: string;
  /** Reads `$uid_reset` for a request (as `set` or `map` define it). */
  readonly reset: (r: RequestView) => string | undefined;
}

/** One `modern_browser NAME VERSION`: where `User-Agent` names the browser, and the least modern version. */
export interface ModernBrowser {
  /** Bytes of `User-Agent` skipped before looking for `mark`. */
  readonly skip: number;
  /** The browser's mark (`MSIE `, `rv:`, `Safari/` …). */
  readonly mark: string;
  /** Bytes from the start of the mark to the version. */
  readonly add: number;
  /** The version scaled as nginx does (`1.2.3.4` is 1020304). */
  readonly version: bigint;
}

/** The browser module's settings of a level (`ngx_http_browser_conf_t`), for `$modern_browser` and `$ancient_browser`. */
export interface BrowserConf {
  /** `modern_browser NAME VERSION`, Opera added when not listed; empty without the directive. */
  readonly modern: readonly ModernBrowser[];
  /** `ancient_browser WORD`: the words of an ancient `User-Agent`. */
  readonly ancient: readonly string[];
  /** `modern_browser unlisted` at this level. */
  readonly unlisted: boolean;
  /** `ancient_browser netscape4` at this level. */
  readonly netscape4: boolean;
  /** `modern_browser_value`. */
  readonly modernValue: string;
  /** `ancient_browser_value`. */
  readonly ancientValue: string;
}

/** What variables read of the location configuration in effect (a `LocationConf` of the route table). */
export interface LocationView {
  /** `fastcgi_split_path_info` and `fastcgi_index`, for `$fastcgi_script_name` and `$fastcgi_path_info`. */
  readonly fastcgiSplit: { readonly regex: RegExp | undefined; readonly index: string | undefined };
  /** `proxy_set_body`, for `$proxy_internal_body_length`. */
  readonly proxy: { readonly setBody: EvaluatedValue | undefined } | undefined;
  /** `secure_link`, `secure_link_md5`, `secure_link_secret`, for `$secure_link`. */
  readonly secureLink: SecureLinkConf | undefined;
  /** `valid_referers`, for `$invalid_referer`. */
  readonly referers: RefererConf | undefined;
  /** The userid settings, for `$uid_got` and `$uid_set`. */
  readonly userid: UseridConf;
  /** The browser module's settings, for `$modern_browser` and `$ancient_browser`. */
  readonly browser: BrowserConf;
  /** `slice`: the size of the pieces in bytes, 0 for none (for `$slice_range`). */
  readonly sliceBytes: number;
  /** `uninitialized_variable_warn`: reading a `set` variable not set yet is logged. */
  readonly uninitializedVariableWarn: boolean;
}

/**
 * One request as variables, scripts, `map` and log formats see it. Fields
 * they assign (`set $args`, `$limit_rate`, captures and indexed variables)
 * are writable; the rest are read only here.
 */
export interface RequestView {
  readonly conn: ConnectionView;
  /** The parent of a subrequest (nginx's `r->parent`). */
  readonly parent: RequestView | undefined;
  /** The chosen virtual server, and the location config in effect. */
  readonly server: ServerView;
  readonly loc: LocationView;
  /** Values of indexed variables (`set`, `map`, `auth_request_set`), by index; undefined = not set. */
  readonly vars: (string | undefined)[];
  /** Captures of the last successful regex match (`$1`…`$9`, named captures). */
  captures: RegExpExecArray | null;
  /**
   * The modules' state for the request (nginx's `r->ctx`), each under its
   * module's key; an internal redirect or a jump to a named location empties it.
   */
  readonly moduleCtx: Map<symbol, unknown>;

  /** `$remote_addr` and `$remote_port`, after the realip module. */
  readonly clientAddr: string;
  readonly clientPort: number;
  /** `$request_method`: the main request's, GET after an `error_page` redirect. */
  readonly mainMethod: string;
  /** `$request_uri`: the request target as received. */
  readonly requestUri: string;
  /** `$request`: the request line as received; '' when none was read. */
  readonly requestLine: string;
  /** `$server_protocol`: `HTTP/1.0`, `HTTP/1.1` or `HTTP/2.0`. */
  readonly protocol: string;
  /** `$scheme`. */
  readonly scheme: 'http' | 'https';
  /** Request headers with lowercase names, as node parses them. */
  readonly headers: IncomingHttpHeaders;
  /** Request headers as received: name, value, name, value … (original case, order). */
  readonly rawHeaders: readonly string[];
  /** False while the request line is being read: error-log lines then have no `host:`/`referrer:`. */
  readonly headersRead: boolean;
  /** `$uri`: the decoded, normalized path. */
  readonly uri: string;
  /** `$args`: the query string without `?`; `set $args` changes it. */
  args: string;
  /** Cleared when `$args` is set (nginx's `r->valid_unparsed_uri`). */
  validUnparsedUri: boolean;
  /** `$host`: the Host header's name part lowercased, or the server's name. */
  readonly host: string;
  /** `$request_port`: the port given with the request's host, '' when none. */
  readonly requestPort: string;
  /** Start time in ms since the epoch. */
  readonly startMs: number;
  /** Whole milliseconds the request has taken so far, for `$request_time`. */
  elapsedMs(): number;
  /** Length of the request body once it was read. */
  readonly bodyLength: number | undefined;
  /** The request body once read whole (`$request_body`, `$request_body_file`). */
  readonly requestBody: { readonly kind: 'memory'; readonly data: Buffer } | { readonly kind: 'file'; readonly path: string } | undefined;
  /** Bytes of the request (line, headers, body), for `$request_length`. */
  readonly requestLength: number;

  /** Response status once decided. */
  readonly status: number;
  /** Bytes of the response body sent, and bytes sent in all, headers included. */
  readonly bodyBytesSent: number;
  readonly bytesSent: number;
  /** Whether the response was sent completely, for `$request_completion`. */
  readonly completed: boolean;
  /** Headers the response was sent with (lowercase names), for `$sent_http_*`. */
  readonly sentHeaders: ReadonlyMap<string, string | string[]>;
  /** The response headers while the headers module adds to them, for `$sent_http_*` in `add_header`. */
  readonly outHeaders: readonly (readonly [string, string | readonly string[]])[] | undefined;
  /** The trailers of the response (`add_trailer`), once made, for `$sent_trailer_*`. */
  readonly outTrailers: readonly (readonly [string, string])[] | undefined;

  /** The current upstream attempt, for `$upstream_*` and the error log. */
  readonly upstream: UpstreamState | undefined;
  /** `$upstream_cache_status`. */
  readonly cacheStatus: string | undefined;
  /** `$upstream_cache_last_modified` and `$upstream_cache_etag`. */
  readonly cacheValidators: { readonly lastModified: string | undefined; readonly etag: string | undefined } | undefined;
  /** `$proxy_host` and `$proxy_port` of the upstream request being made. */
  readonly proxyHost: string | undefined;
  readonly proxyPort: string | undefined;
  /** Bytes the gzip filter took in and gave out, once it ended (`$gzip_ratio`). */
  readonly gzipCounts: { readonly zin: number; readonly zout: number } | undefined;
  /** `$limit_req_status`. */
  readonly limitReqStatus: string | undefined;
  /** `$limit_conn_status`. */
  readonly limitConnStatus: string | undefined;
  /** `$limit_rate`: the response's rate in bytes per second (nginx's `r->limit_rate`), 0 until set or sent. */
  limitRate: number;
  /** The rate was set (`$limit_rate`, `X-Accel-Limit-Rate`): `limit_rate` no longer applies (nginx's `r->limit_rate_set`). */
  limitRateSet: boolean;
  /** The SSI filter's `timefmt` for the response, once the filter took it (`$date_local`, `$date_gmt`). */
  readonly ssi: { readonly timefmt: string } | undefined;
  /** What the request is doing, for the ` while …` of error-log lines. */
  readonly action: string | undefined;

  /**
   * Writes an error-log line about the request, with nginx's context fields,
   * to the `error_log` of its location (nginx's `ngx_log_error` on
   * `r->connection->log`), for variables that log (`$uid_got`).
   */
  logError(level: LogLevel, message: string): void;
  /** `$document_root`: the `root` (or `alias`) of the location in effect. */
  documentRoot(): string;
  /** `$request_filename`: the file the URI maps to. */
  requestFilename(): string;
}
