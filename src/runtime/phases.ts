/**
 * The request phases, in nginx's order (`ngx_http_core_module.c`,
 * `ngx_http_request.c`): post-read (realip), server rewrite, find location,
 * rewrite (repeated when the URI changes, at most 10 times), access
 * (`allow`/`deny`, `auth_basic`, `auth_request`, combined per `satisfy`),
 * try_files, content (proxy, static), and the special responses with
 * `error_page`. Internal redirects re-enter at server rewrite; named
 * locations at rewrite. Content handlers return an `Outcome` (exchange.ts):
 * only this runner finalizes, redirects internally and runs `error_page`;
 * a subrequest (`auth_request`) runs through it as any request.
 */
import { flvRequest } from './handlers/flv.js';
import { mp4Request } from './handlers/mp4.js';
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { ListenGroup, ScriptOp, ServerSet, VirtualServer } from '../config/route-table.js';
import type { ContentHandlerName } from '../config/modules/http-core.js';
import { findLocation } from './locations.js';
import { debugging, debugRequest, endSubrequest, logRequest, logSubrequest, type RuntimeContext } from './context.js';
import { backgroundSettled, DONE, statusOutcome, type ClientResponseTarget, type ContentHandler, type Exchange, type Outcome, type ResponseTarget, type Subrequest } from './exchange.js';
import { FilteredTarget } from './filters/chain.js';
import { checkAccessRules, type AccessResult } from './handlers/access.js';
import { checkAuthBasic } from './handlers/auth-basic.js';
import { authRequestResult, authSubrequest } from './handlers/auth-request.js';
import { fastcgiRequest, memcachedRequest, scgiRequest, uwsgiRequest } from './handlers/cgi-upstream.js';
import { limitConnections } from './handlers/limit-conn.js';
import { limitRequests } from './handlers/limit-req.js';
import { startMirrors } from './handlers/mirror.js';
import { grpcRequest, proxyRequest } from './handlers/proxy.js';
import { serveStatic, tryFiles } from './handlers/static.js';
import { statusFormat, statusPage } from './handlers/stub-status.js';
import { realClientAddress } from './handlers/realip.js';
import { discardRequestBody, forgoContinue } from './request-body.js';
import { HttpRequestState, type ClientConnection, type Refusal } from './request.js';
import { applyHeadersModule, contentTypeFor, keptHeaders, specialPage } from './respond.js';
import { RateLimitedTarget } from './limit-rate.js';
import { runScript, type ScriptLog, type ScriptOutcome } from './script.js';
import { preconditionStatus } from './conditional.js';
import { browserOf } from '../user-agent.js';
import { clientCertificateError } from './tls-details.js';
import { findServer, matchServer } from './server-names.js';
import { escapeUri, hostPort, normalizePath, parseUnsafeUri, validateHost } from './uri.js';
import { systemErrorText } from '../os-errors.js';

/** nginx's `NGX_HTTP_MAX_URI_CHANGES`. */
export const MAX_URI_CHANGES = 10;

/**
 * A client's request as its protocol layer read it: the request line's parts
 * and the headers, and, where the layer already did it (HTTP/1.x, as
 * `ngx_http_process_request_line` and `ngx_http_process_request_headers`),
 * the URI, the validated host and the refusal of a request nginx refuses.
 * Without `parsed` (HTTP/2) the phases check the target and host themselves.
 */
export interface ClientRequestHead {
  readonly method: string;
  /** The request target as received (`$request_uri`). */
  readonly requestUri: string;
  /** `$request` as received, when the layer has it. */
  readonly requestLine?: string;
  /** `$server_protocol`. */
  readonly protocol: string;
  readonly headers: IncomingHttpHeaders;
  readonly rawHeaders: readonly string[];
  readonly parsed?: { readonly uri: string; readonly args: string; readonly host: string; readonly requestPort: string };
  /** Whether the client asked to keep the connection (HTTP/1.x). */
  readonly keepalive?: boolean;
  /** Bytes of the request line and headers. */
  readonly headLength?: number;
  readonly refusal?: Refusal;
}

/** The error logger of each runtime context's requests (`HttpRequestState.logError`). */
const errorLoggers = new WeakMap<RuntimeContext, NonNullable<HttpRequestState['errorLogger']>>();

/**
 * The context's error logger, made once: a closure made per request would
 * keep the scope of `serveClientRequest` alive as long as the request is
 * reachable (undici's timers hold a finished request for a second or more),
 * which promoted every request's objects to the old generation.
 */
function errorLoggerOf(cx: RuntimeContext): NonNullable<HttpRequestState['errorLogger']> {
  let logger = errorLoggers.get(cx);
  if (!logger) {
    logger = (req, level, message) => logRequest(cx, req, level, message);
    errorLoggers.set(cx, logger);
  }
  return logger;
}

/**
 * Starts serving one client request (the phases run on) and returns its
 * state. Failures become 500 with an error-log line, never exceptions. When
 * the response is over, the access log is written and `onClosed` is called
 * with the request state.
 */
