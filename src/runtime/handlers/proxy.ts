/**
 * The proxy handler (`ngx_http_proxy_module.c`, `ngx_http_upstream.c`): builds
 * the upstream URL and headers as nginx does, sends the request through
 * undici, streams the response back with backpressure, and reports failures
 * with nginx's status and error-log line.
 */
import { PassThrough, type Duplex, type Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { predicatesHold } from '../../config/modules/cache.js';
import type { ProxyConf } from '../../config/route-table.js';
import { logRequest } from '../context.js';
import { DONE, statusOutcome, type Exchange, type Outcome } from '../exchange.js';
import { accelRedirectOf, keepForRedirect } from './accel-redirect.js';
import type { HttpRequestState, UpstreamState } from '../request.js';
import { absoluteLocation, applyHeadersModule, keptHeaders } from '../respond.js';
import { tunnel } from '../tunnel.js';
import { escapeUri } from '../uri.js';
import { systemErrorText } from '../../os-errors.js';
import {
  bodyOfUnknownLength, bodyStream, keepPassedBody, readRequestBody, removeCleanBody, requestHasBody, watchReadTimeout, watchSendTimeout, type DiscardableBody, type RequestBody,
} from '../request-body.js';
import { accelBuffering, ResponseSpool } from '../spool.js';
import { takeAccelCharset } from '../filters/charset.js';
import { takeAccelLimitRate } from '../limit-rate.js';
import { bodyTurns } from '../turn-budget.js';
import {
  mapUpstreamError, SendTimeoutError, upstreamFailure, upstreamTimeout, WorkerConnectionsError, type UpstreamFailure, type UpstreamStage,
} from '../upstream/errors.js';
import { servernameOption, sslName } from '../upstream/tls.js';
import type { PoolSettings } from '../upstream/clients.js';
import type { UpstreamRequest } from '../upstream/peer-connections.js';
import { ConfigError } from '../../errors.js';
import { nextConditionOf, type NextCondition, type PeerAttempts } from '../upstream/round-robin.js';
import { dynamicPeer, endAttempt, firstPeer, startAttempt, stickyAnswered, type ChosenPeer, type PeerChoice } from './upstream-peer.js';
import { interceptsError, nextOrAnswer, responseFailed } from './upstream-attempt.js';
import { rewriteSetCookie, rewritesCookies } from './proxy-cookies.js';
import { WireMeter } from '../upstream/undici-socket.js';
import { holdReadsForTurn, releasedReadBuffer } from '../upstream/read-buffers.js';
import { allowSingleRange, cacheStart, type CacheStore } from '../cache/upstream-cache.js';

/**
 * Response headers nginx never passes from an upstream: it reads them for the
 * connection and framing and writes its own (`ngx_http_upstream_headers_in`);
 * `Upgrade`, `TE`, `Trailer` and `Proxy-Connection` are passed on.
 */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding']);

/** Request headers undici manages itself or refuses. */
const UNDICI_MANAGED = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'expect', 'te']);

/** The body of a request whose `Content-Length` is 0. */
const NO_BYTES = Buffer.alloc(0);

/** Request headers of an HTTP/1 connection that HTTP/2 forbids (RFC 9113 8.2.2; node's HTTP/2 refuses them). */
const H2_REFUSED = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

/** The scheme of the peer's address in log lines: `http`, `https`, or for gRPC `grpc`, `grpcs` (nginx's `u->schema`). */
function logScheme(p: ProxyConf, scheme: 'http' | 'https'): string {
  if (p.module === 'proxy') return scheme;
  return scheme === 'https' ? 'grpcs' : 'grpc';
}

/** The URI after the peer's address in log lines: the proxy's upstream URI; none for gRPC (which sets no `u->uri`). */
function logUri(p: ProxyConf, uri: string): string {
  return p.module === 'proxy' ? uri : '';
}

/** Where one proxied request goes. */
export interface Destination {
  readonly scheme: 'http' | 'https';
  readonly peer: ChosenPeer;
  /** The group's attempts, when the peer belongs to a group (other peers may be tried). */
  readonly attempts: PeerAttempts | undefined;
  /** URI sent in the request line. */
  readonly uri: string;
  /** `$proxy_host`. */
  readonly hostHeader: string;
  readonly port: number;
}

/**
 * The URI of the upstream request (`ngx_http_proxy_create_request`): with a
 * URI part, the matched location prefix is replaced by it; without one, the
 * request URI as received, unless a rewrite or redirect changed it.
 */
export function upstreamUri(r: HttpRequestState, p: ProxyConf, uriPart: string | undefined): string {
  if (uriPart === undefined && !r.internal && !r.parent && r.validUnparsedUri) return r.requestUri;
  const prefixLen = r.validLocation && uriPart !== undefined ? p.locationPrefix.length : 0;
  const rest = escapeUri(r.uri.slice(Math.min(prefixLen, r.uri.length)));
  return (r.validLocation ? uriPart ?? '' : '') + rest + (r.args ? `?${r.args}` : '');
}

