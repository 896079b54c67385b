/**
 * The FastCGI, uwsgi, SCGI and memcached handlers (`ngx_http_fastcgi_module.c`,
 * `ngx_http_uwsgi_module.c`, `ngx_http_scgi_module.c`,
 * `ngx_http_memcached_module.c`): each sends the request over TCP or a
 * unix socket framed by its protocol (`CgiWire`: FastCGI records with the
 * CGI parameters and the body as STDIN, uwsgi's packet or SCGI's netstring
 * with the body after it, memcached's `get`), reads the response as nginx
 * does (fastcgi-protocol.ts: STDERR logged as `FastCGI sent in stderr:
 * "…"`, the CGI header, STDOUT; cgi-response.ts: uwsgi's and SCGI's status
 * line and header, the body to its length or the connection's end;
 * memcached-protocol.ts: a value or `END`), turns the status line,
 * `Status:` and `Location:` into the response status, and streams the body
 * to the client through the same buffering as proxied responses. With an
 * `upstream` block that keeps connections, a FastCGI connection
 * (`fastcgi_keep_conn on`) or a memcached one serves later requests
 * (fastcgi-connections.ts); uwsgi and SCGI connections close with their
 * response, as nginx's do.
 */
import { connect, type Socket } from 'node:net';
import type { Readable } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import { ConfigError } from '../../errors.js';
import type { LogLevel } from '../../log/levels.js';
import type {
  CacheConf, CgiConf, CgiTarget, FastcgiConf, MemcachedConf, UpstreamConf, UpstreamGroup, UpstreamTlsConf, UwsgiConf,
} from '../../config/route-table.js';
import type { CgiPrefix } from '../../config/modules/cgi-upstream.js';
import type { CompiledValue } from '../../config/variables.js';
import { systemErrorText } from '../../os-errors.js';
import { logRequest } from '../context.js';
import { DONE, statusOutcome, type Exchange, type Outcome } from '../exchange.js';
import { accelRedirectOf, keepForRedirect } from './accel-redirect.js';
import type { HttpRequestState } from '../request.js';
import { bodyOfUnknownLength, bodyStream, keepPassedBody, readRequestBody, requestHasBody, type RequestBody } from '../request-body.js';
import { applyHeadersModule, contentTypeFor, keptHeaders } from '../respond.js';
import { accelBuffering, ResponseSpool } from '../spool.js';
import { takeAccelCharset } from '../filters/charset.js';
import { takeAccelLimitRate } from '../limit-rate.js';
import { bodyTurns } from '../turn-budget.js';
import { tunnel } from '../tunnel.js';
import { allowSingleRange, cacheStart, type CacheStore } from '../cache/upstream-cache.js';
import {
  mapUpstreamError, READING_BODY, READING_HEADER, SendTimeoutError, upstreamFailure, upstreamTimeout, type UpstreamFailure,
} from '../upstream/errors.js';
import type { FastcgiConnection } from '../upstream/fastcgi-connections.js';
import { beginRequestBody, encodeParams, encodeRecords, FCGI, REQUEST_ID, ResponseReader, StderrCaught } from '../upstream/fastcgi-protocol.js';
import {
  CgiResponseError, StreamResponseReader, type BodyReading, type CgiResponseReader, type CgiResponseSink, type StatusLine,
} from '../upstream/cgi-response.js';
import { CgiRequestError, encodeScgiHeader, encodeUwsgiPacket } from '../upstream/uwsgi-scgi-protocol.js';
import { escapeMemcachedKey, memcachedGet, MemcachedResponseReader } from '../upstream/memcached-protocol.js';
import { nextConditionOf, type NextCondition, type PeerAttempts } from '../upstream/round-robin.js';
import { connectTls, sslName, verifyPeer, type PeerChain } from '../upstream/tls.js';
import { cgiOnRead, stopTakingReads, takeReads } from '../upstream/cgi-reads.js';
import type { PoolSettings } from '../upstream/clients.js';
import { dynamicPeer, endAttempt, firstPeer, startAttempt, stickyAnswered } from './upstream-peer.js';
import { cutOff, interceptsError, nextOrAnswer, responseFailed } from './upstream-attempt.js';

/** Where to connect: a TCP peer (of a group when `group` is set) or a unix socket, and the name nginx logs. */
type CgiAddress =
  | { readonly host: string; readonly port: number; readonly name: string; readonly group: string | undefined }
  | { readonly path: string; readonly name: string };

/** The first address, and the group's attempts when it belongs to one. */
interface CgiChoice {
  readonly peer: CgiAddress;
  readonly attempts: PeerAttempts | undefined;
}

/** uwsgi over TLS (`suwsgi://`): the location's `uwsgi_ssl_*` settings and the name its certificate is checked against. */
interface CgiTls {
  readonly conf: UpstreamTlsConf;
  /** `uwsgi_ssl_name`, else the host of the address (nginx's `u->ssl_name`). */
  readonly name: string;
}

/** What the handler reads of a location's settings: the upstream settings, where requests go, the cache. */
type PassConf = UpstreamConf & { readonly target: CgiTarget; readonly cache: CacheConf | undefined };

/**
 * What differs between the protocols: how the request is framed, how the
 * response is read, whether connections are kept.
 */
