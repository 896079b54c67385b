/**
 * The request phases, in nginx's order (`ngx_http_core_module.c`,
 * `ngx_http_request.c`): post-read (realip), server rewrite, find location,
 * rewrite (repeated when the URI changes, at most 10 times), access
 * (`allow`/`deny`, `auth_basic`, `auth_request`, combined per `satisfy`),
 * try_files, content (proxy, static), and the special responses with
 * `error_page`. Internal redirects re-enter at server rewrite; named
 * locations at rewrite.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { ListenGroup } from '../config/route-table.js';
import { findLocation } from './locations.js';
import { logRequest, type RuntimeContext } from './context.js';
import { ClientTarget, type Exchange } from './exchange.js';
import { checkAccessRules } from './handlers/access.js';
import { checkAuthBasic } from './handlers/auth-basic.js';
import { checkAuthRequest } from './handlers/auth-request.js';
import { fastcgiRequest } from './handlers/fastcgi.js';
import { proxyRequest } from './handlers/proxy.js';
import { serveStatic, tryFiles } from './handlers/static.js';
import { realClientAddress } from './handlers/realip.js';
import { HttpRequestState, type ClientConnection } from './request.js';
import { absoluteLocation, applyHeadersModule, specialPage, type ClientRequest, type ClientResponse } from './respond.js';
import { runScript } from './script.js';
import { findServer } from './server-names.js';
import { normalizePath, validateHost } from './uri.js';

/** nginx's `NGX_HTTP_MAX_URI_CHANGES`. */
const MAX_URI_CHANGES = 10;

/**
 * Starts serving one client request and returns its state (the phases run
 * on). Failures become 500 with an error-log line, never exceptions.
 */
export function serveClientRequest(
  cx: RuntimeContext, req: ClientRequest, res: ClientResponse, conn: ClientConnection, listen: ListenGroup,
): HttpRequestState {
  const h2 = req.httpVersion === '2.0';
  const protocol = h2 ? 'HTTP/2.0' : `HTTP/${req.httpVersion}`;
  const headers = h2 ? http2Headers(req.headers) : req.headers;
  const rawHeaders = h2 ? req.rawHeaders.filter((_, i, a) => !a[i - (i % 2)]!.startsWith(':')) : req.rawHeaders;
  const r = new HttpRequestState(
    conn, req.method ?? 'GET', req.url ?? '/', protocol, headers, rawHeaders, conn.tls ? 'https' : 'http', cx.table.variableCount,
  );
  const ex: Exchange = { cx, r, body: req, out: new ClientTarget(req, res) };
  res.once('close', () => {
    r.completed = (res as { writableFinished?: boolean }).writableFinished ?? res.finished;
    cx.accessLog.write(r.loc.accessLogs, r);
  });
  const set = listen.byLocalAddr.get(conn.localAddr) ?? listen.servers;
  const hostHeader = headers.host;
  const host = hostHeader === undefined ? '' : validateHost(hostHeader);
  r.server = findServer(set, host ?? '', r);
  r.loc = r.server.conf;
  r.host = host || r.server.name;
  void runPhases(ex, host, hostHeader);
  return r;
}

/**
 * The headers of an HTTP/2 request as nginx sees them: pseudo-headers
 * removed, `:authority` as the Host header when there is none.
 */
function http2Headers(raw: IncomingHttpHeaders): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const name of Object.keys(raw)) if (name.charCodeAt(0) !== 58) out[name] = raw[name];
  const authority = raw[':authority'];
  if (out.host === undefined && typeof authority === 'string') out.host = authority;
  return out;
}

async function runPhases(ex: Exchange, host: string | undefined, hostHeader: string | undefined): Promise<void> {
  const { r, cx } = ex;
  const protocol = r.protocol;
  try {
    if (host === undefined) return await finalize(ex, 400);
    if (hostHeader === undefined && protocol === 'HTTP/1.1') return await finalize(ex, 400);
    const target = r.requestUri;
    const q = target.indexOf('?');
    const uri = normalizePath(q === -1 ? target : target.slice(0, q), true);
    if (uri === undefined) return await finalize(ex, 400);
    r.uri = uri;
    realClientAddress(r);
    await fromServerRewrite(ex);
  } catch (err) {
    logRequest(cx, r, 'crit', `jinx internal error: ${(err as Error).stack ?? String(err)}`);
    if (!ex.out.started) await finalize(ex, 500).catch(() => ex.out.abort());
    else ex.out.abort();
  }
}

