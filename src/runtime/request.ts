/**
 * The state of one client request as jinx's phases see it, independent of the
 * protocol that carried it (jinx's own HTTP/1.x and HTTP/2 connections). It
 * plays the part of nginx's `ngx_http_request_t`.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { CompiledLocation, LocationConf, VirtualServer } from '../config/route-table.js';
import type { ConnectionView, RequestView, UpstreamState } from '../config/request-view.js';
import type { LogLevel } from '../log-levels.js';
import type { SsiState } from './filters/ssi-state.js';
import type { TlsDetails } from './tls-details.js';
import { currentTurn, turnNowMs } from './turn-clock.js';

export type { UpstreamState };

/**
 * The client connection a request arrived on (nginx's `ngx_connection_t`):
 * what variables read of it (`ConnectionView`), with the runtime's TLS
 * details and the count of requests it served, which the runtime advances.
 */
export interface ClientConnection extends ConnectionView {
  readonly tls: TlsDetails | undefined;
  requests: number;
}

/** A new attempt at `addr`, started now. */
export function upstreamAttempt(logName: string, addr: string, earlier: readonly UpstreamState[]): UpstreamState {
  return {
    logName, addr, status: undefined, startMs: Date.now(), connectTimeMs: undefined, headerTimeMs: undefined, responseTimeMs: undefined,
    responseLength: 0, bytesReceived: 0, bytesSent: 0, headers: [], trailers: [], earlier,
  };
}

/**
 * Why a request is refused before any phase runs (while its head was read),
 * as nginx logs it at info (`client sent invalid request while reading
 * client request line`).
 */
export interface Refusal {
  readonly status: number;
  readonly message: string;
  /** The `while reading client …` part of the log line. */
  readonly reading: 'request line' | 'request headers';
  /** No response is sent (the client went away or timed out); the request is only logged. */
  readonly silent?: boolean;
  /**
   * An HTTP/2 stream refused while its header block was read: nginx had no
   * request line yet, so the log line has no `request:` and `$request` is empty.
   */
  readonly lineUnread?: boolean;
}

/** The phase a request is in, for the ` while …` part of error-log lines. */
export type LogAction = string | undefined;

/**
 * One request. Fields are written by the phases in order: the server and
 * location are chosen, rewrites change `uri`/`args`, the handler fills in the
 * upstream and status. Configuration code (variables, scripts, log formats)
 * sees it as a `RequestView`.
 */