export function serveClientRequest(
  cx: RuntimeContext, head: ClientRequestHead, body: Readable | undefined, out: ClientResponseTarget, conn: ClientConnection,
  listen: ListenGroup, onClosed: (r: HttpRequestState) => void,
): HttpRequestState {
  const r = new HttpRequestState(
    conn, head.method, head.requestUri, head.protocol, head.headers, head.rawHeaders, conn.tls ? 'https' : 'http', cx.table.variableCount,
  );
  r.rawRequestLine = head.requestLine;
  r.keepalive = head.keepalive ?? false;
  r.requestLength = head.headLength ?? 0;
  r.errorLogger = errorLoggerOf(cx);
  out.watchSend({
    ms: () => r.loc.sendTimeoutMs,
    // ngx_http_writer (a response of its own) and ngx_http_upstream_process_downstream (a proxied one)
    expired: () => {
      r.timedOut = true;
      r.action = r.upstream ? 'sending to client' : 'sending response to client';
      logRequest(cx, r, 'info', `client timed out (${systemErrorText({ code: 'ETIMEDOUT' })})`);
      out.timedOut(r.loc.resetTimedoutConnection);
    },
  });
  // the handlers' responses pass through the response filters (gunzip, charset, gzip), then the rate limit (the write filter)
  const ex: Exchange = { cx, r, body, out: new FilteredTarget(new RateLimitedTarget(out, r, cx), cx, filterSubrequest) };
  // the request is over once its background subrequests (mirrors) are: its log line and the connection wait for them
  out.heldBy = r;
  out.whenClosed((completed) => {
    r.ended = true;
    if (r.cleanups.length > 0) for (const cleanup of r.cleanups.splice(0)) cleanup();
    r.completed = completed;
    r.bytesSent = out.bytesSent;
    r.requestLength += out.requestBodyBytes;
    const log = (): void => {
      if (debugging(r)) {
        // ngx_http_free_request, ngx_http_log_request
        debugRequest(cx, r, 'http close request');
        debugRequest(cx, r, 'http log handler');
      }
      // ngx_http_log_request
      r.action = 'logging request';
      cx.accessLog.write(r.loc.accessLogs, r, (level, message) => logRequest(cx, r, level, message));
      const passed = r.loc.proxy ?? r.loc.grpc;
      cx.status.tally(r, r.upstream && passed?.target.kind === 'static' ? passed.target.group : undefined);
      onClosed(r);
    };
    const hold = backgroundSettled(out.heldBy);
    if (hold) void hold.then(log);
    else log();
  });
  const set = listen.byLocalAddr.get(conn.localAddr) ?? listen.servers;
  r.server = set.defaultServer;
  r.loc = r.server.conf;
  r.host = r.server.name;
  void runPhases(ex, set, listen.ssl, head);
  return r;
}

/**
 * Writes the access-log entry nginx writes for an HTTP/2 stream it ended
 * while reading the stream's header block (a connection error in
 * `ngx_http_v2_state_process_header` closes the stream's request): in the
 * logs of the connection's server, with no request line (`$request` is
 * "-") and status 000, knowing the header fields read before the one that
 * ended it (`rawHeaders`, pseudo-headers first); `message` is logged first
 * at info, and `status` (408) logged, for a stream whose header block timed
 * out (`ngx_http_v2_close_stream_handler`).
 */
export function logUnreadStream(
  cx: RuntimeContext, conn: ClientConnection, server: VirtualServer, rawHeaders: readonly string[], message?: string, status?: number,
): void {
  const pseudo = new Map<string, string>();
  const headers: IncomingHttpHeaders = {};
  const raw: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const value = rawHeaders[i + 1]!;
    if (name.charCodeAt(0) === 58) {
      pseudo.set(name, value);
      continue;
    }
    raw.push(name, value);
    const seen = headers[name];
    headers[name] = seen === undefined ? value : `${String(seen)}${name === 'cookie' ? '; ' : ', '}${value}`;
  }
  const r = new HttpRequestState(conn, pseudo.get(':method') ?? '', pseudo.get(':path') ?? '', 'HTTP/2.0', headers, raw, conn.tls ? 'https' : 'http', cx.table.variableCount);
  r.lineRead = false;
  r.server = server;
  r.loc = server.conf;
  r.host = server.name;
  if (status !== undefined) r.status = status;
  if (message !== undefined) {
    // (`while reading client request headers`, without request line nor host: nginx has none yet)
    r.headersRead = false;
    r.action = 'reading client request headers';
    logRequest(cx, r, 'info', message);
    r.headersRead = true;
  }
  r.action = 'logging request';
  cx.accessLog.write(r.loc.accessLogs, r, (level, line) => logRequest(cx, r, level, line));
}

/** Why a request is refused before any phase, as nginx logs it (level info); 400 unless `status` says otherwise. */
function requestError(ex: Exchange, message: string, whileReading: 'request line' | 'request headers', status = 400): Promise<void> {
  const { r } = ex;
  if (whileReading === 'request line') r.headersRead = false;
  r.action = `reading client ${whileReading}`;
  logRequest(ex.cx, r, 'info', message);
  r.action = undefined;
  return finalize(ex, status);
}

/**
 * An HTTP/2 request refused while its Host is processed. nginx reads an
 * HTTP/2 request's `:authority` and `host` as they arrive
 * (`ngx_http_v2_state_process_header`), before it builds the request line:
 * the log line then has no `request:` nor `host:`, and `$request` is empty.
 */
function hostError(ex: Exchange, message: string, status = 400): Promise<void> {
  ex.r.lineRead = false;
  ex.r.headersRead = false;
  return requestError(ex, message, 'request headers', status);
}

/**
 * The client certificate checks of `ngx_http_process_request` for a server
 * with `ssl_verify_client`: a certificate that did not verify is 495
 * (`client SSL certificate verify error: (N:text)`), none with `on` is 496
 * (`client sent no required SSL certificate`); both answer 400 on the wire.
 */
function clientCertificateRefusal(r: HttpRequestState): { status: number; message: string } | undefined {
  const verify = r.server.verifyClient;
  const tls = r.conn.tls;
  if (verify === 'off' || !tls) return undefined;
  const refusal = clientCertificateError(verify, tls.clientVerify);
  return refusal === undefined ? undefined : { status: tls.clientVerify === 'none' ? 496 : 495, message: refusal };
}

/**
 * nginx's 421 rule (`ngx_http_set_virtual_server`): when the TLS handshake
 * chose a server by SNI and the Host names another one, a server that
 * verifies client certificates (`ssl_verify_client`) may not be reached
 * with the other's handshake. Returns the server SNI chose in that case.
 */