/** Runs a request from the server rewrite phase (a new request, or after an internal redirect). */
export async function fromServerRewrite(ex: Exchange): Promise<void> {
  const { r } = ex;
  r.loc = r.server.conf;
  const outcome = runScript(r.server.script, r);
  if (outcome.kind === 'return' || outcome.kind === 'redirect') return scriptResponse(ex, outcome);
  return findConfig(ex);
}

async function findConfig(ex: Exchange): Promise<void> {
  const { r } = ex;
  for (;;) {
    const match = findLocation(r.server.locations, r.uri, r);
    if (match.autoRedirect) {
      r.location = match.location;
      r.loc = match.location!.conf;
      return redirect(ex, 301, r.uri + '/' + (r.args ? `?${r.args}` : ''));
    }
    r.location = match.location;
    r.loc = match.location?.conf ?? r.server.conf;
    if (r.loc.internal && !r.internal) return finalize(ex, 404);
    const length = Number(r.headers['content-length'] ?? 0);
    const max = r.loc.clientMaxBodySizeBytes;
    if (max > 0 && length > max && !r.parent) {
      logRequest(ex.cx, r, 'error', `client intended to send too large body: ${length} bytes`);
      return finalize(ex, 413);
    }
    const outcome = runScript(r.loc.script, r);
    if (outcome.kind === 'return' || outcome.kind === 'redirect') return scriptResponse(ex, outcome);
    if (outcome.kind === 'last' || (outcome.kind === 'done' && outcome.uriChanged)) {
      if (!countUriChange(ex, 'processing')) return finalize(ex, 500);
      continue;
    }
    return afterRewrite(ex);
  }
}

/** Counts a URI change; false (after logging nginx's error) when the limit is reached. */
function countUriChange(ex: Exchange, what: 'processing' | 'internally redirecting to'): boolean {
  const { r } = ex;
  if (++r.uriChanges > MAX_URI_CHANGES) {
    logRequest(ex.cx, r, 'error', `rewrite or internal redirection cycle while ${what} "${r.uri}"`);
    return false;
  }
  return true;
}

/** Access, try_files and content phases. */
export async function afterRewrite(ex: Exchange): Promise<void> {
  const { r } = ex;
  const denied = await accessPhase(ex);
  if (denied !== undefined) return finalize(ex, denied);
  if (r.loc.tryFiles) {
    const next = await tryFiles(ex);
    if (next.kind === 'code') return finalize(ex, next.code);
    if (next.kind === 'redirect') return internalRedirect(ex, next.uri, next.args);
  }
  return contentPhase(ex);
}

/** Returns the status to answer with when access is refused, or undefined. */
async function accessPhase(ex: Exchange): Promise<number | undefined> {
  const { r } = ex;
  if (r.parent) return undefined;
  const any = r.loc.satisfy === 'any';
  let code: number | undefined;
  const checks = [
    () => checkAccessRules(ex),
    () => checkAuthBasic(ex),
    () => checkAuthRequest(ex),
  ];
  for (const check of checks) {
    const result = await check();
    if (result === 'declined') continue;
    if (result === 'ok') {
      if (any) return undefined;
      continue;
    }
    if (!any) return result;
    if (code !== 401) code = result;
  }
  if (any && code !== undefined) {
    if (code === 403) logRequest(ex.cx, r, 'error', 'access forbidden by rule');
    return code;
  }
  return undefined;
}

async function contentPhase(ex: Exchange): Promise<void> {
  const { r } = ex;
  if (r.loc.proxy) return proxyRequest(ex);
  if (r.loc.fastcgi) return fastcgiRequest(ex);
  const result = await serveStatic(ex);
  if (result.kind === 'code') return finalize(ex, result.code);
  if (result.kind === 'redirect') return internalRedirect(ex, result.uri, result.args);
  if (result.kind === 'moved') return redirect(ex, 301, result.location);
}