export class HttpRequestState implements RequestView {
  /** `$remote_addr`: the client address, after the realip module. */
  clientAddr: string;
  clientPort: number;
  /** `$uri`: the decoded, normalized path; rewrites and internal redirects change it. */
  uri: string;
  /** `$args`: the query string without `?`. */
  args: string;
  /** The chosen virtual server and location; the location config in effect (an `if` block's when one matched). */
  server!: VirtualServer;
  location: CompiledLocation | undefined;
  loc!: LocationConf;
  /** Values of indexed variables (`set`, `map`, `auth_request_set`), by index; undefined = not set. */
  readonly vars: (string | undefined)[];
  /** Captures of the last successful regex match (`$1`…`$9`, named captures). */
  captures: RegExpExecArray | null = null;
  private moduleCtxMap: Map<symbol, unknown> | undefined;
  /** Modules' own state of the request (`ngx_http_get_module_ctx`), made when a module first asks (most requests: none). */
  get moduleCtx(): Map<symbol, unknown> {
    return (this.moduleCtxMap ??= new Map());
  }
  /** Response status once decided. */
  status = 0;
  /** Set when the request went through an internal redirect or is a subrequest. */
  internal = false;
  /** Cleared by `rewrite … break`: the location prefix no longer applies to `proxy_pass` URIs (nginx's `r->valid_location`). */
  validLocation = true;
  /**
   * Set when `try_files` chose a file in a location whose alias was set in a
   * regex location: the URI is then appended to the alias (nginx's
   * `r->add_uri_to_alias`); an internal redirect clears it.
   */
  addUriToAlias = false;
  /**
   * Cleared when `$args` is set (nginx's `r->valid_unparsed_uri`): a
   * `proxy_pass` without a URI then sends `$uri?$args`, not the request URI.
   */
  validUnparsedUri = true;
  /** Internal redirects and `rewrite … last` cycles so far (nginx allows 10). */
  uriChanges = 0;
  /** `$upstream_cache_status`: what the cache did for this request (MISS, HIT, EXPIRED …); undefined without a cache. */
  cacheStatus: string | undefined = undefined;
  /**
   * The validators of the stale entry being revalidated (`proxy_cache_revalidate`),
   * `$upstream_cache_last_modified` and `$upstream_cache_etag`.
   */
  cacheValidators: { readonly lastModified: string | undefined; readonly etag: string | undefined } | undefined = undefined;
  upstream: UpstreamState | undefined;
  /** What the request is doing, for error-log lines. */
  action: LogAction;
  /** Set once the realip module replaced the client address (it does so once per request). */
  realIpApplied = false;
  /** `$host`: the Host header's name part lowercased, or the server's name. */
  host = '';
  /** The validated host of the request line or Host header, '' when there was none (nginx's `headers_in.server`). */
  requestHost = '';
  /** The port given with that host, '' when none (`$request_port`). */
  requestPort = '';
  /** `$proxy_host` and `$proxy_port` of the upstream request being made. */
  proxyHost: string | undefined;
  proxyPort: string | undefined;
  /** `r->gzip_tested` and `r->gzip_ok`: `ngx_http_gzip_ok` ran for the request, and what it said. */
  gzipTested = false;
  gzipOk = false;
  /** `r->gzip_vary`: the response depends on `Accept-Encoding` (`gzip_vary on` then says so). */
  gzipVary = false;
  /**
   * `r->allow_ranges` with `r->single_range` for a response from the
   * upstream that is being cached and said `Accept-Ranges`
   * (`ngx_http_upstream_copy_allow_ranges`): the range filter sends one
   * range of it (filters/range.ts).
   */
  singleRangeAllowed = false;
  /**
   * The status a header filter ended the response with before its header
   * went out (the range filter's 416 for a response being cached): the
   * handler takes it (`takeFilterFinalizeStatus`), stops the upstream and
   * finalizes the request with it, as `ngx_http_upstream_send_response`
   * does with a header filter's HTTP status.
   */
  filterFinalizeStatus: number | undefined;
  /** Bytes the gzip filter took in and gave out, header and trailer included, once it ended (for `$gzip_ratio`). */
  gzipCounts: { readonly zin: number; readonly zout: number } | undefined;
  /** What limit_req decided (`PASSED`, `DELAYED`, `REJECTED`, `DELAYED_DRY_RUN`, `REJECTED_DRY_RUN`); a subrequest uses its main request's. */
  limitReqStatus: string | undefined;
  /** What limit_conn decided (`PASSED`, `REJECTED`, `REJECTED_DRY_RUN`); a subrequest uses its main request's. */
  limitConnStatus: string | undefined;
  /** `$limit_rate`: the response's rate in bytes per second, 0 until set or until the response's first bytes are sent (nginx's `r->limit_rate`). */
  limitRate = 0;
  /** The rate was set (`$limit_rate`, `X-Accel-Limit-Rate`) or taken from `limit_rate` (nginx's `r->limit_rate_set`). */
  limitRateSet = false;
  /**
   * The charset an upstream's `X-Accel-Charset` names (nginx's
   * `headers_out.override_charset`): the charset filter's destination,
   * whatever `charset` says.
   */
  overrideCharset: string | undefined;
  /** Bytes of the response body sent, for `$body_bytes_sent`. */
  bodyBytesSent = 0;
  /** Bytes sent to the client, headers included, for `$bytes_sent`. */
  bytesSent = 0;
  /** Length of the request body once it was read (nginx's `headers_in.content_length_n` after a chunked body). */
  bodyLength: number | undefined;
  /**
   * The request body once read whole (`$request_body` when in memory,
   * `$request_body_file` when in a temp file; nginx's `r->request_body`).
   */
  requestBody: { readonly kind: 'memory'; readonly data: Buffer } | { readonly kind: 'file'; readonly path: string } | undefined;
  /** Bytes of the request (line, headers, body), for `$request_length`. */
  requestLength = 0;
  /** Whether the response was sent completely, for `$request_completion`. */
  completed = false;
  /** False while the request line is being read: error-log lines then have no `host:`/`referrer:`. */
  headersRead = true;
  /**
   * False for an HTTP/2 stream that ended before its header block was read
   * (nginx's empty `r->request_line`): `$request` is then not found.
   */
  lineRead = true;
  /**
   * Headers set for the response before it is sent, which internal redirects
   * keep (nginx's `headers_out`): `WWW-Authenticate` of a 401, a redirect's
   * `Location`.
   */
  readonly pendingHeaders: [string, string][] = [];
  /** Set once an `error_page` was followed (nginx's `r->error_page`). */
  errorPage = false;
  /** The status an `error_page` answers with (nginx's `r->err_status`; 0 takes the target's). */
  errStatus: number | undefined;
  /** Headers the response was sent with (lowercase names), for `$sent_http_*`. */
  readonly sentHeaders = new Map<string, string | string[]>();
  /**
   * The response headers while the headers module adds to them (nginx's
   * `headers_out` during the header filters), for `$sent_http_*` in `add_header`.
   */
  outHeaders: readonly (readonly [string, string | readonly string[]])[] | undefined;
  /** The trailers of the response (`add_trailer`), once made, for `$sent_trailer_*`. */
  outTrailers: readonly (readonly [string, string])[] | undefined;
  /** The response ends with `add_trailer`'s trailers (nginx's `r->expect_trailers`). */
  expectTrailers = false;
  /**
   * The upstream trailers the response passes before `add_trailer`'s
   * (`ngx_http_upstream_process_trailers`, gRPC's `pass_trailers`): an
   * empty list from the response header on, filled once the upstream's
   * response was read whole; undefined when it passes none.
   */
  upstreamTrailers: [string, string][] | undefined;
  /**
   * The connection timed out (nginx's `c->timedout`): it is closed with a
   * reset when `reset_timedout_connection` is on.
   */
  timedOut = false;
  /**
   * What to undo when the request ends, whatever the handler did (nginx's
   * request pool cleanups): temp files removed, peers released. Added with
   * `atEnd`.
   */
  readonly cleanups: (() => void)[] = [];
  /** The request is over (its response sent or abandoned) and its cleanups ran. */
  ended = false;
  /**
   * Writes the error-log lines configuration code asks for (`logError`):
   * the phase runner's, which has the logs; a subrequest gets its parent's.
   * Without one (a request only logged), such lines are dropped.
   */
  errorLogger: ((r: HttpRequestState, level: LogLevel, message: string) => void) | undefined;