function misdirected(r: HttpRequestState, set: ServerSet, host: string): VirtualServer | undefined {
  const sni = r.conn.tls?.serverName?.toLowerCase();
  if (sni === undefined || host === '' || sni === host) return undefined;
  const sniServer = matchServer(set, sni);
  if (!sniServer) return undefined;
  const hostServer = matchServer(set, host) ?? set.defaultServer;
  return hostServer.verifyClient !== 'off' ? sniServer : undefined;
}

/**
 * A request refused while its head was read: answered with nginx's status
 * and page (or, `silent`, only logged, as `ngx_http_close_request` logs a
 * client that went away or timed out) from the server its host selected.
 */
async function refuse(ex: Exchange, set: ServerSet, host: string, refusal: Refusal): Promise<void> {
  const { r } = ex;
  r.server = findServer(set, host, r);
  r.loc = r.server.conf;
  r.host = host || r.server.name;
  r.keepalive = false;
  // an HTTP/2 stream refused in its header block: nginx has built neither the request line nor Host yet
  if (refusal.lineUnread) {
    r.lineRead = false;
    r.headersRead = false;
  }
  if (!refusal.silent) return requestError(ex, refusal.message, refusal.reading, refusal.status);
  if (refusal.reading === 'request line') r.headersRead = false;
  r.action = `reading client ${refusal.reading}`;
  logRequest(ex.cx, r, 'info', refusal.message);
  r.action = undefined;
  r.status = refusal.status;
  if (refusal.status === 408) r.timedOut = true;
  ex.out.abort();
}

/** A request's URI, arguments and host once checked; for HTTP/2, a second Host header, refused once the server is chosen. */
type CheckedTarget = NonNullable<ClientRequestHead['parsed']> & { readonly duplicateHost?: string };

/**
 * The target and Host of an HTTP/2 request as `ngx_http_v2_state_process_header`
 * and `ngx_http_process_request_header` check them (HTTP/1.x requests come
 * checked by their connection): the URI and arguments, and the validated
 * host, or the refusal nginx answers with.
 */