interface CgiWire<C extends PassConf> {
  /** The module's prefix, the scheme of its `upstream:` in log lines. */
  readonly scheme: CgiPrefix | 'memcached';
  /** Whether a body of unknown length (chunked) may be passed on as it arrives; uwsgi and SCGI read it whole first. */
  readonly streamsUnknownLength: boolean;
  /** memcached's `intercept_404` and `force_ranges`: a 404 always goes to `error_page` or nginx's page; the client may get one range. */
  readonly memcachedRules?: boolean;
  /** uwsgi's and SCGI's `101 Switching Protocols` to a request that asked to upgrade makes the connection a tunnel. */
  readonly upgrades?: boolean;
  /** The location's settings. */
  conf(r: HttpRequestState): C;
  /** uwsgi's `suwsgi://`: whether the location's own address asks for TLS, and the `uwsgi_ssl_*` settings. */
  readonly tls?: { readonly secure: (conf: C) => boolean; readonly settings: (conf: C) => UpstreamTlsConf | undefined };
  /** `fastcgi_keep_conn`: a connection may outlive its response. */
  keepConn(conf: C): boolean;
  /**
   * The bytes before the body.
   * @throws CgiRequestError for a request the protocol cannot carry
   */
  head(r: HttpRequestState, conf: C): Buffer[];
  /** Appends body bytes as sent to `into` (FastCGI's STDIN records), and returns it. */
  bodyPiece(data: Buffer, into: Buffer[]): Buffer[];
  /** Appends what ends the body to `into` (FastCGI's empty STDIN record), and returns it. */
  bodyEnd(into: Buffer[]): Buffer[];
  /** The reader of a response to `r`. */
  reader(conf: C, sink: CgiResponseSink, r: HttpRequestState): CgiResponseReader;
  /** The length of the body after a header (nginx's `input_filter_init`), -1 when the connection's end ends it. */
  bodyLength(r: HttpRequestState, status: number, contentLength: number): number;
}

/**
 * The params of a request: `*_param` in order, then the request
 * headers as `HTTP_*` (repeated ones joined), the Host header first and as
 * nginx 1.30 rebuilds it: `$host$is_request_port$request_port` (the
 * server's name for a request without a host).
 */
export function params(r: HttpRequestState, conf: CgiConf): [string, string][] {
  const out: [string, string][] = [];
  for (const p of conf.params) {
    const v = p.value.evaluate(r);
    if (p.ifNotEmpty && v === '') continue;
    out.push([p.name, v]);
  }
  if (!conf.passRequestHeaders) return out;
  const main = r.parent ?? r;
  if (main.host && !conf.paramNames.has('HTTP_HOST')) out.push(['HTTP_HOST', main.requestPort ? `${main.host}:${main.requestPort}` : main.host]);
  const raw = r.rawHeaders;
  const seen = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    const name = `HTTP_${raw[i]!.toUpperCase().replace(/-/g, '_')}`;
    if (name === 'HTTP_HOST' || conf.paramNames.has(name)) continue;
    if (seen.has(name)) {
      const prev = out.find(([n]) => n === name)!;
      prev[1] += `${name === 'HTTP_COOKIE' ? '; ' : ', '}${raw[i + 1]}`;
      continue;
    }
    seen.add(name);
    out.push([name, raw[i + 1]!]);
  }
  return out;
}

/**
 * The first address of the request, or the status to answer; `secure`
 * whether it speaks TLS (uwsgi: the location's `suwsgi://`, or the scheme
 * of an address from variables), and `host` the address's host as written
 * (the name a TLS certificate is checked against).
 */
function address(
  ex: Exchange, conf: PassConf, scheme: CgiWire<PassConf>['scheme'], secure: boolean,
): AddressChoice | number | Promise<AddressChoice | number> {
  const { cx } = ex;
  if (conf.target.kind === 'unix') return addressChoice({ peer: { path: conf.target.path, name: `unix:${conf.target.path}` }, attempts: undefined }, 'localhost', secure);
  if (conf.target.kind === 'group') {
    const { group, host } = conf.target;
    // synchronous unless a sticky session is looked up
    const first = firstPeer(ex, cx.table.upstreams.get(group)!, conf, secure ? `s${scheme}` : scheme, '');
    return first instanceof Promise ? first.then((c) => addressChoice(c, host, secure)) : addressChoice(first, host, secure);
  }
  return addressOf(ex, conf, conf.target.address, scheme, secure);
}

/** An address chosen for a request, with whether it speaks TLS and its host as written (see `address`). */
type AddressChoice = CgiChoice & { readonly secure: boolean; readonly host: string };

const addressChoice = (c: CgiChoice | number, host: string, secure: boolean): AddressChoice | number =>
  typeof c === 'number' ? c : { peer: c.peer, attempts: c.attempts, secure, host };

/** `address` for a `*_pass` with variables (`value`): the address they make, a group's name or a host to resolve. */
async function addressOf(
  ex: Exchange, conf: PassConf, value: CompiledValue, scheme: CgiWire<PassConf>['scheme'], secure: boolean,
): Promise<AddressChoice | number> {
  const { r, cx } = ex;
  const choice = (c: CgiChoice | number, host: string, tls = secure): AddressChoice | number => addressChoice(c, host, tls);
  let text = value.evaluate(r);
  let tls = false;
  // ngx_http_uwsgi_eval: the address may name its scheme
  if (scheme === 'uwsgi' && /^s?uwsgi:\/\//i.test(text)) {
    tls = /^suwsgi/i.test(text);
    text = text.slice(tls ? 'suwsgi://'.length : 'uwsgi://'.length);
  }
  if (text.startsWith('unix:')) return choice({ peer: { path: text.slice(5), name: text }, attempts: undefined }, 'localhost', tls);
  const m = /^(\[[^\]]+\]|[^:/]+)(?::(\d+))?$/.exec(text);
  if (!m) {
    logRequest(cx, r, 'error', `invalid host in upstream "${text}"`);
    return 500;
  }
  if (m[2] === undefined && !cx.table.upstreams.has(m[1]!.toLowerCase())) {
    logRequest(cx, r, 'error', `no port in upstream "${text}"`);
    return 500;
  }
  return choice(await dynamicPeer(ex, m[1]!, m[2] === undefined ? undefined : Number(m[2]), 0, conf, tls ? `s${scheme}` : scheme, ''), m[1]!, tls);
}

/** The response header as nginx takes it (`ngx_http_fastcgi_process_header` and its kin): the status, its reason, the headers to pass. */
interface CgiHeader {
  readonly status: number;
  readonly reason: string | undefined;
  readonly headers: [string, string][];
  /** Every header as sent, for `$upstream_http_*`. */
  readonly all: [string, string][];
  readonly contentLength: number;
}

/** The headers `ngx_http_header_filter` drops from a 204 sent without a status line of the upstream's. */
const NO_CONTENT_DROPS = new Set(['content-type', 'content-length', 'last-modified']);