  logError(level: LogLevel, message: string): void {
    this.errorLogger?.(this, level, message);
  }

  /**
   * A background subrequest (a mirror's, nginx's `NGX_HTTP_SUBREQUEST_BACKGROUND`),
   * which may outlive the main request: what it holds is released at its own end.
   */
  background = false;
  /**
   * For the background update of an expired cache entry its parent sent
   * (`*_cache_background_update`), the entry's key, which is the parent's
   * (nginx's clone shares `r->cache`): it fetches the entry whatever
   * another request is doing with it, and never sends it.
   */
  updatesCacheKey: string | undefined = undefined;
  /**
   * The background subrequests of a main request (its mirrors, cache updates), each
   * settled when it ends: the request is over, for its access log and its
   * connection, once they all are (nginx's `r->main->count`); undefined
   * without any.
   */
  backgroundRuns: Promise<void>[] | undefined;

  /** Runs `cleanup` when the request ends (nginx's pool cleanup); at once when it has ended already. */
  atEnd(cleanup: () => void): void {
    if (this.ended) cleanup();
    else this.cleanups.push(cleanup);
  }
  /**
   * Whether the connection may serve another request after this one (nginx's
   * `r->keepalive`): what the client asked for, cleared by responses that end
   * the connection (`ngx_http_special_response_handler`); the location's
   * `keepalive_*` settings apply when the response goes out.
   */
  keepalive = false;
  /** `$request` as received, when the protocol layer has it (HTTP/1.x: the line's own spacing, or what was read of it). */
  rawRequestLine: string | undefined;
  /** The subrequest's parent, for `subrequest:` in the error log. */
  readonly parent: HttpRequestState | undefined;
  /** The SSI filter's state for this request's response, once the filter took it (nginx's module ctx). */
  ssi: SsiState | undefined;
  /**
   * The response is nginx's page for a status (`ngx_http_special_response_handler`),
   * not a handler's: an SSI `include … stub=` shows its block instead.
   */
  specialResponse = false;
  /** The method of the request line. */
  private readonly requestMethod: string;
  /** Start time in ms since the epoch. */
  readonly startMs: number;
  /** Start time on the turn clock (turn-clock.ts), for `$request_time`. */
  private readonly startMonoMs: number;
  /** The request's clock, held at the time it asked for an answer nginx has at once, for the turn the answer came in (`untimed`). */
  private heldClock: { readonly atMs: number; readonly turn: number } | undefined;