/** An internal redirect to `uri` (error_page, try_files fallback, index): back to server rewrite. */
export async function internalRedirect(ex: Exchange, uri: string, args: string): Promise<void> {
  const { r } = ex;
  r.uri = uri;
  r.args = args;
  r.internal = true;
  r.captures = null;
  if (!countUriChange(ex, 'internally redirecting to')) return finalize(ex, 500);
  return fromServerRewrite(ex);
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
  r.location = loc;
  r.loc = loc.conf;
  r.internal = true;
  const outcome = runScript(r.loc.script, r);
  if (outcome.kind === 'return' || outcome.kind === 'redirect') return scriptResponse(ex, outcome);
  if (outcome.kind === 'last' || (outcome.kind === 'done' && outcome.uriChanged)) return findConfig(ex);
  return afterRewrite(ex);
}

/** Answers a `return` or a redirecting `rewrite` (`ngx_http_script_return_code`). */
async function scriptResponse(
  ex: Exchange, o: { kind: 'return'; code: number; text: string | undefined } | { kind: 'redirect'; code: number; location: string },
): Promise<void> {
  if (o.kind === 'redirect') return redirect(ex, o.code, o.location);
  if (o.code === 444) {
    ex.r.status = 444;
    ex.out.abort();
    return;
  }
  if (o.code >= 301 && o.code <= 308 && o.code !== 304 && o.text !== undefined) return redirect(ex, o.code, o.text);
  if (o.code < 400 || o.text !== undefined) return sendText(ex, o.code, o.text ?? '');
  return finalize(ex, o.code);
}

/** Sends a body with `default_type` (`return CODE TEXT`). */
function sendText(ex: Exchange, status: number, text: string): void {
  const { r } = ex;
  const headers: [string, string][] = [];
  if (status !== 204 && status !== 304) {
    headers.push(['Content-Type', r.loc.defaultType], ['Content-Length', String(text.length)]);
  }
  applyHeadersModule(r, status, headers);
  ex.out.head(r, status, headers);
  r.bodyBytesSent = ex.out.headOnly ? 0 : text.length;
  ex.out.end(ex.out.headOnly ? undefined : Buffer.from(text, 'latin1'));
}

/** Sends a redirect with nginx's page. */
export async function redirect(ex: Exchange, status: number, location: string): Promise<void> {
  return finalize(ex, status, location);
}

/**
 * Finishes a request with a status ≥ 300 as `ngx_http_special_response_handler`
 * does: an `error_page` for it is followed (once, unless
 * `recursive_error_pages`), otherwise nginx's page is sent.
 */
export async function finalize(ex: Exchange, status: number, location?: string, extraHeaders: [string, string][] = []): Promise<void> {
  const { r } = ex;
  if (ex.out.started) {
    ex.out.abort();
    return;
  }
  const page = r.loc.errorPages.get(status);
  if (page && !r.errorPage && r.uriChanges <= MAX_URI_CHANGES) {
    if (!r.loc.recursiveErrorPages) r.errorPage = true;
    if (typeof page.overwrite === 'number') r.errStatus = page.overwrite;
    else if (page.overwrite === 'from-target') r.errStatus = 0;
    else r.errStatus = status;
    const target = page.target.evaluate(r);
    if (target.startsWith('/')) {
      const q = target.indexOf('?');
      if (r.method !== 'HEAD') r.method = 'GET';
      return internalRedirect(ex, q === -1 ? target : target.slice(0, q), q === -1 ? '' : target.slice(q + 1));
    }
    if (target.startsWith('@')) return namedLocation(ex, target);
    const code = typeof page.overwrite === 'number' && [301, 302, 303, 307, 308].includes(page.overwrite) ? page.overwrite : 302;
    r.errStatus = undefined;
    return sendSpecial(ex, code, target, extraHeaders);
  }
  return sendSpecial(ex, r.errStatus || status, location, extraHeaders);
}

function sendSpecial(ex: Exchange, status: number, location: string | undefined, extraHeaders: [string, string][]): void {
  const { r } = ex;
  const ua = r.headers['user-agent'];
  const body = specialPage(status, r.loc, typeof ua === 'string' && ua.includes('MSIE '));
  const headers: [string, string][] = [...r.pendingHeaders, ...extraHeaders];
  if (body !== undefined) headers.push(['Content-Type', 'text/html'], ['Content-Length', String(Buffer.byteLength(body))]);
  if (location !== undefined) headers.push(['Location', absoluteLocation(r, location)]);
  applyHeadersModule(r, status, headers);
  ex.out.head(r, status, headers);
  r.bodyBytesSent = body && !ex.out.headOnly ? Buffer.byteLength(body) : 0;
  ex.out.end(body === undefined || ex.out.headOnly ? undefined : body);
}