/**
 * The status from the HTTP status line a uwsgi or SCGI server sent, else
 * from `Status:` (its first three characters, the whole value as the status
 * line when longer), 302 for a `Location:` without one, else 200. A 204
 * without a status line goes out without `Content-Type`, `Content-Length`
 * and `Last-Modified`, as nginx's header filter sends its own 204s. One
 * `Content-Length` (digits) or `Transfer-Encoding: chunked`, as every
 * upstream module takes them (`ngx_http_upstream_headers_in`).
 * @throws CgiResponseError `upstream sent invalid status "…"`, and nginx's lines for the framing headers
 */
function cgiHeader(lines: [string, string][], conf: PassConf, line: StatusLine | undefined): CgiHeader {
  const headers: [string, string][] = [];
  let status = line?.code;
  // a status line's text as it came, without a reason phrase too (nginx's headers_out.status_line)
  let reason = line ? line.text.slice(4) : undefined;
  let location = false;
  let statusLine = line !== undefined;
  let contentLength = -1;
  /** The Content-Length or Transfer-Encoding line read. */
  let framing: [string, string] | undefined;
  for (const [name, value] of lines) {
    const lower = name.toLowerCase();
    if (lower === 'status' && !line) {
      if (!/^\d{3}/.test(value)) throw new CgiResponseError(`upstream sent invalid status "${value}"`);
      status = Number(value.slice(0, 3));
      reason = value.slice(3).trim() || undefined;
      statusLine = value.length > 3;
    } else if (lower === 'location') location = true;
    else if (lower === 'content-length' || lower === 'transfer-encoding') {
      // ngx_http_upstream_process_content_length and _transfer_encoding: one of them, once, well formed
      if (framing) {
        throw new CgiResponseError(framing[0].toLowerCase() === lower
          ? `upstream sent duplicate header line: "${name}: ${value}", previous value: "${framing[0]}: ${framing[1]}"`
          : 'upstream sent "Content-Length" and "Transfer-Encoding" headers at the same time');
      }
      framing = [name, value];
      if (lower === 'content-length') {
        if (!/^\d+$/.test(value)) throw new CgiResponseError(`upstream sent invalid "Content-Length" header: "${name}: ${value}"`);
        contentLength = Number(value);
      } else if (value.toLowerCase() !== 'chunked') throw new CgiResponseError(`upstream sent unknown "Transfer-Encoding": "${value}"`);
      // a Transfer-Encoding is not passed on (ngx_http_upstream_ignore_header_line)
      else continue;
    }
    if (conf.hideHeaders.has(lower)) continue;
    headers.push([name, value]);
  }
  return {
    status: status ?? (location ? 302 : 200),
    reason: status === undefined && location ? 'Moved Temporarily' : reason,
    headers: status === 204 && !statusLine ? headers.filter(([name]) => !NO_CONTENT_DROPS.has(name.toLowerCase())) : headers,
    all: lines,
    contentLength,
  };
}

/** `fastcgi_pass`: FastCGI records, connections kept with `fastcgi_keep_conn`. */
const FASTCGI: CgiWire<FastcgiConf> = {
  scheme: 'fastcgi',
  streamsUnknownLength: true,
  conf: (r) => r.loc.fastcgi!,
  keepConn: (conf) => conf.keepConn,
  head: (r, conf) => {
    const records: Buffer[] = [];
    encodeRecords(FCGI.BEGIN_REQUEST, REQUEST_ID, beginRequestBody(conf.keepConn), records);
    encodeRecords(FCGI.PARAMS, REQUEST_ID, encodeParams(params(r, conf)), records);
    encodeRecords(FCGI.PARAMS, REQUEST_ID, Buffer.alloc(0), records);
    return records;
  },
  bodyPiece: (data, into) => {
    encodeRecords(FCGI.STDIN, REQUEST_ID, data, into);
    return into;
  },
  bodyEnd: (into) => {
    encodeRecords(FCGI.STDIN, REQUEST_ID, Buffer.alloc(0), into);
    return into;
  },
  reader: (conf, sink) => new ResponseReader({
    bufferSize: conf.bufferSizeBytes, bodyBufferSize: conf.bufferBytes, keepConn: conf.keepConn, catchStderr: conf.catchStderr,
  }, sink),
  bodyLength: (_r, _status, contentLength) => contentLength,
};

/**
 * uwsgi's and SCGI's body length (`ngx_http_uwsgi_input_filter_init`): none
 * for a 204 or 304, the connection's end for a HEAD, else `Content-Length`.
 */
function streamBodyLength(r: HttpRequestState, status: number, contentLength: number): number {
  if (status === 204 || status === 304) return 0;
  return r.method === 'HEAD' ? -1 : contentLength;
}

/** The body as it is, after the packet or netstring. */
const rawBody = (data: Buffer, into: Buffer[]): Buffer[] => {
  into.push(data);
  return into;
};

/**
 * What uwsgi and SCGI share: the body as it is after their header, a
 * chunked one read whole first, the response read by `StreamResponseReader`,
 * the connection closed with it, a 101 that upgrades it.
 */
const STREAM_WIRE: Omit<CgiWire<CgiConf>, 'scheme' | 'conf' | 'head'> = {
  streamsUnknownLength: false,
  upgrades: true,
  keepConn: () => false,
  bodyPiece: rawBody,
  bodyEnd: (into) => into,
  reader: (conf, sink) => new StreamResponseReader(conf.bufferSizeBytes, sink),
  bodyLength: streamBodyLength,
};

/** `uwsgi_pass`: the uwsgi packet, then the body. */
const UWSGI: CgiWire<UwsgiConf> = {
  ...STREAM_WIRE,
  scheme: 'uwsgi',
  conf: (r) => r.loc.uwsgi!,
  tls: { secure: (conf) => conf.secure, settings: (conf) => conf.tls },
  head: (r, conf) => [encodeUwsgiPacket(conf.modifier1, conf.modifier2, params(r, conf), conf.string)],
};