function http2Target(r: HttpRequestState): CheckedTarget | Refusal {
  let target = r.requestUri;
  let lineHost: string | undefined;
  const absolute = /^https?:\/\/([^/?#]*)(.*)$/i.exec(target);
  if (absolute) {
    lineHost = absolute[1]!;
    target = absolute[2] || '/';
  }
  const q = target.indexOf('?');
  const uri = normalizePath(q === -1 ? target : target.slice(0, q), true);
  // ngx_http_process_request_uri on the request line nginx builds after the header block: no line to log yet
  if (uri === undefined) return { status: 400, message: 'client sent invalid request', reading: 'request headers', lineUnread: true };
  const hosts: string[] = [];
  for (let i = 0; i < r.rawHeaders.length; i += 2) if (r.rawHeaders[i]!.toLowerCase() === 'host') hosts.push(r.rawHeaders[i + 1]!);
  if (hosts.length === 0 && r.headers.host !== undefined) hosts.push(r.headers.host);
  const lineHostValid = lineHost !== undefined ? validateHost(lineHost) : undefined;
  if (lineHost !== undefined && lineHostValid === undefined) return { status: 400, message: 'client sent invalid host in request line', reading: 'request line' };
  const headerHost = hosts.length > 0 ? validateHost(hosts[0]!) : '';
  if (headerHost === undefined) return { status: 400, message: 'client sent invalid host header', reading: 'request headers' };
  const duplicateHost = hosts.length > 1 ? `client sent duplicate host header: "Host: ${hosts[1]}", previous value: "Host: ${hosts[0]}"` : undefined;
  const host = lineHostValid ?? headerHost;
  return {
    uri, args: q === -1 ? '' : target.slice(q + 1), host, requestPort: host ? hostPort(lineHostValid !== undefined ? lineHost! : hosts[0]!) : '', duplicateHost,
  };
}

/**
 * The checks of `ngx_http_process_request` after the head was read (the
 * 421 rule, plain HTTP on a TLS port (`sslPort`), client certificates),
 * then the phases.
 */
async function runPhases(ex: Exchange, set: ServerSet, sslPort: boolean, head: ClientRequestHead): Promise<void> {
  const { r, cx } = ex;
  try {
    if (head.refusal) {
      // $uri and $args as far as they were made (empty for a request refused for its URI)
      if (head.parsed) {
        r.uri = head.parsed.uri;
        r.args = head.parsed.args;
      }
      return await refuse(ex, set, head.parsed?.host ?? '', head.refusal);
    }
    const target: CheckedTarget | Refusal = head.parsed ?? http2Target(r);
    if ('status' in target) {
      // nginx never set r->uri: $uri is empty in the access log
      if (target.reading === 'request line' || target.lineUnread) {
        r.uri = '';
        return await refuse(ex, set, '', target);
      }
      return await hostError(ex, target.message);
    }
    r.uri = target.uri;
    r.args = target.args;
    const host = target.host;
    r.requestHost = host;
    r.requestPort = target.requestPort;
    const sniServer = misdirected(r, set, host);
    if (sniServer) {
      r.server = sniServer;
      r.loc = sniServer.conf;
      r.host = host;
      return await requestError(ex, 'client attempted to request the server name different from the one that was negotiated', 'request headers', 421);
    }
    r.server = findServer(set, host, r);
    r.loc = r.server.conf;
    r.host = host || r.server.name;
    if (debugging(r)) debugHead(ex);
    if (!head.parsed) {
      if (!set.http2Listen && !r.server.conf.http2) {
        // ngx_http_set_virtual_server: the Host names a server with `http2 off`
        return await hostError(ex, 'client attempted to request the server name for which the negotiated protocol is disabled', 421);
      }
      // a second Host header is refused in the server the first one selected (ngx_http_process_host)
      if (target.duplicateHost) return await hostError(ex, target.duplicateHost);
      if (r.method === 'CONNECT' || r.method === 'TRACE') {
        // ngx_http_process_request_header, which HTTP/2 requests go through too (HTTP/1.x refuses them while parsing)
        return await requestError(ex, `client sent ${r.method} method`, 'request headers', 405);
      }
    }
    if (sslPort && !r.conn.tls) return await requestError(ex, 'client sent plain HTTP request to HTTPS port', 'request headers', 497);
    const refusal = clientCertificateRefusal(r);
    if (refusal) return await requestError(ex, refusal.message, 'request headers', refusal.status);
    realClientAddress(r);
    await fromServerRewrite(ex);
  } catch (err) {
    logRequest(cx, r, 'crit', `jinx internal error: ${(err as Error).stack ?? String(err)}`);
    if (!ex.out.started) await finalize(ex, 500).catch(() => ex.out.abort());
    else ex.out.abort();
  }
}

// The phase functions below are plain functions returning the promise of the
// next phase, not async ones: a request passes through several of them, and
// each async layer would add promise ticks to every request. Their
// exceptions reach runPhases' try/catch either way.

/**
 * The debug lines of a request's head (`ngx_http_process_request_line`,
 * `ngx_http_process_request_headers`), written once the server is known.
 */
function debugHead(ex: Exchange): void {
  const { r, cx } = ex;
  debugRequest(cx, r, `http request line: "${r.requestLine}"`);
  debugRequest(cx, r, `http uri: "${r.uri}"`);
  debugRequest(cx, r, `http args: "${r.args}"`);
  // the extension of the last path segment, as nginx's request-line parser finds it (r->exten)
  const dot = r.uri.lastIndexOf('.');
  debugRequest(cx, r, `http exten: "${dot > r.uri.lastIndexOf('/') ? r.uri.slice(dot + 1) : ''}"`);
  for (let i = 0; i < r.rawHeaders.length; i += 2) debugRequest(cx, r, `http header: "${r.rawHeaders[i]}: ${r.rawHeaders[i + 1]}"`);
  debugRequest(cx, r, 'http header done');
}

/**
 * Where the messages of the script about to run go (script.ts): errors at
 * level error; the trace at level notice when the level has `rewrite_log
 * on` (the level whose script runs decides, as the rewrite handler's
 * `e->log`: an `if` block it enters does not) or an `error_log` at debug
 * (nginx's `log_level & NGX_LOG_DEBUG_HTTP`).
 */
function scriptLog(ex: Exchange): ScriptLog {
  const { cx, r } = ex;
  const traced = r.loc.rewriteLog || debugging(r);
  return { error: (message) => logRequest(cx, r, 'error', message), notice: traced ? (message) => logRequest(cx, r, 'notice', message) : undefined };
}

/** Runs a level's rewrite directives (`runScript`); most levels have none, and then nothing is made for their messages. */
function runLevelScript(ex: Exchange, ops: readonly ScriptOp[]): ScriptOutcome {
  return runScript(ops, ex.r, ops.length === 0 ? undefined : scriptLog(ex));
}

/** Runs a request from the server rewrite phase (a new request, or after an internal redirect). */
function fromServerRewrite(ex: Exchange): Promise<void> {
  const { r } = ex;
  r.loc = r.server.conf;
  const outcome = runLevelScript(ex, r.server.script);
  if (outcome.kind === 'return' || outcome.kind === 'redirect') return scriptResponse(ex, outcome);
  return findConfig(ex);
}

function findConfig(ex: Exchange): Promise<void> {
  const { r } = ex;
  for (;;) {
    const match = findLocation(r.server.locations, r.uri, r);
    if (match.autoRedirect) {
      r.location = match.location;
      r.loc = match.location!.conf;
      // ngx_http_core_find_config_phase: the location's escaped name (NGX_ESCAPE_URI) and the arguments
      return finalize(ex, 301, escapeUri(r.uri) + '/' + (r.args ? `?${r.args}` : ''));
    }
    // ngx_http_core_find_config_phase, in the log of the configuration it leaves
    if (debugging(r)) debugRequest(ex.cx, r, `using configuration "${match.location?.match === 'exact' ? '=' : ''}${match.location?.name ?? ''}"`);
    r.location = match.location;
    r.loc = match.location?.conf ?? r.server.conf;
    if (r.loc.internal && !r.internal) return finalize(ex, 404);
    limitExcept(r);
    const length = Number(r.headers['content-length'] ?? 0);
    const max = r.loc.clientMaxBodySizeBytes;
    if (max > 0 && length > max && !r.parent) {
      logRequest(ex.cx, r, 'error', `client intended to send too large body: ${length} bytes`);
      // ngx_http_core_find_config_handler: whatever answers the 413, no 100 Continue first (r->expect_tested)
      forgoContinue(ex);
      return finalize(ex, 413);
    }
    const outcome = runLevelScript(ex, r.loc.script);
    if (outcome.kind === 'return' || outcome.kind === 'redirect') return scriptResponse(ex, outcome);
    if (outcome.kind === 'last' || (outcome.kind === 'done' && outcome.uriChanged)) {
      if (!countUriChange(ex, 'processing')) return finalize(ex, 500);
      continue;
    }
    return afterRewrite(ex);
  }
}

/** A method `limit_except` does not let through switches the request to the block's settings (`ngx_http_update_location_config`). */
function limitExcept(r: HttpRequestState): void {
  const limit = r.loc.limitExcept;
  if (limit && !limit.methods.has(r.method)) r.loc = limit.conf;
}

/** Counts a URI change of `r`; false past nginx's `NGX_HTTP_MAX_URI_CHANGES`, where the request ends with 500. */
export function countedUriChange(r: HttpRequestState): boolean {
  return ++r.uriChanges <= MAX_URI_CHANGES;
}

/** Counts a URI change; false (after logging nginx's error) when the limit is reached. */
function countUriChange(ex: Exchange, what: 'processing' | 'internally redirecting to'): boolean {
  const { r } = ex;
  if (!countedUriChange(r)) {
    logRequest(ex.cx, r, 'error', `rewrite or internal redirection cycle while ${what} "${r.uri}"`);
    return false;
  }
  return true;
}

/** Preaccess (realip with the location's settings, limit_req, limit_conn), access, try_files and content phases. */
function afterRewrite(ex: Exchange): Promise<void> {
  const { r } = ex;
  realClientAddress(r);
  if (r.loc.limitReq.limits.length > 0) return limitRequests(ex).then((refused) => (refused === undefined ? limitConnPhase(ex) : finalize(ex, refused)));
  return limitConnPhase(ex);
}

/** limit_conn's preaccess handler (after limit_req's, as nginx orders them), then access, try_files and content. */
function limitConnPhase(ex: Exchange): Promise<void> {
  if (ex.r.loc.limitConn.limits.length > 0) return limitConnections(ex).then((refused) => (refused === undefined ? accessPhases(ex) : finalize(ex, refused)));
  return accessPhases(ex);
}

/** Access, precontent (try_files, mirror) and content phases. */
function accessPhases(ex: Exchange): Promise<void> {
  const { loc } = ex.r;
  if (loc.access.length > 0 || loc.authBasic || loc.authRequest || loc.tryFiles || loc.mirror) return checkedAccess(ex);
  return contentPhase(ex);
}

/**
 * The access and precontent phases, then content: try_files, then the
 * mirrors of a main request (nginx runs the precontent handlers in reverse
 * order of their modules: `ngx_http_try_files_module` before `ngx_http_mirror_module`).
 */
async function checkedAccess(ex: Exchange): Promise<void> {
  const { r } = ex;
  const { loc } = r;
  if (loc.access.length > 0 || loc.authBasic || loc.authRequest) {
    const denied = await accessPhase(ex);
    if (denied !== undefined) return finalize(ex, denied);
  }
  if (r.loc.tryFiles) {
    const next = await tryFiles(ex);
    if (next.kind !== 'found') return follow(ex, next);
  }
  if (r.loc.mirror && !r.parent) {
    const next = await startMirrors(ex, runSubrequest);
    if (typeof next === 'number') return follow(ex, next === 0 ? { kind: 'close' } : statusOutcome(next));
    return contentPhase(next);
  }
  return contentPhase(ex);
}

/**
 * Returns the status to answer with when access is refused, or undefined
 * (`ngx_http_core_access_phase`, `ngx_http_core_post_access_phase`): under
 * `satisfy any` the first check that allows wins (a `WWW-Authenticate` an
 * earlier check set is dropped), 401 and 403 wait for the other checks (401
 * is kept over 403), and any other status (a 500) answers at once.
 */
async function accessPhase(ex: Exchange): Promise<number | undefined> {
  const { r } = ex;
  if (r.parent) return undefined;
  const any = r.loc.satisfy === 'any';
  let code: number | undefined;
  const checks = [
    () => checkAccessRules(ex),
    () => checkAuthBasic(ex),
    () => authRequest(ex),
  ];
  for (const check of checks) {
    const result = await check();
    if (result === 'declined') continue;
    if (result === 'ok') {
      if (!any) continue;
      dropKept(r, 'www-authenticate');
      return undefined;
    }
    if (!any || (result !== 401 && result !== 403)) return result;
    if (code !== 401) code = result;
  }
  if (any && code !== undefined) {
    if (code === 403) logRequest(ex.cx, r, 'error', 'access forbidden by rule');
    return code;
  }
  return undefined;
}

/** `auth_request`: its subrequest runs through the phases, then its status decides. */
async function authRequest(ex: Exchange): Promise<AccessResult> {
  const sub = authSubrequest(ex);
  if (!sub) return 'declined';
  await runSubrequest(sub);
  return authRequestResult(ex, sub);
}

/** The handler of each content directive (`clcf->handler`); without one, the static, index and autoindex handlers. */
const CONTENT_HANDLERS: Readonly<Record<ContentHandlerName, ContentHandler>> = {
  proxy_pass: proxyRequest,
  grpc_pass: grpcRequest,
  fastcgi_pass: fastcgiRequest,
  uwsgi_pass: uwsgiRequest,
  scgi_pass: scgiRequest,
  memcached_pass: memcachedRequest,
  empty_gif: sendEmptyGif,
  stub_status: sendStubStatus,
  flv: flvRequest,
  mp4: mp4Request,
};

/** The content phase: the location's handler, then what its outcome asks for. */
function contentPhase(ex: Exchange): Promise<void> {
  const { loc } = ex.r;
  const handler: ContentHandler = loc.contentHandler === undefined ? serveStatic : CONTENT_HANDLERS[loc.contentHandler];
  return handler(ex).then((outcome) => follow(ex, outcome));
}

/**
 * Follows a handler's outcome (`ngx_http_finalize_request` with the code a
 * handler returns): nothing more once the response is done, a special
 * response, an internal redirect, a named location or an `X-Accel-Redirect`.
 */
function follow(ex: Exchange, outcome: Outcome): Promise<void> {
  const followed = followOutcome(ex, outcome);
  return outcome.thenClose ? followed.then(() => ex.out.abort()) : followed;
}

function followOutcome(ex: Exchange, outcome: Outcome): Promise<void> {
  switch (outcome.kind) {
    case 'done':
      return Promise.resolve();
    case 'close':
      ex.out.abort();
      return Promise.resolve();
    case 'status':
      return finalize(ex, outcome.status, outcome.location);
    case 'redirect':
      return internalRedirect(ex, outcome.uri, outcome.args);
    case 'named':
      return namedLocation(ex, outcome.name);
    case 'accel':
      return acceleratedRedirect(ex, outcome.value);
  }
}

/**
 * Runs a subrequest (`auth_request`) through the phases from server
 * rewrite, as any request, and resolves once its response has ended; a
 * failure of jinx's own is logged and recorded as 500.
 */
export async function runSubrequest(sub: Subrequest): Promise<void> {
  try {
    await fromServerRewrite(sub);
  } catch (err) {
    logRequest(sub.cx, sub.r, 'crit', `jinx internal error in subrequest: ${(err as Error).stack ?? String(err)}`);
    sub.out.status ||= 500;
  }
  await sub.out.finished;
  endSubrequest(sub.cx, sub.r);
}

/**
 * Runs an SSI or addition subrequest through the phases from server rewrite
 * (the filters' `SubrequestRunner`), a slice's clone from the content
 * phase: its response to `out`, through the subrequest filters with
 * `filtered`; a failure of jinx's own is logged and the response aborted.
 */
async function filterSubrequest(cx: RuntimeContext, sr: HttpRequestState, out: ResponseTarget, filtered: boolean, clone = false): Promise<void> {
  const target = filtered ? new FilteredTarget(out, cx, filterSubrequest) : out;
  try {
    const ex = { cx, r: sr, body: undefined, out: target };
    await (clone ? contentPhase(ex) : fromServerRewrite(ex));
  } catch (err) {
    logRequest(cx, sr, 'crit', `jinx internal error in subrequest: ${(err as Error).stack ?? String(err)}`);
    target.abort();
  }
  logSubrequest(cx, sr);
}

/**
 * An internal redirect to `uri` (error_page, try_files fallback, index): back
 * to server rewrite, with no action in log lines until a handler sets one
 * (`ngx_http_internal_redirect`, `ngx_http_handler`).
 */
function internalRedirect(ex: Exchange, uri: string, args: string): Promise<void> {
  redirectTo(ex.r, uri, args);
  if (!countUriChange(ex, 'internally redirecting to')) return finalize(ex, 500);
  // ngx_http_internal_redirect: the modules' contexts start again
  ex.r.moduleCtx.clear();
  return fromServerRewrite(ex);
}

/**
 * What `ngx_http_internal_redirect` sets for the new URI before the server
 * rewrite phase: the URI and arguments, an internal request, no regex
 * captures nor alias rewrite, no action in log lines until a handler sets
 * one. The URI change is counted apart (`countedUriChange`).
 */
export function redirectTo(r: HttpRequestState, uri: string, args: string): void {
  r.action = undefined;
  r.uri = uri;
  r.args = args;
  r.internal = true;
  r.captures = null;
  r.addUriToAlias = false;
}

/**
 * Follows an upstream's `X-Accel-Redirect` (`ngx_http_upstream_process_headers`):
 * to a named location as it is, or to a URI (arguments after `?`, the path
 * unescaped) as GET (HEAD stays HEAD); an unsafe URI is 404 with nginx's
 * error line.
 */
function acceleratedRedirect(ex: Exchange, value: string): Promise<void> {
  const { r } = ex;
  if (value.startsWith('@')) return namedLocation(ex, value);
  const target = parseUnsafeUri(value);
  if ('unsafe' in target) {
    logRequest(ex.cx, r, 'error', `unsafe URI "${target.unsafe}" was detected`);
    return finalize(ex, 404);
  }
  if (r.method !== 'HEAD') r.method = 'GET';
  return internalRedirect(ex, target.uri, target.args);
}

/** A redirect to a named location (`@name`): its rewrite phase onwards. */
async function namedLocation(ex: Exchange, name: string): Promise<void> {
  const { r } = ex;
  const loc = r.server.locations.named.get(name);
  if (!loc) {
    logRequest(ex.cx, r, 'error', `could not find named location "${name}"`);
    return finalize(ex, 500);
  }
  if (!countUriChange(ex, 'internally redirecting to')) return finalize(ex, 500);
  // ngx_http_named_location: the modules' contexts start again
  r.moduleCtx.clear();
  r.location = loc;
  r.loc = loc.conf;
  r.internal = true;
  limitExcept(r);
  const outcome = runLevelScript(ex, r.loc.script);
  if (outcome.kind === 'return' || outcome.kind === 'redirect') return scriptResponse(ex, outcome);
  if (outcome.kind === 'last' || (outcome.kind === 'done' && outcome.uriChanged)) return findConfig(ex);
  return afterRewrite(ex);
}

/** Statuses nginx answers by closing the connection (`NGX_HTTP_CLOSE`, request time-out, client closed). */
export const CLOSE_STATUSES: ReadonlySet<number> = new Set([444, 408, 499]);
/** Statuses nginx treats as redirects: `return` sends them with a `Location` (`ngx_http_send_response`). */
export const REDIRECT_STATUSES: ReadonlySet<number> = new Set([301, 302, 303, 307, 308]);

/** Statuses after which nginx does not keep the connection alive, whatever answers them (`ngx_http_special_response_handler`). */
const NO_KEEPALIVE = new Set([400, 413, 414, 497, 495, 496, 500, 501]);

/** A `return` or a redirecting `rewrite`, as the rewrite script ends with it. */
export type ScriptAnswer = { kind: 'return'; code: number; text: string | undefined } | { kind: 'redirect'; code: number; location: string };

/**
 * What a `return` or a redirecting `rewrite` answers with
 * (`ngx_http_script_return_code`, `ngx_http_send_response`): `finalize`, a
 * status that goes through `error_page` (a redirect with its `Location`),
 * or `text`, a status sent with the text as its body. `jinx explain` asks
 * the same.
 */
export function scriptAnswerOf(o: ScriptAnswer): { kind: 'finalize'; status: number; location?: string } | { kind: 'text'; status: number; text: string } {
  if (o.kind === 'redirect') return { kind: 'finalize', status: o.code, location: o.location };
  if (o.code >= 400 && o.text === undefined) return { kind: 'finalize', status: o.code };
  if (REDIRECT_STATUSES.has(o.code)) return { kind: 'finalize', status: o.code, location: o.text ?? '' };
  if (CLOSE_STATUSES.has(o.code)) return { kind: 'finalize', status: o.code };
  return { kind: 'text', status: o.code, text: o.text ?? '' };
}

/** Answers a `return` or a redirecting `rewrite` (`scriptAnswerOf`). */
async function scriptResponse(ex: Exchange, o: ScriptAnswer): Promise<void> {
  const answer = scriptAnswerOf(o);
  if (answer.kind === 'text') return sendText(ex, answer.status, answer.text);
  return finalize(ex, answer.status, answer.location);
}

/** The 1×1 transparent GIF of `empty_gif`, nginx's bytes (`ngx_empty_gif`), 43 of them. */
const EMPTY_GIF = Buffer.from([
  0x47, 0x49, 0x46, 0x38, 0x39, 0x61, // GIF89a
  0x01, 0x00, 0x01, 0x00, 0x80, 0x01, 0x00, // 1×1, global 1-bit color table, background #1
  0x00, 0x00, 0x00, 0xff, 0xff, 0xff, // #0 black, #1 white
  0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x01, 0x00, // graphic control extension: #1 transparent
  0x2c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, // image descriptor
  0x02, 0x02, 0x4c, 0x01, 0x00, // LZW data: clear, 1, end
  0x3b, // trailer
]);

/** The `Last-Modified` nginx gives the empty GIF: Mon, 28 Sep 1970 06:00:00 GMT. */
const EMPTY_GIF_LAST_MODIFIED_SEC = 23_349_600;

/**
 * `empty_gif` (`ngx_http_empty_gif_handler`): GET and HEAD get the GIF
 * (`image/gif`, dated by `EMPTY_GIF_LAST_MODIFIED_SEC`), other methods 405.
 */
async function sendEmptyGif(ex: Exchange): Promise<Outcome> {
  if (ex.r.method !== 'GET' && ex.r.method !== 'HEAD') return statusOutcome(405);
  await sendResponse(ex, 200, EMPTY_GIF, 'image/gif', EMPTY_GIF_LAST_MODIFIED_SEC);
  return DONE;
}

/**
 * `stub_status` (`ngx_http_stub_status_handler`): GET and HEAD get the
 * status page (`handlers/stub-status.ts`: nginx's text, or the Prometheus
 * formats an `Accept` asks for) of the figures read once the request body
 * is discarded (a HEAD's header with the page's length, as nginx's). Other
 * methods 405.
 */
async function sendStubStatus(ex: Exchange): Promise<Outcome> {
  const { r } = ex;
  if (r.method !== 'GET' && r.method !== 'HEAD') return statusOutcome(405);
  const snapshot = await ex.cx.status.snapshot();
  const page = statusPage(snapshot, statusFormat(r.headers));
  await sendResponse(ex, 200, page.body, page.type, undefined);
  return DONE;
}

/** Sends `return CODE [TEXT]`: `sendResponse` with the text typed by the URI's extension or `default_type`. */
function sendText(ex: Exchange, status: number, text: string): Promise<void> | void {
  return sendResponse(ex, status, Buffer.from(text, 'latin1'), undefined, undefined);
}

/**
 * Sends a response of its own (`ngx_http_send_response`, which discards the
 * request body first): `body` typed `type`, or by the URI's extension or
 * `default_type`, dated `lastModifiedSec` when given. The status is the one
 * of an `error_page` being followed, if any (a `return 204` there sends the
 * error's status with an empty body and its length); headers an earlier
 * response step set stay (a redirect's `Location`). The not-modified filter
 * judges a 200 by its date alone: without one it fails `If-Match` and
 * `If-Unmodified-Since` (412) and matches `If-None-Match: *` (304), as in
 * nginx.
 */
function sendResponse(ex: Exchange, status: number, body: Buffer, type: string | undefined, lastModifiedSec: number | undefined): Promise<void> | void {
  const { r } = ex;
  const failed = discardRequestBody(ex);
  if (failed !== undefined) return finalize(ex, failed);
  const final = r.errStatus || status;
  const condition = final === 200 && !r.parent ? preconditionStatus(r, lastModifiedSec, undefined) : 200;
  if (condition === 412) return finalize(ex, 412);
  const headers = keptHeaders(r);
  if (lastModifiedSec !== undefined && final === 200) headers.push(['Last-Modified', new Date(lastModifiedSec * 1000).toUTCString()]);
  if (condition === 304) {
    const bare = headers.filter(([name]) => name.toLowerCase() !== 'content-type');
    applyHeadersModule(r, 304, bare);
    ex.out.head(r, 304, bare);
    ex.out.end();
    return;
  }
  const typed = headers.some(([name]) => name.toLowerCase() === 'content-type');
  if (final === 204) {
    // ngx_http_header_filter: a 204 has no type
    if (typed) headers.splice(0, headers.length, ...headers.filter(([name]) => name.toLowerCase() !== 'content-type'));
  } else {
    // ngx_http_set_content_type keeps a type set before (X-Accel-Redirect)
    if (!typed) headers.push(['Content-Type', type ?? contentTypeFor(r)]);
    headers.push(['Content-Length', String(body.length)]);
  }
  applyHeadersModule(r, status, headers);
  ex.out.head(r, status, headers);
  const send = !ex.out.headOnly && final !== 204 && final !== 304;
  r.bodyBytesSent = send ? body.length : 0;
  ex.out.end(send ? body : undefined);
}

/**
 * Finishes a request with a special response as
 * `ngx_http_special_response_handler` does: an `error_page` for the status
 * is followed (once, unless `recursive_error_pages`), otherwise nginx's page
 * is sent. 444, 408 and 499 close the connection instead. `location` is the
 * `Location` of a redirect: it replaces any earlier one and stays with the
 * response an `error_page` for the status sends (nginx's
 * `headers_out.location`).
 */
export async function finalize(ex: Exchange, status: number, location?: string): Promise<void> {
  const { r } = ex;
  if (ex.out.started) {
    ex.out.abort();
    return;
  }
  if (CLOSE_STATUSES.has(status)) {
    r.status = status;
    // nginx marks 444 and time-outs as timed out (`c->timedout`)
    ex.out.abort((status === 444 || r.timedOut) && r.loc.resetTimedoutConnection ? 'reset' : undefined);
    return;
  }
  if (location !== undefined) setLocation(r, location);
  r.errStatus = status;
  r.status = status;
  // ngx_http_special_response_handler ends keep-alive before it looks for an error_page
  if (NO_KEEPALIVE.has(status)) r.keepalive = false;
  const page = errorPageOf(r, status);
  if (page === undefined) return sendSpecial(ex, r.errStatus || status);
  // ngx_http_send_error_page: an error_page with a code of its own other than 200 sends no 100 Continue (r->expect_tested)
  if (r.errStatus !== 0 && r.errStatus !== 200) forgoContinue(ex);
  if (page.kind === 'uri') return internalRedirect(ex, page.uri, page.args);
  if (page.kind === 'named') return namedLocation(ex, page.name);
  setLocation(r, page.location);
  return sendSpecial(ex, page.status);
}

/** Where an `error_page` sends a request: a URI (an internal redirect), a named location, or a redirect to another site. */
export type ErrorPageTarget =
  | { kind: 'uri'; uri: string; args: string }
  | { kind: 'named'; name: string }
  | { kind: 'redirect'; status: number; location: string };

/**
 * The `error_page` of the request's location for `status`, if one applies
 * (none after one already did without `recursive_error_pages`, nor past
 * `NGX_HTTP_MAX_URI_CHANGES`), as `ngx_http_send_error_page` takes it: it
 * marks the request as on its error page, sets the status the answer will
 * have (`=code`, or the target's own with `=`), makes a redirect to a URI
 * a GET (HEAD stays HEAD), and gives a redirect elsewhere `=code` when that
 * is a redirect status, else 302. `finalize` and `jinx explain` both ask it.
 */
export function errorPageOf(r: HttpRequestState, status: number): ErrorPageTarget | undefined {
  const page = r.loc.errorPages.get(status);
  if (!page || r.errorPage || r.uriChanges > MAX_URI_CHANGES) return undefined;
  if (!r.loc.recursiveErrorPages) r.errorPage = true;
  if (typeof page.overwrite === 'number') r.errStatus = page.overwrite;
  else if (page.overwrite === 'from-target') r.errStatus = 0;
  // `$status` from here on: the error page's code, or (with `=`) none until the target answers (ngx_http_variable_status)
  r.status = r.errStatus ?? status;
  const target = page.target.evaluate(r);
  if (target.startsWith('/')) {
    const q = target.indexOf('?');
    if (r.method !== 'HEAD') r.method = 'GET';
    return { kind: 'uri', uri: q === -1 ? target : target.slice(0, q), args: q === -1 ? '' : target.slice(q + 1) };
  }
  if (target.startsWith('@')) return { kind: 'named', name: target };
  const code = typeof page.overwrite === 'number' && REDIRECT_STATUSES.has(page.overwrite) ? page.overwrite : 302;
  r.errStatus = code;
  r.status = code;
  return { kind: 'redirect', status: code, location: target };
}

/** Sets the response's `Location` (`ngx_http_clear_location`, then a new one). */
function setLocation(r: HttpRequestState, location: string): void {
  dropKept(r, 'location');
  r.pendingHeaders.push(['Location', location]);
}

/** Removes the kept headers named `lower` (lowercase). */
function dropKept(r: HttpRequestState, lower: string): void {
  for (let i = r.pendingHeaders.length - 1; i >= 0; i--) {
    if (r.pendingHeaders[i]![0].toLowerCase() === lower) r.pendingHeaders.splice(i, 1);
  }
}

/** Headers a special response never has. */
const SPECIAL_CLEARED = new Set(['accept-ranges', 'last-modified', 'etag']);

/** Sends nginx's page for a status, if it has one; Last-Modified, ETag and Accept-Ranges are never sent with it. */
function sendSpecial(ex: Exchange, status: number): void {
  const { r } = ex;
  // ngx_http_special_response_handler: no 100 Continue (r->expect_tested), the body is discarded; an invalid one ends keep-alive
  forgoContinue(ex);
  if (discardRequestBody(ex) !== undefined) r.keepalive = false;
  const body = specialPage(status, r.loc, browserOf(r.headers['user-agent']).msie);
  // ngx_http_special_response_handler clears these (kept from an X-Accel-Redirect)
  const headers = keptHeaders(r).filter(([name]) => !SPECIAL_CLEARED.has(name.toLowerCase()));
  // nginx's header filter drops the length of a 204 (a WebDAV DELETE's, an error_page's =204)
  if (status !== 204) headers.push(['Content-Length', String(body?.length ?? 0)]);
  if (body !== undefined) headers.push(['Content-Type', 'text/html']);
  r.specialResponse = true;
  applyHeadersModule(r, status, headers);
  ex.out.head(r, status, headers);
  r.bodyBytesSent = body && !ex.out.headOnly ? body.length : 0;
  ex.out.end(body === undefined || ex.out.headOnly ? undefined : body);
}