  constructor(
    readonly conn: ClientConnection,
    /** `$request_method`; an `error_page` redirect turns it into GET (HEAD stays). */
    public method: string,
    /** `$request_uri`: the request target as received. */
    readonly requestUri: string,
    /** `$server_protocol`: `HTTP/1.0`, `HTTP/1.1` or `HTTP/2.0`. */
    readonly protocol: string,
    /** Request headers with lowercase names, as node parses them. */
    readonly headers: IncomingHttpHeaders,
    /** Request headers as received: name, value, name, value … (original case, order). */
    readonly rawHeaders: readonly string[],
    /** `$scheme`. */
    readonly scheme: 'http' | 'https',
    varCount: number,
    parent?: HttpRequestState,
  ) {
    this.requestMethod = method;
    this.clientAddr = conn.peerAddr;
    this.clientPort = conn.peerPort;
    const q = requestUri.indexOf('?');
    this.uri = q === -1 ? requestUri : requestUri.slice(0, q);
    this.args = q === -1 ? '' : requestUri.slice(q + 1);
    this.vars = parent ? parent.vars : new Array<string | undefined>(varCount);
    this.parent = parent;
    this.startMs = Date.now();
    this.startMonoMs = turnNowMs();
  }

  /** The request's clock: the turn's time, or the time it was held at for this turn (`untimed`). */
  private clockMs(): number {
    const held = this.heldClock;
    return held && held.turn === currentTurn() ? held.atMs : turnNowMs();
  }

  /** The status a header filter ended the response with (`filterFinalizeStatus`), cleared: an `error_page` sends another response. */
  takeFilterFinalizeStatus(): number | undefined {
    const status = this.filterFinalizeStatus;
    this.filterFinalizeStatus = undefined;
    return status;
  }

  /** Whole milliseconds since the request began, on the turn clock (`$request_time`). */
  elapsedMs(): number {
    return Math.max(0, Math.floor(this.clockMs() - this.startMonoMs));
  }