/**
 * `scgi_pass`: the netstring, its first pair the request's `Content-Length`
 * (0 without one; a chunked body's length once read), then the body.
 */
const SCGI: CgiWire<CgiConf> = {
  ...STREAM_WIRE,
  scheme: 'scgi',
  conf: (r) => r.loc.scgi!,
  head: (r, conf) => {
    const declared = Number(r.headers['content-length'] ?? r.bodyLength ?? 0);
    return [encodeScgiHeader(declared > 0 ? declared : 0, params(r, conf))];
  },
};

/**
 * `memcached_pass`: `get` and the escaped `$memcached_key`; the answer's
 * value typed by the location; the connection kept once its `END` is read,
 * when the `upstream` block keeps connections.
 */
const MEMCACHED: CgiWire<MemcachedConf> = {
  scheme: 'memcached',
  streamsUnknownLength: false,
  memcachedRules: true,
  conf: (r) => r.loc.memcached!,
  keepConn: () => true,
  head: (r, conf) => [memcachedGet(escapeMemcachedKey(conf.key.evaluate(r)))],
  bodyPiece: rawBody,
  bodyEnd: (into) => into,
  reader: (conf, sink, r) => new MemcachedResponseReader(conf.bufferSizeBytes, {
    key: escapeMemcachedKey(conf.key.evaluate(r)), contentType: contentTypeFor(r), gzipFlag: conf.gzipFlag,
  }, sink),
  bodyLength: (_r, _status, contentLength) => contentLength,
};

/**
 * Asks memcached for `$memcached_key` (`ngx_http_memcached_handler`): GET
 * and HEAD only (405), and a key that is not set is nginx's error line and
 * 500, before any server is chosen.
 */
export function memcachedRequest(ex: Exchange): Promise<Outcome> {
  const { r } = ex;
  if (r.method !== 'GET' && r.method !== 'HEAD') return Promise.resolve(statusOutcome(405));
  if (r.loc.memcached!.key.evaluate(r) === '') {
    logRequest(ex.cx, r, 'error', 'the "$memcached_key" variable is not set');
    return Promise.resolve(statusOutcome(500));
  }
  return cgiRequest(ex, MEMCACHED);
}

/** Sends the request to the FastCGI server. */
export const fastcgiRequest = (ex: Exchange): Promise<Outcome> => cgiRequest(ex, FASTCGI);

/** Sends the request to the uwsgi server. */
export const uwsgiRequest = (ex: Exchange): Promise<Outcome> => cgiRequest(ex, UWSGI);

/** Sends the request to the SCGI server. */
export const scgiRequest = (ex: Exchange): Promise<Outcome> => cgiRequest(ex, SCGI);

/** Sends the request to the location's server, by `wire`'s protocol. */
async function cgiRequest<C extends PassConf>(ex: Exchange, wire: CgiWire<C>): Promise<Outcome> {
  const { r } = ex;
  const conf = wire.conf(r);
  // a client that leaves from now on (while its body is read, the cache looked up) ends the attempt as soon as it starts
  if (!conf.ignoreClientAbort) ex.out.onAbort(() => undefined);
  const hasBody = conf.passRequestBody && ex.body !== undefined && requestHasBody(r, ex.body);
  let body: CgiBody | undefined;
  // *_request_buffering off: the body goes out as it arrives (read by sendBody; paused until then), unless
  // it is chunked and the protocol needs its length first (ngx_http_uwsgi_handler: !r->headers_in.chunked)
  if (hasBody && !conf.requestBuffering && (wire.streamsUnknownLength || !bodyOfUnknownLength(r, ex.body))) {
    ex.body!.pause();
    keepPassedBody(r, ex.body!);
    body = { kind: 'passed', stream: ex.body! };
  } else if (hasBody) {
    const read = await readRequestBody(ex);
    if ('status' in read) return read.status === 0 ? { kind: 'close' } : statusOutcome(read.status);
    body = read;
  }
  try {
    const start = conf.cache ? await cacheStart(ex, conf.cache, (again) => cgiRequest(again, wire)) : undefined;
    return start?.kind === 'served' ? start.outcome : await exchange(ex, wire, conf, body, start?.store);
  } finally {
    if (body?.kind === 'file') await body.file.handle.close().catch(() => undefined);
  }
}

/** The body of a request: read whole first, or passed on as it arrives (`*_request_buffering off`). */
type CgiBody = RequestBody | { readonly kind: 'passed'; readonly stream: Readable };

/** The client sent none of a body passed on for `client_body_timeout`: nginx ends the request with 408, silently. */
class BodyTimeoutError extends Error {}

/** The client went away while its body was passed on: nginx's `client prematurely closed connection`, status 400. */
class ClientGoneError extends Error {}

/**
 * A body passed on that its connection refused as it arrived (an HTTP/2
 * stream's DATA past its `Content-Length`, or short of it): the request ends
 * with its `status` and the connection's message, logged at `level`.
 */
class BodyRefusedError extends Error {
  constructor(message: string, readonly status: number, readonly level: LogLevel) {
    super(message);
  }
}

/** Sends the request to the first address, then to the next ones of its group while `*_next_upstream` says so. */
async function exchange<C extends PassConf>(
  ex: Exchange, wire: CgiWire<C>, conf: C, body: CgiBody | undefined, store: CacheStore | undefined,
): Promise<Outcome> {
  const chosen = address(ex, conf, wire.scheme, wire.tls?.secure(conf) ?? false);
  const choice = chosen instanceof Promise ? await chosen : chosen;
  if (typeof choice === 'number') {
    store?.abort();
    return statusOutcome(choice);
  }
  const tls = choice.secure ? secureWith(ex, wire.tls!.settings(conf)!, conf, choice.host) : undefined;
  if (typeof tls === 'number') {
    store?.abort();
    return statusOutcome(tls);
  }
  let result: Outcome | NextAddress = { kind: 'next', peer: choice.peer };
  for (let retry = false; result.kind === 'next'; retry = true) result = await attempt(ex, wire, conf, body, result.peer, choice.attempts, retry, store, tls);
  // whatever did not reach the store's commit is not cached
  store?.abort();
  return result;
}