/** Splits a URL evaluated from variables; undefined when it is not http(s). */
function parseUrl(url: string): { scheme: 'http' | 'https'; host: string; port: number | undefined; uri: string | undefined } | undefined {
  const m = /^(https?):\/\/(\[[^\]]+\]|[^/:?#]*)(?::(\d*))?(.*)$/is.exec(url);
  if (!m) return undefined;
  const scheme = m[1]!.toLowerCase() as 'http' | 'https';
  return { scheme, host: m[2]!, port: m[3] ? Number(m[3]) : undefined, uri: m[4] === '' ? undefined : m[4] };
}

/**
 * Splits a `grpc_pass` address evaluated from variables (`ngx_http_grpc_eval`):
 * `grpc://` or no scheme is cleartext, `grpcs://` TLS; undefined when what
 * follows is not `HOST[:PORT]`.
 */
function parseGrpcUrl(url: string): { scheme: 'http' | 'https'; host: string; port: number | undefined; uri: undefined } | undefined {
  const m = /^(?:(grpcs?):\/\/)?(\[[^\]]+\]|[^/:?#]+)(?::(\d+))?$/is.exec(url);
  if (!m) return undefined;
  return { scheme: m[1]?.toLowerCase() === 'grpcs' ? 'https' : 'http', host: m[2]!, port: m[3] ? Number(m[3]) : undefined, uri: undefined };
}

/** `$proxy_host` of a URL: the host, and the port unless it is the scheme's. */
function hostHeaderOf(scheme: 'http' | 'https', host: string, port: number | undefined): string {
  return port === undefined || port === (scheme === 'https' ? 443 : 80) ? host : `${host}:${port}`;
}

/** Finds the destination of a `proxy_pass` with variables, or returns the status to answer. */
async function dynamicDestination(ex: Exchange, p: ProxyConf & { target: { kind: 'variable' } }): Promise<Destination | number> {
  const { r, cx } = ex;
  const url = p.target.url.evaluate(r);
  const parsed = p.module === 'grpc' ? parseGrpcUrl(url) : parseUrl(url);
  if (!parsed) {
    logRequest(cx, r, 'error', p.module === 'grpc' ? `invalid host in upstream "${url.replace(/^grpcs?:\/\//i, '')}"` : `invalid URL prefix in "${url}"`);
    return 500;
  }
  // ngx_http_upstream_init_request: an address without a port that names no upstream block (gRPC has no default port)
  if (p.module === 'grpc' && parsed.port === undefined && !cx.table.upstreams.has(parsed.host.toLowerCase())) {
    logRequest(cx, r, 'error', `no port in upstream "${parsed.host}"`);
    return 500;
  }
  const defaultPort = parsed.scheme === 'https' ? 443 : 80;
  const hostHeader = hostHeaderOf(parsed.scheme, parsed.host, parsed.port);
  const uri = parsed.uri ?? upstreamUri(r, p, undefined);
  const choice = await dynamicPeer(ex, parsed.host, parsed.port, defaultPort, p, logScheme(p, parsed.scheme), logUri(p, uri));
  if (typeof choice === 'number') return choice;
  return { scheme: parsed.scheme, peer: choice.peer, attempts: choice.attempts, uri, hostHeader, port: choice.peer.port };
}

/**
 * The request headers: `proxy_set_header` (with nginx's defaults) first, then
 * the client's others. `reuse` tells whether the connection may be kept: a
 * `Connection: close` header, `proxy_http_version 1.0`, or a peer without
 * keepalive, ends it (undici always speaks HTTP/1.1; with 1.0 jinx keeps
 * nginx's one connection per request). `upgrade` is the `Upgrade` header set
 * by `proxy_set_header` (the client's own is never passed, as nginx's
 * default `Upgrade ""`); undici writes it with `Connection: upgrade`.
 * `omitted` lists the fields undici cannot write (see `unsendable`), left out.
 */
export function requestHeaders(r: HttpRequestState, p: ProxyConf, dest: Destination): { headers: string[]; reuse: boolean; upgrade: string | undefined; omitted: string[] } {
  const out: string[] = [];
  const omitted: string[] = [];
  let reuse = dest.peer.keepalive > 0 && p.httpVersion !== '1.0';
  let upgrade: string | undefined;
  const managed = p.httpVersion === '2' ? H2_REFUSED : UNDICI_MANAGED;
  const add = (name: string, value: string): void => {
    const why = unsendable(name, value);
    if (why) omitted.push(`header "${name}" left out of the upstream request: ${why}`);
    else out.push(name, value);
  };
  for (const h of p.headers) {
    const v = h.value.evaluate(r);
    if (v === '') continue;
    if (h.lowerName === 'upgrade') {
      upgrade = v;
      continue;
    }
    if (h.lowerName === 'connection') {
      if (v.toLowerCase().split(',').some((t) => t.trim() === 'close')) reuse = false;
      continue;
    }
    if (managed.has(h.lowerName)) continue;
    add(h.name, v);
  }
  if (!p.passRequestHeaders) return { headers: out, reuse, upgrade, omitted };
  const raw = r.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    if (lower.charCodeAt(0) === 58 || p.headerNames.has(lower) || managed.has(lower) || lower === 'host') continue;
    if (lower === 'content-length') continue;
    add(name, raw[i + 1]!);
  }
  return { headers: out, reuse, upgrade, omitted };
}

/** A header value undici refuses to write: a control byte other than a tab, or DEL (undici's `isValidHeaderValue`). */
const CONTROL_IN_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
/** A header name undici writes: a token (undici's `isValidHTTPToken`). */
const TOKEN_NAME = /^[\^_`a-zA-Z\-0-9!#$%&'*+.|~]+$/;

/**
 * Why undici cannot write a header field nginx passes on, if it cannot:
 * nginx reads a value with any byte but NUL, CR and LF
 * (`ngx_http_parse_header_line`), and a name with any with
 * `ignore_invalid_headers off`, and sends them as they came; undici refuses
 * the whole request for one such field. jinx leaves the field out and
 * serves the request (an `info` line says so).
 */
function unsendable(name: string, value: string): string | undefined {
  if (!TOKEN_NAME.test(name)) return 'its name is not a token';
  if (CONTROL_IN_VALUE.test(value)) return 'its value has a control character';
  return undefined;
}

/**
 * Rewrites a `Location`, or the URL after `url=` in a `Refresh`, per
 * `proxy_redirect` (`ngx_http_proxy_rewrite_redirect`, `…_rewrite_refresh`).
 */
function rewriteRedirect(r: HttpRequestState, p: ProxyConf, header: 'location' | 'refresh', value: string): string | undefined {
  if (header === 'location') return rewriteLocation(r, p, value);
  const m = /url=/i.exec(value);
  if (!m) return undefined;
  const at = m.index + 4;
  const url = rewriteLocation(r, p, value.slice(at));
  return url === undefined ? undefined : value.slice(0, at) + url;
}

function rewriteLocation(r: HttpRequestState, p: ProxyConf, value: string): string | undefined {
  for (const rule of p.redirect) {
    if ('regex' in rule) {
      // ngx_http_proxy_rewrite_regex_handler: the whole value is replaced, with the match's captures
      const m = rule.regex.exec(value);
      if (!m) continue;
      r.captures = m;
      return rule.to.evaluate(r);
    }
    const from = rule.from.evaluate(r);
    if (value.startsWith(from)) return rule.to.evaluate(r) + value.slice(from.length);
  }
  return undefined;
}

/** Upstream headers of which nginx takes the first and ignores the others, with a warning (`ngx_http_upstream_process_unique_header`). */
const UNIQUE = new Set(['date', 'etag', 'location', 'expires', 'last-modified', 'content-type', 'refresh']);

/** What `checkUpstreamHeaders` found; `ignored` holds header indexes (into `names`). */
interface UpstreamHeaderCheck {
  readonly invalid: string | undefined;
  readonly warnings: readonly string[];
  readonly ignored: ReadonlySet<number> | undefined;
}

const CLEAN_HEADERS: UpstreamHeaderCheck = { invalid: undefined, warnings: [], ignored: undefined };

/**
 * nginx's checks of an upstream response header that undici's parser lets
 * through (`ngx_http_upstream_headers_in`): a second `Transfer-Encoding`, or
 * one other than `chunked`, makes it invalid (502 or the next server); a
 * repeated unique header is ignored with a warning. `names`, `values` and
 * `lowers` (lowercased names) are the header lines in order.
 */
function checkUpstreamHeaders(names: readonly string[], values: readonly string[], lowers: readonly string[]): UpstreamHeaderCheck {
  let warnings: string[] | undefined;
  let ignored: Set<number> | undefined;
  const line = (k: number): string => `"${names[k]}: ${values[k]}"`;
  for (let k = 0; k < lowers.length; k++) {
    const lower = lowers[k]!;
    const transferEncoding = lower === 'transfer-encoding';
    if (!transferEncoding && !UNIQUE.has(lower)) continue;
    // the first line of that name (a later one that is ignored never counts as the first)
    const seen = lowers.indexOf(lower);
    if (transferEncoding) {
      if (seen !== k) return { invalid: `upstream sent duplicate header line: ${line(k)}, previous value: ${line(seen)}`, warnings: warnings ?? [], ignored };
      if (values[k]!.toLowerCase() !== 'chunked') return { invalid: `upstream sent unknown "Transfer-Encoding": "${values[k]}"`, warnings: warnings ?? [], ignored };
    } else if (seen !== k) {
      (warnings ??= []).push(`upstream sent duplicate header line: ${line(k)}, previous value: ${line(seen)}, ignored`);
      (ignored ??= new Set()).add(k);
    }
  }
  return warnings === undefined ? CLEAN_HEADERS : { invalid: undefined, warnings, ignored };
}

/**
 * Proxies the request: reads its body first (`proxy_request_buffering on`),
 * then sends it upstream. A plain function on the common path (no body to
 * read first), see phases.ts.
 */
export function proxyRequest(ex: Exchange): Promise<Outcome> {
  return passUpstream(ex, ex.r.loc.proxy!);
}

/**
 * `grpc_pass` (`ngx_http_grpc_handler`): the request goes over HTTP/2, its
 * body passed as it arrives (`r->request_body_no_buffering`), the response
 * passed as read, trailers included.
 */
export function grpcRequest(ex: Exchange): Promise<Outcome> {
  return passUpstream(ex, ex.r.loc.grpc!);
}

/** The request to the upstream of `p` (the proxy's or gRPC's settings). */
function passUpstream(ex: Exchange, p: ProxyConf): Promise<Outcome> {
  // a client that leaves from now on (while its body is read, the cache looked up) cancels the upstream request
  ex.out.onAbort(() => undefined);
  const withBody = p.passRequestBody && ex.body !== undefined && requestHasBody(ex.r, ex.body);
  // ngx_http_proxy_handler: the body is passed on as it arrives (r->request_body_no_buffering) with
  // proxy_request_buffering off, unless proxy_set_body replaces it or a chunked body meets HTTP/1.0;
  // then client_body_in_file_only does not apply
  const unbuffered = withBody && !p.requestBuffering && !p.setBody
    && (!bodyOfUnknownLength(ex.r, ex.body) || p.httpVersion !== '1.0');
  if (unbuffered || p.module === 'grpc') return forward(ex, p, withBody, undefined);
  // client_body_in_file_only makes a file even of an empty body
  const inFile = ex.r.loc.clientBodyInFileOnly !== 'off' && ex.body !== undefined && ex.r.headers['content-length'] !== undefined;
  // with proxy_set_body the client's body is read (for $request_body) but not sent
  if (withBody || inFile) return bufferedProxyRequest(ex, p);
  return forward(ex, p, false, undefined);
}

async function bufferedProxyRequest(ex: Exchange, p: ProxyConf): Promise<Outcome> {
  const body = await readRequestBody(ex);
  if ('status' in body) return body.status === 0 ? { kind: 'close' } : statusOutcome(body.status);
  try {
    const passed = p.passRequestBody && !p.setBody;
    return await forward(ex, p, passed, passed ? body : undefined);
  } finally {
    if (body.kind === 'file') await body.file.handle.close().catch(() => undefined);
  }
}

/**
 * Answers from the cache when the location has one (`proxy_cache`), else
 * finds the peer and sends the request; the promise settles when the
 * response is done. `$proxy_host` is known before the cache key is made.
 * Without `proxy_cache_key` the key is the upstream request's URL: the
 * scheme and host of `proxy_pass`, then the URI the request goes upstream
 * with (`ngx_http_proxy_create_key`; `http://127.0.0.1:8081/x` for
 * `location /api/ { proxy_pass http://127.0.0.1:8081/; }` and `/api/x`).
 */
function forward(ex: Exchange, p: ProxyConf, withBody: boolean, body: RequestBody | undefined): Promise<Outcome> {
  if (!p.cache) return forwardUpstream(ex, p, withBody, body, undefined);
  const { r } = ex;
  let defaultKey = '';
  if (p.target.kind === 'static') {
    r.proxyHost = p.target.hostHeader;
    defaultKey = `${p.target.scheme}://${r.proxyHost}${upstreamUri(r, p, p.target.uri)}`;
  } else {
    const parsed = parseUrl(p.target.url.evaluate(r));
    if (parsed) {
      r.proxyHost = hostHeaderOf(parsed.scheme, parsed.host, parsed.port);
      defaultKey = `${parsed.scheme}://${r.proxyHost}${parsed.uri ?? upstreamUri(r, p, undefined)}`;
    }
  }
  return cacheStart(ex, p.cache, proxyRequest, defaultKey).then((start) => (start.kind === 'served' ? start.outcome : forwardUpstream(ex, p, withBody, body, start.store)));
}

/** Finds the peer and sends the request; `store` may cache the response. */
function forwardUpstream(ex: Exchange, p: ProxyConf, withBody: boolean, body: RequestBody | undefined, store: CacheStore | undefined): Promise<Outcome> {
  const { r, cx } = ex;
  const target = p.target;
  if (target.kind === 'static') {
    const uri = upstreamUri(r, p, target.uri);
    const sendTo = (choice: PeerChoice | number): Promise<Outcome> => {
      if (typeof choice === 'number') {
        store?.abort();
        return Promise.resolve(statusOutcome(choice));
      }
      const dest = { scheme: target.scheme, peer: choice.peer, attempts: choice.attempts, uri, hostHeader: target.hostHeader, port: choice.peer.port };
      return send(ex, p, dest, withBody, body, false, store);
    };
    const choice = firstPeer(ex, cx.table.upstreams.get(target.group)!, p, logScheme(p, target.scheme), logUri(p, uri));
    return choice instanceof Promise ? choice.then(sendTo) : sendTo(choice);
  }
  return dynamicDestination(ex, p as ProxyConf & { target: typeof target }).then((dest) => {
    if (typeof dest !== 'number') return send(ex, p, dest, withBody, body, false, store);
    store?.abort();
    return statusOutcome(dest);
  });
}

/**
 * Sends the request to `dest` through undici; resolves when the response has
 * gone to the client (or failed). `retry` tells that an earlier peer of the
 * group failed (`$upstream_addr` then lists both).
 */
function send(
  ex: Exchange, p: ProxyConf, dest: Destination, withBody: boolean, body: RequestBody | undefined, retry: boolean, store: CacheStore | undefined,
): Promise<Outcome> {
  const { r, cx } = ex;
  r.proxyHost = dest.hostHeader;
  // a unix domain socket has no port: `$proxy_port` is empty (ngx_http_proxy_set_vars)
  r.proxyPort = dest.port > 0 ? String(dest.port) : '';
  // ngx_http_upstream_log_error: a unix domain socket's name and the URI are joined by ':'
  const state = startAttempt(ex, `${logScheme(p, dest.scheme)}://${dest.peer.name}${dest.peer.path !== undefined ? ':' : ''}${logUri(p, dest.uri)}`, dest.peer, retry);
  const { headers, reuse, upgrade, omitted } = requestHeaders(r, p, dest);
  for (const line of omitted) logRequest(cx, r, 'info', line);
  // proxy_set_body: its value is the body, whatever the client sent (ngx_http_proxy_create_request)
  const setBody = p.setBody && Buffer.from(p.setBody.evaluate(r), 'latin1');
  if (setBody) headers.push('Content-Length', String(setBody.length));
  else if (body) headers.push('Content-Length', String(body.kind === 'memory' ? body.data.length : body.size));
  // (gRPC's is its `Content-Length $content_length` default header)
  else if (withBody && p.module === 'proxy' && r.headers['content-length'] !== undefined) headers.push('Content-Length', r.headers['content-length']);
  r.action = 'connecting to upstream';
  let settings: PoolSettings = p;
  const certificateFiles = dest.scheme === 'https' ? p.tls?.certificateFiles : undefined;
  if (certificateFiles) {
    try {
      settings = cx.upstreams.clientCertificate(p, certificateFiles.cert.evaluate(r), certificateFiles.key.evaluate(r));
    } catch (err) {
      // nginx: ngx_http_upstream_ssl_init_connection finalizes with 500
      logRequest(cx, r, 'error', err instanceof ConfigError ? err.text : String(err));
      store?.abort();
      return Promise.resolve(statusOutcome(500));
    }
  }
  const pool = cx.upstreams.pool(dest.scheme, dest.peer, settings);
  const passed = !setBody && !body && withBody ? passedBody(ex.r, ex.body!) : undefined;
  // gRPC: a Content-Length of 0 is a body of nothing (an empty DATA frame); without one, HEADERS end the stream (h2-connections.ts)
  const source = setBody || (body ? bodyStream(body) : passed ?? (p.module === 'grpc' && r.headers['content-length'] !== undefined ? NO_BYTES : null));
  const options: Dispatcher.DispatchOptions & { servername?: string; authority?: string } = {
    path: dest.uri,
    // proxy_method, else the client's (an empty value too: undici refuses an empty method); a HEAD whose
    // response may be cached is sent as GET (proxy_cache_convert_head)
    method: p.method?.evaluate(r) || (r.method === 'HEAD' && r.cacheStatus !== undefined && p.cache?.convertHead ? 'GET' : r.method),
    headers,
    body: source,
    headersTimeout: p.readTimeoutMs,
    bodyTimeout: p.readTimeoutMs,
    reset: !reuse,
    // only a client connection that can become a tunnel asks the upstream to upgrade
    upgrade: upgrade !== undefined && ex.out.tunnelable ? upgrade : null,
    // HTTP/2's `:authority` (ngx_http_grpc_create_request: the host of grpc_pass, unless a Host header goes)
    authority: dest.hostHeader,
  };
  if (dest.scheme === 'https') {
    // the name for SNI and the certificate check, per request (undici's Request reads `servername`)
    const name = p.tls?.name;
    options.servername = servernameOption(sslName(name ? name.evaluate(r) : dest.hostHeader));
  } else {
    // no SNI over plain TCP: an empty name spares undici's Request deriving one from the Host header (net.isIP's
    // IPv6 pattern tried on every request)
    options.servername = servernameOption('');
  }
  let started: ProxyResponse | undefined;
  return new Promise<Outcome>((resolve) => {
    const handler = new ProxyResponse(ex, p, dest, { withBody, body, method: options.method }, state, resolve, store);
    started = handler;
    ex.out.onAbort((err) => handler.clientClosed(err));
    if (passed) {
      watchReadTimeout(passed, r.loc.clientBodyTimeoutMs, () => handler.bodyTimedOut());
      keepPassedBody(r, passed);
      // a chunked body goes on chunked: its last piece and the last chunk leave together
      const client = ex.body as Readable & Partial<DiscardableBody>;
      if (r.headers['content-length'] === undefined && client.endRead !== undefined) {
        passed.prependListener('data', () => client.endRead && handler.holdWrites());
      }
    }
    if (source && !Buffer.isBuffer(source)) watchSendTimeout(source, p.sendTimeoutMs, () => handler.sendTimedOut());
    handler.dispatched(pool.dispatch(options, handler));
    // the connection of a client that left while the upstream was read to its end closes once the outcome is followed
  }).then((outcome) => (started?.clientLeft && !outcome.thenClose ? { ...outcome, thenClose: true } : outcome));
}

/**
 * The client's body as undici reads it when passed on as it arrives. An
 * HTTP/2 request's stream goes through a stream of its own: undici destroys
 * the body it sent when the upstream answers first, and destroying the
 * request would reset the client's stream (an error_page that follows,
 * `proxy_intercept_errors`, still has a client to answer).
 */
function passedBody(r: HttpRequestState, body: Readable): Readable {
  if (r.protocol !== 'HTTP/2.0') return body;
  const passed = new PassThrough();
  // undici hears of the failure when it reads the stream; a request cancelled before that leaves no one else to
  passed.on('error', () => undefined);
  body.once('error', (err) => passed.destroy(err));
  body.once('aborted', () => passed.destroy(Object.assign(new Error('aborted'), { code: 'ECONNRESET' })));
  return body.pipe(passed);
}

/** The reason a client abort is passed to undici, told apart from upstream failures. */
const CLIENT_CLOSED = new Error('client closed');
/** The same for a client that stopped sending its body (`client_body_timeout`). */
const BODY_TIMED_OUT = new Error('client body timed out');

/**
 * One upstream response on its way to the client, on undici's dispatch
 * handler interface (`onConnect`/`onHeaders`/`onData`/`onComplete`/`onError`,
 * the one undici's clients call; its newer controller interface is wrapped
 * onto this one with a header re-parse per response). Returning false from
 * `onData` pauses the upstream until `resume` is called.
 */
class ProxyResponse implements Dispatcher.DispatchHandler {
  /** `intercepted`: an error_page or X-Accel-Redirect took the request over. */
  private stage: UpstreamStage | 'intercepted' = 'connect';
  /** The request is being written to the peer (nginx's `u->request_sent`). */
  private requestSent = false;
  /** The request on its upstream connection, once dispatched. */
  private upstream: UpstreamRequest | undefined;
  /** Why the request was cancelled before it was dispatched. */
  private cancelled: Error | undefined;
  private resumeReading: (() => void) | undefined;
  private paused = false;
  /** Waiting for a later turn of the event loop (`bodyTurns`). */
  private yielded = false;
  /** Waiting for the cache's file to take what was read (`CacheStore.drained`). */
  private storing = false;
  private spool: ResponseSpool | undefined;
  private expectedBytes: number | undefined;
  private receivedBytes = 0;
  /** Bytes of the upstream's `103 Early Hints` heads so far (nginx's `u->early_hints_length`). */
  private earlyHintsBytes = 0;
  /** The whole response was read from the upstream. */
  private complete = false;
  /** The connection became a tunnel (`101 Switching Protocols`). */
  private tunneled = false;
  /** The bytes of this attempt on its connection. */
  private readonly wire = new WireMeter();
  /** The client went away while the upstream is read to its end (a response being cached, `proxy_ignore_client_abort`). */
  clientLeft = false;
  /** The last bytes of a response being cached, sent once its entry is in place. */
  private heldLast: Buffer | undefined;

  constructor(
    private readonly ex: Exchange,
    private readonly p: ProxyConf,
    private readonly dest: Destination,
    /** What was sent: whether with a body, the body read first, the method. */
    private readonly request: { readonly withBody: boolean; readonly body: RequestBody | undefined; readonly method: string },
    /** This attempt's `$upstream_*` state. */
    private readonly state: UpstreamState,
    /** Settles the attempt with how the request goes on. */
    private readonly resolve: (outcome: Outcome) => void,
    /** Copies the response into the cache, when it may be cached. */
    private readonly store: CacheStore | undefined,
  ) {}

  /** Ends the attempt's `$upstream_*` state: its time, the bytes of its connection, its body's length. */
  private endState(): void {
    endAttempt(this.state, this.wire, this.receivedBytes);
  }

  /**
   * `ngx_http_upstream_next`: gives up on this peer for `condition` and
   * sends the request to the next one, or answers with nginx's status.
   */
  private next(condition: NextCondition, failure: UpstreamFailure | undefined): void {
    const { ex, p, dest, request } = this;
    this.endState();
    const next = nextOrAnswer(ex, dest.attempts, {
      condition, failure, requestSent: this.requestSent, bodyUnbuffered: request.withBody && request.body === undefined, scheme: logScheme(p, dest.scheme), uri: logUri(p, dest.uri),
    }, this.store);
    if (next instanceof Promise) {
      void next.then(this.resolve);
      return;
    }
    void send(ex, p, { ...dest, peer: next, port: next.port }, request.withBody, request.body, true, this.store).then(this.resolve, () => this.resolve(DONE));
  }

  /** The request went to its connection (or waits for it to open): `abortUpstream` reaches it from now on. */
  dispatched(request: UpstreamRequest): void {
    this.upstream = request;
    if (this.cancelled) request.cancel(this.cancelled);
  }

  /**
   * Ends the upstream request and closes its connection, at whatever stage
   * (connecting, sending, reading); `onError` hears of it with `err`.
   */
  private abortUpstream(err: Error): void {
    if (this.upstream) this.upstream.cancel(err);
    else this.cancelled ??= err;
  }

  /** The body's last piece is being sent: see `WireMeter.holdWrites`. */
  holdWrites(): void {
    this.wire.holdWrites();
  }

  /** `proxy_send_timeout` passed with the upstream taking none of the body. */
  sendTimedOut(): void {
    this.abortUpstream(new SendTimeoutError());
  }

  /**
   * The client sent none of its body for `client_body_timeout` while it was
   * streamed upstream: nginx ends the request with 408, closing both
   * connections without a response and without a log line.
   */
  bodyTimedOut(): void {
    this.ex.r.timedOut = true;
    this.paused = false;
    this.yielded = false;
    this.storing = false;
    this.abortUpstream(BODY_TIMED_OUT);
  }

  /**
   * The client went away before the response was complete. While the
   * upstream is still being read, nginx notices it as its check of the
   * client connection does (`ngx_http_upstream_check_broken_connection`,
   * epoll's report of a closed peer): `epoll_wait() reported that client
   * prematurely closed connection, so upstream connection is closed too`,
   * 499 when no header was sent; with `proxy_ignore_client_abort on` it goes
   * on reading the upstream. Once the response is read and only being sent,
   * `ngx_http_test_reading` says `client prematurely closed connection while
   * sending to client`. A reset adds `(104: Connection reset by peer)`.
   */
  clientClosed(err: NodeJS.ErrnoException | undefined): void {
    const { r, cx, out } = this.ex;
    // a tunnel watches both of its sides itself; an error_page or X-Accel-Redirect took the request over
    if (this.tunneled || this.stage === 'intercepted') return;
    if (err?.code === 'ETIMEDOUT') {
      // send_timeout passed (logged): the upstream goes with the client, silently
      this.spool?.abort();
      if (!this.complete) this.abortUpstream(CLIENT_CLOSED);
      return;
    }
    // a system error (a reset) is printed with its number, not the parser's errors of an abandoned request
    const errno = err?.code !== undefined && /^E[A-Z]+$/.test(err.code) ? ` (${systemErrorText(err)})` : '';
    if (this.complete) {
      // ngx_http_test_reading: the request ends, its connection closes
      this.spool?.abort();
      r.action = 'sending to client';
      logRequest(cx, r, 'info', `client prematurely closed connection${errno}`);
      out.abort();
      return;
    }
    if (this.p.ignoreClientAbort || this.store?.active) {
      // the upstream is read to its end, its data dropped (a response being cached is stored whole:
      // ngx_http_upstream_check_broken_connection closes only an upstream that is not cacheable);
      // the client connection is closed once it is read
      this.clientLeft = true;
      this.spool?.abort();
      return;
    }
    // ngx_http_upstream_check_broken_connection: an HTTP/2 stream's end was logged by the stream
    // (`client canceled stream N`, or the connection's error), and its request ends silently
    if (r.protocol !== 'HTTP/2.0') {
      logRequest(cx, r, 'info', `epoll_wait() reported that client prematurely closed connection, so upstream connection is closed too${errno}`);
    }
    if (!out.started) r.status = 499;
    // aborted while paused: a resume after the abort would have undici open a new connection
    this.paused = false;
    this.yielded = false;
    this.storing = false;
    this.abortUpstream(CLIENT_CLOSED);
    this.spool?.abort();
  }

  /**
   * undici calls this when the request goes out on a connection that is
   * ready (after the TLS handshake). The action stays "sending request to
   * upstream" until the response arrives: nginx changes it when it first
   * reads from the upstream (`ngx_http_upstream_process_header`).
   */
  onConnect(): void {
    this.requestSent = true;
    this.wire.arm();
    this.state.connectTimeMs ??= Date.now() - this.state.startMs;
    if (this.stage === 'connect') this.stage = 'header';
    this.ex.r.action = 'sending request to upstream';
  }

  /**
   * An upstream's `103 Early Hints` (`ngx_http_upstream_process_early_hints`):
   * while the 103 heads of the response fit in `proxy_buffer_size` together,
   * its headers but the hidden ones (`proxy_hide_header` and nginx's
   * defaults), if any, go to the client when one of the location's
   * `early_hints` values is neither empty nor "0"; past that size, each 103 is an `[info]
   * upstream sent too big early hints`.
   */
  private passEarlyHints(rawHeaders: Buffer[], statusText: string): void {
    const { ex, p } = this;
    const { r } = ex;
    r.action = 'reading response header from upstream';
    const headers: [string, string][] = [];
    // the head's size in the header buffer: status line, header lines, blank line
    let bytes = 15 + statusText.length + 2;
    for (let k = 0; k + 1 < rawHeaders.length; k += 2) {
      const name = rawHeaders[k]!.toString('latin1');
      const value = rawHeaders[k + 1]!.toString('latin1');
      bytes += name.length + value.length + 4;
      if (!p.hideHeaders.has(name.toLowerCase())) headers.push([name, value]);
    }
    this.earlyHintsBytes += bytes;
    if (this.earlyHintsBytes > p.bufferSizeBytes) {
      logRequest(ex.cx, r, 'info', 'upstream sent too big early hints');
      return;
    }
    // ngx_http_early_hints_filter: a 103 with no header left is not sent
    if (headers.length > 0 && predicatesHold(r.loc.earlyHints, (v) => v.evaluate(r))) ex.out.earlyHints(headers);
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean {
    if (statusCode === 103) this.passEarlyHints(rawHeaders, statusText);
    if (statusCode < 200 && statusCode !== 101) return true;
    const { ex, p } = this;
    const { r, cx, out } = ex;
    r.action = 'reading response header from upstream';
    const count = rawHeaders.length >> 1;
    const names = new Array<string>(count);
    const values = new Array<string>(count);
    const lowers = new Array<string>(count);
    for (let k = 0; k < count; k++) {
      names[k] = rawHeaders[2 * k]!.toString('latin1');
      values[k] = rawHeaders[2 * k + 1]!.toString('latin1');
      lowers[k] = names[k]!.toLowerCase();
    }
    const checked = checkUpstreamHeaders(names, values, lowers);
    for (const warning of checked.warnings) logRequest(cx, r, 'warn', warning);
    if (checked.invalid) {
      this.stage = 'intercepted';
      this.abortUpstream(new Error('invalid header'));
      this.next('invalid_header', upstreamFailure('invalid-header', checked.invalid, r.action));
      return false;
    }
    const attempts = this.dest.attempts;
    const condition = attempts && nextConditionOf(statusCode);
    if (condition && attempts.mayRetry(condition, ex.r.method, true, this.request.withBody && this.request.body === undefined, true)) {
      // nginx's ngx_http_upstream_test_next: the response is dropped with its connection
      ex.r.upstream!.status = statusCode;
      this.stage = 'intercepted';
      this.abortUpstream(new Error('next upstream'));
      this.next(condition, undefined);
      return false;
    }
    if (condition && this.store?.staleFor(condition)) {
      // ngx_http_upstream_test_next: the expired entry goes out instead
      ex.r.upstream!.status = statusCode;
      attempts?.done();
      this.stage = 'intercepted';
      this.abortUpstream(new Error('stale'));
      this.endState();
      const store = this.store;
      void store.sendStale().then((sent) => sent ?? statusOutcome(statusCode), () => DONE).then(this.resolve);
      return false;
    }
    if (this.store?.revalidates(statusCode)) {
      // the expired entry is still good: it goes out, fresh again
      ex.r.upstream!.status = statusCode;
      ex.r.upstream!.headers = rawHeaders.map((b) => b.toString('latin1'));
      attempts?.done();
      this.stage = 'intercepted';
      this.abortUpstream(new Error('revalidated'));
      this.endState();
      const store = this.store;
      void store.sendRevalidated(ex.r.upstream!.headers).then((sent) => sent ?? statusOutcome(502), () => DONE).then(this.resolve);
      return false;
    }
    const answered = attempts?.current;
    attempts?.done();
    removeCleanBody(this.request.body);
    this.resumeReading = resume;
    this.stage = 'body';
    const up = this.state;
    up.status = statusCode;
    up.headerTimeMs = Date.now() - up.startMs;
    up.bytesReceived = this.wire.received;
    const received: string[] = [];
    const outHeaders: [string, string | string[]][] = [];
    // the header's size in the header buffer: status line, header lines, blank line
    let headerBytes = 15 + statusText.length;
    let buffering = p.buffering;
    let chunked = false;
    const cookies = rewritesCookies(p);
    // whether the upstream's own Server and Date go out
    let server = false;
    let date = false;
    for (let k = 0; k < count; k++) {
      if (checked.ignored?.has(k)) continue;
      const name = names[k]!;
      const value = values[k]!;
      received.push(name, value);
      headerBytes += name.length + value.length + 4;
      const lower = lowers[k]!;
      if (lower === 'content-length') this.expectedBytes = Number(value);
      else if (lower === 'transfer-encoding') chunked = /chunked/i.test(value);
      else if (lower === 'x-accel-buffering' && p.accelBuffering) buffering = accelBuffering(value, buffering);
      if (HOP_BY_HOP.has(lower) || p.hideHeaders.has(lower)) continue;
      if (lower === 'location' || lower === 'refresh') {
        const rewritten = rewriteRedirect(r, p, lower, value);
        if (rewritten !== undefined) {
          outHeaders.push([name, lower === 'location' ? absoluteLocation(r, rewritten) : rewritten]);
          continue;
        }
      } else if (lower === 'set-cookie' && cookies) {
        outHeaders.push([name, rewriteSetCookie(r, p, value) ?? value]);
        continue;
      } else if (lower === 'server') server = true;
      else if (lower === 'date') date = true;
      outHeaders.push([name, value]);
    }
    up.headers = received;
    stickyAnswered(ex, attempts, answered);
    if (p.accelLimitRate) takeAccelLimitRate(r, received);
    if (p.accelCharset) takeAccelCharset(r, received);
    // ngx_http_proxy_process_header: an upstream without Server or Date has a null one, which, passed with
    // proxy_pass_header, keeps nginx's own out of the response
    if (!server && !p.hideHeaders.has('server')) outHeaders.push(['Server', []]);
    if (!date && !p.hideHeaders.has('date')) outHeaders.push(['Date', []]);
    // ngx_http_proxy_process_header: a response without a body keeps its connection however the request
    // goes on (u->keepalive); undici reads it whole right after this header
    const bodiless = statusCode === 204 || statusCode === 304 || this.request.method === 'HEAD' || (!chunked && this.expectedBytes === 0);
    if (interceptsError(ex, p.interceptErrors, statusCode, received, this.store)) {
      this.endState();
      this.stage = 'intercepted';
      if (!bodiless) this.abortUpstream(new Error('intercepted'));
      this.resolve(statusOutcome(statusCode));
      return bodiless;
    }
    const redirect = p.accelRedirect ? accelRedirectOf(received) : undefined;
    if (redirect !== undefined) {
      this.store?.abort();
      r.action = 'reading response header from upstream';
      keepForRedirect(r, received, cookies ? (v) => rewriteSetCookie(r, p, v) ?? v : undefined);
      this.endState();
      this.stage = 'intercepted';
      if (!bodiless) this.abortUpstream(new Error('X-Accel-Redirect'));
      this.resolve({ kind: 'accel', value: redirect });
      return bodiless;
    }
    const caching = this.store?.begin(statusCode, statusText, received, outHeaders, buffering) ?? false;
    if (caching) allowSingleRange(r, outHeaders);
    // the headers the request kept (nginx's headers_out: sticky's cookie, those kept across an internal
    // redirect) come before the upstream's, and are not the cached response's
    outHeaders.unshift(...keptHeaders(r));
    applyHeadersModule(r, statusCode, outHeaders);
    if (p.passTrailers) r.upstreamTrailers = [];
    // the response filters run while nginx still reads the header (their log lines say so); an HTTP/2
    // upstream has no reason phrase, the status's own goes out
    out.head(r, statusCode, outHeaders, p.httpVersion === '2' ? undefined : statusText);
    const finalized = r.takeFilterFinalizeStatus();
    if (finalized !== undefined) {
      // ngx_http_upstream_send_response: a header filter's status finalizes the request, the cache entry freed
      this.store?.abort();
      this.endState();
      this.stage = 'intercepted';
      this.abortUpstream(new Error('finalized by a header filter'));
      this.resolve(statusOutcome(finalized));
      return false;
    }
    if (out.headOnly && this.store && !caching) {
      // ngx_http_upstream_send_response: a HEAD (sent upstream as GET) whose response is not cached ends with its header
      this.stage = 'intercepted';
      this.abortUpstream(new Error('header only'));
      this.endState();
      r.action = 'sending to client';
      out.end();
      this.resolve(DONE);
      return false;
    }
    r.action = 'reading upstream';
    this.spool = new ResponseSpool(out, buffering === p.buffering ? p : { ...p, buffering }, cx.tempFiles, this, p.bufferSizeBytes - headerBytes, chunked);
    // body data that came with the header is taken first, in this same parser run; the header of a HEAD
    // whose response is being cached goes with the end of the response, once the entry is in place
    if (!(out.headOnly && caching)) queueMicrotask(() => out.flushHead());
    return true;
  }

  /**
   * `101 Switching Protocols` to a request with `Upgrade`
   * (`ngx_http_upstream_upgrade`): the response header goes to the client,
   * then bytes flow both ways until either side closes, or nothing moves for
   * `proxy_read_timeout` (`upstream timed out … while proxying upgraded
   * connection`, level info as `ngx_connection_error` logs it).
   */
  onUpgrade(statusCode: number, rawHeaders: Buffer[], upstream: Duplex): void {
    const { ex, p } = this;
    const { r, cx, out } = ex;
    this.store?.abort();
    const answered = this.dest.attempts?.current;
    this.dest.attempts?.done();
    this.stage = 'body';
    this.tunneled = true;
    const client = out.tunnel()!;
    const up = this.state;
    up.status = statusCode;
    up.headerTimeMs = Date.now() - up.startMs;
    const received: string[] = [];
    const headers: [string, string][] = [['Connection', 'upgrade']];
    headers.push(...keptHeaders(r));
    for (let i = 0; i < rawHeaders.length; i += 2) {
      const name = rawHeaders[i]!.toString('latin1');
      const value = rawHeaders[i + 1]!.toString('latin1');
      received.push(name, value);
      const lower = name.toLowerCase();
      if (HOP_BY_HOP.has(lower) || p.hideHeaders.has(lower)) continue;
      headers.push([name, value]);
    }
    up.headers = received;
    stickyAnswered(ex, this.dest.attempts, answered);
    applyHeadersModule(r, statusCode, headers);
    // nginx passes the upstream's status line; undici keeps no reason phrase for a 101
    out.head(r, statusCode, headers, 'Switching Protocols');
    out.flushHead();
    r.action = 'proxying upgraded connection';
    tunnel(client.socket, upstream, p.readTimeoutMs, {
      toClient: (bytes) => {
        r.bodyBytesSent += bytes;
        client.sent(bytes);
      },
      idle: () => logRequest(cx, r, 'info', upstreamTimeout('body').message),
      closed: () => {
        this.endState();
        this.resolve(DONE);
      },
    });
  }

  onData(chunk: Buffer): boolean {
    this.receivedBytes += chunk.length;
    if (this.store && this.store.write(chunk) > this.p.memoryBytes && !this.storing && this.moreToCome()) {
      this.storing = true;
      this.store.drained(this.resumeAfterStore);
    }
    const { out, r } = this.ex;
    // (a HEAD being cached reads the body for the cache's file alone)
    if (out.headOnly || !this.spool) return this.mayRead();
    r.bodyBytesSent += chunk.length;
    // (trailers may follow the body's length: the response ends with the upstream's)
    if (this.receivedBytes !== this.expectedBytes || this.p.passTrailers) this.spool.push(chunk);
    // a response being cached ends once its entry is in place (see onComplete)
    else if (this.store?.active) this.heldLast = chunk;
    else {
      // the upstream's part is over (its times and sizes, for the log) before its last bytes can end the response
      this.endState();
      this.spool.pushLast(chunk);
    }
    // the turn's budget is spent: the upstream's socket stops reading until a later turn, or, when undici read this from
    // the socket's stream, undici is paused until then
    if (!bodyTurns.spend(chunk.length) && !this.yielded && this.moreToCome() && !holdReadsForTurn(bodyTurns)) {
      this.yielded = true;
      bodyTurns.wait(this.resumeAfterYield);
    }
    // the client's connection took it whole and nothing else keeps it (no cache file, which also keeps the last piece): the
    // upstream connection may read into it again
    if (!this.store && this.spool.keepsNothing() && out.tookWhole?.()) releasedReadBuffer(chunk);
    return this.mayRead();
  }

  /** Nothing holds the upstream back: not the spool, the turn's budget, or the cache's file. */
  private mayRead(): boolean {
    return !this.paused && !this.yielded && !this.storing;
  }

  /** Whether the body has more to come (undici cannot be paused on the last byte of a response whose connection then closes). */
  private moreToCome(): boolean {
    return this.expectedBytes === undefined || this.receivedBytes < this.expectedBytes;
  }

  /** The turn this response waited for came: it reads on, unless the spool paused it meanwhile or it ended. */
  private readonly resumeAfterYield = (): void => {
    if (!this.yielded) return;
    this.yielded = false;
    if (this.mayRead()) this.resumeReading?.();
  };

  /** The cache's file took what was read: reading goes on, unless something else holds it. */
  private readonly resumeAfterStore = (): void => {
    if (!this.storing) return;
    this.storing = false;
    if (this.mayRead()) this.resumeReading?.();
  };

  /** `trailers`: names and values alternating, as Buffers (undici's types say strings). */
  onComplete(trailers: string[] | null): void {
    // a response without a body that the request gave up (X-Accel-Redirect, an intercepted error)
    if (this.stage === 'intercepted') return;
    this.complete = true;
    if (trailers) this.state.trailers = (trailers as (string | Buffer)[]).map((b) => (typeof b === 'string' ? b : b.toString('latin1')));
    // ngx_http_upstream_process_trailers: those not hidden go to the client
    const passed = this.ex.r.upstreamTrailers;
    const received = this.state.trailers;
    if (passed && received) {
      for (let k = 0; k + 1 < received.length; k += 2) {
        if (!this.p.hideHeaders.has(received[k]!.toLowerCase())) passed.push([received[k]!, received[k + 1]!]);
      }
    }
    this.endState();
    this.ex.r.action = 'sending to client';
    // a cached response is in place before the response ends, as nginx renames the file first
    const committed = this.store?.commit();
    if (committed) void committed.then(() => this.finish());
    else this.finish();
  }

  /** Ends the response once the whole of it was read. */
  private finish(): void {
    if (!this.spool) {
      this.ex.out.end();
      this.resolve(DONE);
      return;
    }
    if (this.heldLast) this.spool.pushLast(this.heldLast);
    this.spool.end();
    void this.spool.done.then(() => this.resolve(DONE));
  }

  onError(err: Error): void {
    if (this.stage === 'intercepted') return;
    this.endState();
    const { r, cx, out } = this.ex;
    // a response that did not finish is not cached; one that goes to the next server may still be
    const toNext = err !== CLIENT_CLOSED && err !== BODY_TIMED_OUT && !(err instanceof WorkerConnectionsError) && this.stage !== 'body' && !out.started;
    if (!toNext) this.store?.abort();
    // the header of a HEAD held while its response was being cached goes out now, as nginx had sent it
    if (this.stage === 'body' && out.headOnly && err !== CLIENT_CLOSED) out.flushHead();
    if (err === CLIENT_CLOSED) {
      this.spool?.abort();
      r.action = 'sending to client';
      out.abort();
      this.resolve(DONE);
      return;
    }
    if (err === BODY_TIMED_OUT) {
      this.spool?.abort();
      this.resolve(statusOutcome(408));
      return;
    }
    if (err instanceof WorkerConnectionsError) {
      this.dest.attempts?.done();
      r.action = 'connecting to upstream';
      logRequest(cx, r, 'alert', err.message);
      this.resolve(statusOutcome(500));
      return;
    }
    const unixPeer = this.dest.peer.path !== undefined ? this.dest.peer.name : undefined;
    const failure = mapUpstreamError(err as Error & { code?: string }, this.stage, this.p.buffering, unixPeer);
    if (this.stage !== 'body' && !out.started) {
      this.next(failure.condition, failure);
      return;
    }
    void responseFailed(this.ex, failure, this.spool).then(this.resolve);
  }

  // SpoolHooks

  onTempFile(path: string): void {
    logRequest(this.ex.cx, this.ex.r, 'warn', `an upstream response is buffered to a temporary file ${path}`);
  }

  pauseUpstream(): void {
    if (this.moreToCome()) this.paused = true;
  }

  resumeUpstream(): void {
    if (!this.paused) return;
    this.paused = false;
    if (this.mayRead()) this.resumeReading?.();
  }

  onFileError(err: Error, path: string | undefined): void {
    logRequest(this.ex.cx, this.ex.r, 'crit', `write() to "${path ?? this.p.tempPath.dir}" failed (${systemErrorText(err)})`);
    this.abortUpstream(err);
  }
}