  /**
   * Asks `ask` for an answer nginx has within one turn of its event loop
   * and jinx may not: a shared zone's (limit_req, limit_conn: nginx looks
   * it up in shared memory under its lock, a worker of jinx asks its master
   * by message) or a file's state (nginx calls `stat` and `open` in its
   * turn, jinx on libuv's threads). The turn the answer comes in sees the
   * request's clock where it was when it asked, as nginx's turn would; the
   * next turn sees the time again, the wait included, as nginx's clock
   * catches up at its next turn. An answer at hand takes no turn.
   */
  async untimed<T>(ask: () => T | Promise<T>): Promise<T> {
    const askedAtMs = this.clockMs();
    const answer = ask();
    if (!(answer instanceof Promise)) return answer;
    try {
      return await answer;
    } finally {
      this.heldClock = { atMs: askedAtMs, turn: currentTurn() };
    }
  }

  /**
   * A subrequest of this request to `uri` with `args` (`ngx_http_subrequest`):
   * GET without a body, the client's headers, internal, entering this
   * request's server at its server level, sharing its variables.
   */
  subrequest(uri: string, args: string, varCount: number): HttpRequestState {
    const sr = new HttpRequestState(this.conn, 'GET', this.requestUri, this.protocol, this.headers, this.rawHeaders, this.scheme, varCount, this);
    sr.uri = uri;
    sr.args = args;
    sr.internal = true;
    sr.server = this.server;
    sr.loc = this.server.conf;
    sr.host = this.host;
    sr.requestHost = this.requestHost;
    sr.requestPort = this.requestPort;
    sr.clientAddr = this.clientAddr;
    sr.clientPort = this.clientPort;
    sr.errorLogger = this.errorLogger;
    return sr;
  }

  /**
   * A subrequest that clones this request (`NGX_HTTP_SUBREQUEST_CLONE`):
   * the same URI, arguments, method, location and captures, to run from the
   * content phase (the slice filter's pieces).
   */
  cloneSubrequest(varCount: number): HttpRequestState {
    const sr = this.subrequest(this.uri, this.args, varCount);
    sr.method = this.method;
    sr.loc = this.loc;
    sr.captures = this.captures;
    return sr;
  }

  /**
   * `$request`: the request line as received (nginx's `r->request_line`): an
   * `error_page` redirect that turns the method into GET leaves it as it
   * was, and a subrequest has its parent's.
   */
  get requestLine(): string {
    if (this.parent) return this.parent.requestLine;
    if (!this.lineRead) return '';
    if (this.rawRequestLine !== undefined) return this.rawRequestLine;
    return `${this.requestMethod} ${this.requestUri} ${this.protocol}`;
  }

  /** The main request (nginx's `r->main`): the client's, for a subrequest of any depth. */
  get main(): HttpRequestState {
    let r: HttpRequestState = this;
    while (r.parent) r = r.parent;
    return r;
  }

  /**
   * `$request_method`: the method of the main request (a subrequest's own
   * is GET, but nginx reports its parent's), GET after an `error_page` redirect.
   */
  get mainMethod(): string {
    return this.parent ? this.main.method : this.method;
  }

  /** `$document_root`: the `root` (or `alias`) of the location in effect. */
  documentRoot(): string {
    return this.loc.root.path.evaluate(this);
  }

  /**
   * The file a URI maps to (`ngx_http_map_uri_to_path`): root + URI; for an
   * `alias`, the alias + the URI after the location's name; for an alias
   * set in a regex location, the alias alone, or + the URI after `try_files`
   * chose a file (`addUriToAlias`).
   */
  mapUriToPath(uri: string): string {
    const root = this.documentRoot();
    const { alias, aliasRegex, aliasLength } = this.loc.root;
    if (!alias) return root + uri;
    if (aliasRegex) return this.addUriToAlias ? root + uri : root;
    return root + uri.slice(Math.min(aliasLength, uri.length));
  }

  /** `$request_filename`: the file the URI maps to. */
  requestFilename(): string {
    return this.mapUriToPath(this.uri);
  }
}