/** The connection settings `clientCertificate` derives a location's certificate settings from, one per `uwsgi_ssl_*` settings. */
const poolSettings = new WeakMap<UpstreamTlsConf, PoolSettings>();

/**
 * The TLS of a request to `host` (`ngx_http_upstream_ssl_init_connection`):
 * the name its certificate is checked against, the client certificate of
 * `uwsgi_ssl_certificate` with variables read for it; 500 when those files
 * cannot be used (nginx's message logged).
 */
function secureWith(ex: Exchange, settings: UpstreamTlsConf, conf: PassConf, host: string): CgiTls | number {
  const { r, cx } = ex;
  let tls = settings;
  const files = settings.certificateFiles;
  if (files) {
    // one settings object per location's TLS, so that the certificate's settings are made once (clientCertificate keys by it)
    let pool = poolSettings.get(settings);
    if (!pool) poolSettings.set(settings, (pool = { connectTimeoutMs: conf.connectTimeoutMs, bufferSizeBytes: conf.bufferSizeBytes, memoryBytes: conf.memoryBytes, httpVersion: '1.1', tls: settings }));
    try {
      tls = cx.upstreams.clientCertificate(pool, files.cert.evaluate(r), files.key.evaluate(r)).tls ?? settings;
    } catch (err) {
      logRequest(cx, r, 'error', err instanceof ConfigError ? err.text : String(err));
      return 500;
    }
  }
  return { conf: tls, name: settings.name ? sslName(settings.name.evaluate(r)) : host };
}

/** An attempt gave up on its server: the request goes to `peer` (`ngx_http_upstream_next`). */
interface NextAddress {
  readonly kind: 'next';
  readonly peer: CgiAddress;
}

/** The group whose idle connections a request to `addr` may use and keep, when `fastcgi_keep_conn` is on. */
function keepingGroup(ex: Exchange, keepConn: boolean, addr: CgiAddress): UpstreamGroup | undefined {
  if (!keepConn || 'path' in addr || addr.group === undefined) return undefined;
  const group = ex.cx.table.upstreams.get(addr.group.toLowerCase());
  return group && group.keepalive > 0 ? group : undefined;
}

/**
 * One attempt at `addr`, on a kept connection or a new one: resolves with
 * how the request goes on once the response is done or given up, or with
 * the next address to try (`ngx_http_upstream_next`).
 */
async function attempt<C extends PassConf>(
  ex: Exchange, wire: CgiWire<C>, conf: C, body: CgiBody | undefined, addr: CgiAddress, attempts: PeerAttempts | undefined, retry: boolean,
  store: CacheStore | undefined, tls: CgiTls | undefined,
): Promise<Outcome | NextAddress> {
  const { r, cx, out } = ex;
  // nginx's u->schema: `suwsgi://` over TLS
  const scheme = tls ? `s${wire.scheme}` : wire.scheme;
  const state = startAttempt(ex, `${scheme}://${addr.name}${'path' in addr ? ':' : ''}`, addr, retry);
  const keepConn = wire.keepConn(conf);
  const group = keepingGroup(ex, keepConn, addr);
  const kept = group ? cx.fastcgi.take(group, addr.name) : undefined;
  let socket: Socket;
  /** The certificate chain of a TLS connection (the handshake's, or the resumed session's). */
  let peerOf: (() => PeerChain | undefined) | undefined;
  if (kept) socket = kept.socket;
  else {
    if (tls) {
      const secure = connectTls(tls.conf, addr, tls.name, cgiOnRead(conf.memoryBytes, true));
      socket = secure.socket;
      peerOf = secure.peer;
    } else {
      const onread = cgiOnRead(conf.memoryBytes, false);
      socket = 'path' in addr ? connect({ path: addr.path, onread }) : connect({ host: addr.host, port: addr.port, onread });
    }
    socket.setNoDelay(true);
    socket.once('close', cx.upstreams.track());
  }
  /** The event of a connection ready for the request: after the TLS handshake for `suwsgi://`. */
  const ready = tls ? 'secureConnect' : 'connect';
  const connection: FastcgiConnection = { socket, requests: (kept?.requests ?? 0) + 1, openedAtMs: kept?.openedAtMs ?? Date.now() };
  // this attempt's bytes on the connection, for $upstream_bytes_sent and _received
  const [readAtStart, writtenAtStart] = [socket.bytesRead, socket.bytesWritten];
  const bytes = { get sent(): number { return socket.bytesWritten - writtenAtStart; }, get received(): number { return socket.bytesRead - readAtStart; } };
  let bodyBytes = 0;
  r.action = 'connecting to upstream';
  let stage: 'connect' | 'header' | 'body' | 'done' = 'connect';
  /** The spool paused the connection (the client or the disk is behind). */
  let spoolPaused = false;
  /** The connection waits for a later turn of the event loop (`bodyTurns`). */
  let yielded = false;
  /** The connection waits for the cache's file to take what was read (`CacheStore.drained`). */
  let storing = false;
  /** After a 101 that upgrades the connection: the bytes read after its header, until the tunnel takes over. */
  let upgraded: Buffer[] | undefined;
  const resumeSocket = (): void => {
    if (!spoolPaused && !yielded && !storing) socket.resume();
  };
  let spool: ResponseSpool | undefined;
  let settled = false;
  let bodySent = !body;

  return new Promise<Outcome | NextAddress>((resolve) => {
    const connectTimer = kept ? undefined : setTimeout(() => fail(upstreamTimeout('connect')), conf.connectTimeoutMs);
    const done = (): void => resolve(DONE);
    /** Stops listening to the socket; it is closed, or kept for the next request when `keep`. */
    const release = (keep: boolean): void => {
      endAttempt(state, bytes, bodyBytes);
      clearTimeout(connectTimer);
      socket.off(ready, onConnect).off('timeout', onTimeout).off('error', onError).off('close', onClose);
      stopTakingReads(socket);
      if (keep && group) cx.fastcgi.keep(group, addr.name, connection);
      else socket.destroy();
    };
    const settle = (): void => {
      if (settled) return;
      settled = true;
      release(false);
      resolve(DONE);
    };
    /** Gives up on this server for `condition`: the next one, or nginx's answer. */
    const next = (condition: NextCondition, failure: UpstreamFailure | undefined): void => {
      settled = true;
      release(false);
      const following = nextOrAnswer(ex, attempts, {
        condition, failure, requestSent: stage !== 'connect', bodyUnbuffered: body?.kind === 'passed', scheme, uri: '',
      }, store);
      if (following instanceof Promise) void following.then(resolve);
      else resolve({ kind: 'next', peer: following });
    };
    /** Ends the request after a failure: a response already started is cut off, else `status` is sent. */
    const giveUp = (status: number): void => {
      const outcome = cutOff(ex, status, spool);
      if (settled) return;
      settled = true;
      release(false);
      resolve(outcome);
    };
    const fail = (failure: UpstreamFailure): void => {
      if (settled) return;
      // a HEAD whose response was being cached: its header is sent (nginx sent it before reading the body)
      if (stage === 'body' && out.headOnly) out.flushHead();
      if ((stage === 'connect' || stage === 'header') && !out.started) {
        next(failure.condition, failure);
        return;
      }
      settled = true;
      release(false);
      void responseFailed(ex, failure, spool).then(resolve);
    };
    /** A response nginx refuses: an invalid header while the header is read, else what `err` says. */
    const invalid = (err: Error): void => {
      const code = err instanceof CgiResponseError ? err.code : 'invalid-header';
      fail(stage !== 'body' ? upstreamFailure('invalid-header', err.message, READING_HEADER) : upstreamFailure(code, err.message, READING_BODY));
    };

    /** The CGI header: status, next server, intercepted errors, or the response head and how to read the body. */
    const onHeader = (lines: [string, string][], room: number, line: StatusLine | undefined): BodyReading | 'stop' => {
      let parsed: CgiHeader;
      try {
        parsed = cgiHeader(lines, conf, line);
      } catch (err) {
        invalid(err as Error);
        return 'stop';
      }
      const up = state;
      const condition = nextConditionOf(parsed.status);
      if (attempts && condition && attempts.mayRetry(condition, r.method, true, false, true)) {
        up.status = parsed.status;
        next(condition, undefined);
        return 'stop';
      }
      const stale = condition !== undefined && store?.staleFor(condition);
      if (stale || store?.revalidates(parsed.status)) {
        // the expired entry goes out instead (use_stale), or fresh again (a 304 to a revalidation)
        attempts?.done();
        up.status = parsed.status;
        up.headers = parsed.all.flat();
        stage = 'done';
        settled = true;
        release(false);
        const sending = stale ? store!.sendStale() : store!.sendRevalidated(up.headers);
        void sending.then((sent) => sent ?? statusOutcome(stale ? parsed.status : 502), () => DONE).then(resolve);
        return 'stop';
      }
      const answered = attempts?.current;
      attempts?.done();
      stage = 'body';
      up.status = parsed.status;
      up.headerTimeMs = Date.now() - up.startMs;
      up.bytesReceived = bytes.received;
      up.headers = parsed.all.flat();
      stickyAnswered(ex, attempts, answered);
      if (conf.accelLimitRate) takeAccelLimitRate(r, up.headers);
      if (conf.accelCharset) takeAccelCharset(r, up.headers);
      if (interceptsError(ex, conf.interceptErrors, parsed.status, up.headers, store) || (wire.memcachedRules && parsed.status === 404)) {
        stage = 'done';
        r.action = 'sending to client';
        settled = true;
        // memcached's END was read whole: the connection may serve another request
        release(wire.memcachedRules === true && parsed.status === 404);
        resolve(statusOutcome(parsed.status));
        return 'stop';
      }
      const redirect = conf.accelRedirect ? accelRedirectOf(up.headers) : undefined;
      if (redirect !== undefined) {
        r.action = READING_HEADER;
        keepForRedirect(r, up.headers);
        stage = 'done';
        settled = true;
        release(false);
        resolve({ kind: 'accel', value: redirect });
        return 'stop';
      }
      if (wire.upgrades && parsed.status === 101 && r.headers.upgrade !== undefined && out.tunnelable) {
        // ngx_http_upstream_upgrade: the header goes out, then the bytes after it and all that follows both ways
        store?.abort();
        attempts?.done();
        stage = 'body';
        upgraded = [];
        parsed.headers.unshift(['Connection', 'upgrade'], ...keptHeaders(r));
        applyHeadersModule(r, 101, parsed.headers);
        out.head(r, 101, parsed.headers, parsed.reason);
        out.flushHead();
        return { contentLength: -1, buffered: false };
      }
      const accel = conf.accelBuffering ? parsed.all.find(([n]) => n.toLowerCase() === 'x-accel-buffering') : undefined;
      const buffering = accel ? accelBuffering(accel[1], conf.buffering) : conf.buffering;
      const caching = store?.begin(parsed.status, parsed.reason ?? '', up.headers, parsed.headers, buffering) ?? false;
      if (caching) allowSingleRange(r, parsed.headers);
      else if (wire.memcachedRules && !r.parent) r.singleRangeAllowed = true;
      // the headers the request kept (nginx's headers_out: sticky's cookie, those kept across an internal
      // redirect) come before the upstream's, and are not the cached response's
      parsed.headers.unshift(...keptHeaders(r));
      applyHeadersModule(r, parsed.status, parsed.headers);
      out.head(r, parsed.status, parsed.headers, parsed.reason);
      const finalized = r.takeFilterFinalizeStatus();
      if (finalized !== undefined) {
        // ngx_http_upstream_send_response: a header filter's status finalizes the request, the cache entry freed
        store?.abort();
        stage = 'done';
        settled = true;
        release(false);
        resolve(statusOutcome(finalized));
        return 'stop';
      }
      // nginx finalizes the upstream request once the header of a HEAD, 204 or 304 response is sent, unless it is being cached
      if (!caching && (out.headOnly || parsed.status === 204 || parsed.status === 304)) {
        stage = 'done';
        r.action = 'sending to client';
        settled = true;
        release(false);
        out.end();
        done();
        return 'stop';
      }
      // unbuffered, what came with the header is read before nginx says it reads the body (`ngx_http_upstream_process_non_buffered_upstream`)
      r.action = buffering ? READING_BODY : READING_HEADER;
      spool = new ResponseSpool(out, buffering === conf.buffering ? conf : { ...conf, buffering }, cx.tempFiles, {
        onTempFile: (path) => logRequest(cx, r, 'warn', `an upstream response is buffered to a temporary file ${path}`),
        pauseUpstream: () => {
          spoolPaused = true;
          socket.pause();
        },
        resumeUpstream: () => {
          spoolPaused = false;
          resumeSocket();
        },
        onFileError: (err, path) => fail(upstreamFailure('temp-file', `write() to "${path ?? conf.tempPath.dir}" failed (${systemErrorText(err)})`, READING_BODY)),
      }, room, false, true);
      return { contentLength: wire.bodyLength(r, parsed.status, parsed.contentLength), buffered: buffering };
    };

    const reader = wire.reader(conf, {
      stderr: (text) => logRequest(cx, r, 'error', `FastCGI sent in stderr: "${text}"`),
      log: (level, message) => logRequest(cx, r, level, message),
      header: onHeader,
      body: (data) => {
        bodyBytes += data.length;
        if (upgraded) {
          upgraded.push(data);
          return;
        }
        if (store && store.write(data) > conf.memoryBytes && !storing) {
          storing = true;
          socket.pause();
          store.drained(() => {
            storing = false;
            if (!settled) resumeSocket();
          });
        }
        if (out.headOnly) return;
        r.bodyBytesSent += data.length;
        spool!.push(data);
      },
      end: (reusable) => {
        stage = 'done';
        r.action = 'sending to client';
        settled = true;
        release(reusable && bodySent);
        // a cached response is in place before the response ends, as nginx renames the file first
        void (store?.commit() ?? Promise.resolve()).then(() => {
          spool!.end();
          return spool!.done;
        }).then(done);
      },
    }, r);

    const onConnect = (): void => {
      // `uwsgi_ssl_verify`: the chain, then the name (ngx_http_upstream_ssl_handshake)
      const refused = tls?.conf.verify && peerOf ? verifyPeer(socket as TLSSocket, tls.name, tls.conf.verifyDepth, peerOf()) : undefined;
      if (refused) {
        onError(refused);
        return;
      }
      clearTimeout(connectTimer);
      state.connectTimeMs = Date.now() - state.startMs;
      stage = 'header';
      r.action = READING_HEADER;
      socket.setTimeout(conf.readTimeoutMs);
      // a body passed on that has arrived whole has its length known, as nginx's preread body has ($content_length of a chunked one)
      if (body?.kind === 'passed' && r.bodyLength === undefined && (body.stream as Readable & { complete?: boolean }).complete) {
        r.bodyLength = body.stream.readableLength;
      }
      let head: Buffer[];
      try {
        head = wire.head(r, conf);
      } catch (err) {
        if (!(err instanceof CgiRequestError)) throw err;
        logRequest(cx, r, 'alert', err.message);
        giveUp(500);
        return;
      }
      if (!body) socket.write(Buffer.concat(wire.bodyEnd(head)));
      else {
        sendBody(socket, wire, head, body, conf.sendTimeoutMs, r.loc.clientBodyTimeoutMs).then(() => {
          bodySent = true;
        }, (err: Error) => {
          if (err instanceof BodyTimeoutError) {
            r.timedOut = true;
            giveUp(408);
          } else if (err instanceof BodyRefusedError) {
            logRequest(cx, r, err.level, err.message);
            giveUp(err.status);
          } else if (err instanceof ClientGoneError) {
            logRequest(cx, r, 'info', 'client prematurely closed connection');
            r.status = 400;
            spool?.abort();
            out.abort();
            settle();
          } else fail(mapUpstreamError(err as Error & { code?: string }, 'header'));
        });
      }
    };
    /**
     * The tunnel of an upgraded connection: what came after the 101's header
     * first, then bytes both ways until either side ends, or none moves for
     * `*_read_timeout`.
     */
    const proxyUpgraded = (early: readonly Buffer[]): void => {
      settled = true;
      clearTimeout(connectTimer);
      socket.setTimeout(0);
      socket.off('timeout', onTimeout).off('error', onError).off('close', onClose);
      stopTakingReads(socket);
      const client = out.tunnel()!;
      const toClient = (n: number): void => {
        r.bodyBytesSent += n;
        client.sent(n);
      };
      for (const chunk of early) {
        client.socket.write(chunk);
        toClient(chunk.length);
      }
      r.action = 'proxying upgraded connection';
      tunnel(client.socket, socket, conf.readTimeoutMs, {
        toClient,
        idle: () => logRequest(cx, r, 'info', upstreamTimeout('body').message),
        closed: () => {
          endAttempt(state, bytes, bodyBytes);
          resolve(DONE);
        },
      });
    };
    const onTimeout = (): void => fail(upstreamTimeout(stage === 'body' ? 'body' : 'header'));
    const onError = (err: NodeJS.ErrnoException): void => {
      clearTimeout(connectTimer);
      if (stage === 'connect') fail(mapUpstreamError(err, 'connect', false, 'path' in addr ? addr.name : undefined));
      else fail(mapUpstreamError(err, stage === 'body' ? 'body' : 'header', conf.buffering));
    };
    const onClose = (): void => {
      clearTimeout(connectTimer);
      if (settled) return;
      if (stage === 'header') {
        fail(upstreamFailure('premature-close', 'upstream prematurely closed connection', READING_HEADER));
        return;
      }
      if (stage !== 'body') return;
      // the connection's end is the response's without keep_conn (`ngx_http_upstream_process_request`)
      try {
        reader.eof();
      } catch (err) {
        invalid(err as Error);
        return;
      }
      if (keepConn) {
        fail(upstreamFailure('premature-close', 'upstream prematurely closed connection', READING_BODY));
        return;
      }
      stage = 'done';
      r.action = 'sending to client';
      settled = true;
      endAttempt(state, bytes, bodyBytes);
      void (store?.commit() ?? Promise.resolve()).then(() => {
        spool!.end();
        return spool!.done;
      }).then(done);
    };
    /** Whether what the last read sent to the client left nothing of it with the client's connection (`ResponseSpool.flush`). */
    let flushedWhole = false;
    const onData = (chunk: Buffer): void => {
      flushedWhole = false;
      if (settled) return;
      if (stage === 'body') r.action = READING_BODY;
      try {
        reader.push(chunk);
        flushedWhole = spool?.flush() ?? true;
        if (upgraded) {
          proxyUpgraded(upgraded);
          return;
        }
        if (stage === 'body' && !bodyTurns.spend(chunk.length) && !yielded) {
          yielded = true;
          socket.pause();
          bodyTurns.wait(() => {
            yielded = false;
            if (!settled) resumeSocket();
          });
        }
      } catch (err) {
        if (err instanceof StderrCaught) {
          if (!settled) next('invalid_header', undefined);
          return;
        }
        if (err instanceof CgiResponseError) {
          invalid(err);
          return;
        }
        logRequest(cx, r, 'crit', `jinx internal error reading a ${wire.scheme} response: ${(err as Error).stack ?? String(err)}`);
        giveUp(500);
      }
    };
    socket.on('timeout', onTimeout).on('error', onError).on('close', onClose);
    // the read's buffer is read into again unless something kept a piece of it: the client's connection, the spool's
    // queue or temp file, the cache's file, a tunnel
    takeReads(socket, (chunk) => {
      onData(chunk);
      return flushedWhole && upgraded === undefined && store === undefined && (spool?.keepsNothing() ?? true);
    });
    if (kept) onConnect();
    else socket.once(ready, onConnect);
    if (!conf.ignoreClientAbort) out.onAbort(() => {
      // a tunnel watches both of its sides itself
      if (upgraded) return;
      spool?.abort();
      settle();
      // the request ends with its client: its connection closes (an HTTP/1.x one that only shut down its side too)
      out.abort();
    });
  });
}

/**
 * Reads a body passed on as it arrives, each read bounded by
 * `client_body_timeout` (`ngx_http_read_unbuffered_request_body`).
 * @throws BodyTimeoutError, ClientGoneError, BodyRefusedError
 */
async function* passedChunks(stream: Readable, timeoutMs: number): AsyncGenerator<Buffer> {
  const it = stream.iterator({ destroyOnReturn: false }) as AsyncIterator<Buffer>;
  for (;;) {
    let timer: NodeJS.Timeout | undefined;
    const next = await Promise.race([
      it.next().catch((err: { status?: number; level?: LogLevel; message?: string }) => {
        if (err.status === undefined) return undefined;
        throw new BodyRefusedError(err.message ?? '', err.status, err.level ?? 'error');
      }),
      new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), timeoutMs);
      }),
    ]).finally(() => clearTimeout(timer));
    if (next === 'timeout') throw new BodyTimeoutError();
    if (next === undefined || (next.done && !stream.readableEnded)) throw new ClientGoneError();
    if (next.done) return;
    // what else has arrived goes in the same record, as nginx sends what its buffer holds
    const more = stream.read() as Buffer | null;
    yield more ? Buffer.concat([next.value, more]) : next.value;
  }
}

/**
 * Sends `head` (FastCGI's BEGIN_REQUEST and PARAMS records, uwsgi's packet,
 * SCGI's netstring) with the request body framed by `wire` (STDIN records,
 * or the bytes as they are), then what ends it. What of the body is at hand
 * goes out in the same write as the head (a body read whole in memory, the
 * part of a passed body already received), as nginx's output chain writes
 * it. A write the server does not take within `sendTimeoutMs`
 * (`*_send_timeout`) rejects with `SendTimeoutError`; a body passed on as it
 * arrives waits at most `bodyTimeoutMs` for each read.
 */
async function sendBody<C extends PassConf>(
  socket: Socket, wire: CgiWire<C>, head: Buffer[], body: CgiBody, sendTimeoutMs: number, bodyTimeoutMs: number,
): Promise<void> {
  const write = (parts: Buffer[]): Promise<void> => new Promise((res, rej) => {
    if (parts.length === 0 || socket.write(Buffer.concat(parts))) {
      res();
      return;
    }
    const drained = (): void => {
      clearTimeout(timer);
      socket.off('drain', drained).off('close', drained);
      res();
    };
    const timer = setTimeout(() => {
      socket.off('drain', drained).off('close', drained);
      rej(new SendTimeoutError());
    }, sendTimeoutMs);
    socket.once('drain', drained).once('close', drained);
  });
  if (body.kind === 'memory') {
    if (body.data.length > 0) wire.bodyPiece(body.data, head);
    await write(wire.bodyEnd(head));
    return;
  }
  let source: AsyncIterable<Buffer>;
  if (body.kind === 'passed') {
    const received = body.stream.read() as Buffer | null;
    if (received) wire.bodyPiece(received, head);
    source = passedChunks(body.stream, bodyTimeoutMs);
  } else source = bodyStream(body) as AsyncIterable<Buffer>;
  await write(head);
  // a chunk the body's end came with (an HTTP/2 DATA frame with END_STREAM, the last bytes of a length)
  // goes out in one write with what ends the body, as nginx sends both from the read that found the end
  const it = source[Symbol.asyncIterator]();
  let next = await it.next();
  while (!next.done) {
    const following = it.next();
    const peeked = await Promise.race([following, new Promise<undefined>((resolve) => setImmediate(() => resolve(undefined)))]);
    if (peeked?.done) {
      await write(wire.bodyEnd(wire.bodyPiece(next.value, [])));
      return;
    }
    await write(wire.bodyPiece(next.value, []));
    next = peeked ?? await following;
  }
  await write(wire.bodyEnd([]));
}
