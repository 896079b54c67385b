/**
 * Writing responses the way nginx's header filter and special-response code
 * do (`src/http/ngx_http_header_filter_module.c`,
 * `src/http/ngx_http_special_response.c`): nginx's status lines, its error
 * and redirect pages (naming jinx), the `Server` header per `server_tokens`,
 * absolute `Location` per `absolute_redirect`, `add_header` and `expires`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { LocationConf } from '../config/route-table.js';
import { JINX_VERSION } from '../version.js';
import type { HttpRequestState } from './request.js';

/** The request side of a client exchange: node:http or node:http2's compatibility API. */
export type ClientRequest = IncomingMessage | Http2ServerRequest;
/** The response side of a client exchange. */
export type ClientResponse = ServerResponse | Http2ServerResponse;

/** Reason phrases of nginx's status lines (`ngx_http_status_lines`); other codes get an empty one. */
export const STATUS_TEXT: Readonly<Record<number, string>> = {
  200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No Content', 206: 'Partial Content',
  301: 'Moved Permanently', 302: 'Moved Temporarily', 303: 'See Other', 304: 'Not Modified',
  307: 'Temporary Redirect', 308: 'Permanent Redirect',
  400: 'Bad Request', 401: 'Unauthorized', 402: 'Payment Required', 403: 'Forbidden', 404: 'Not Found',
  405: 'Not Allowed', 406: 'Not Acceptable', 407: 'Proxy Authentication Required', 408: 'Request Time-out',
  409: 'Conflict', 410: 'Gone', 411: 'Length Required', 412: 'Precondition Failed', 413: 'Request Entity Too Large',
  414: 'Request-URI Too Large', 415: 'Unsupported Media Type', 416: 'Requested Range Not Satisfiable',
  421: 'Misdirected Request', 429: 'Too Many Requests', 500: 'Internal Server Error', 501: 'Not Implemented',
  502: 'Bad Gateway', 503: 'Service Temporarily Unavailable', 504: 'Gateway Time-out', 505: 'HTTP Version Not Supported',
  507: 'Insufficient Storage',
};

/**
 * The pages nginx 1.30 has (`ngx_http_error_pages`): title and heading, and
 * for its internal 494–497 codes (sent as 400) an extra line. 498 shows the
 * 404 page. Codes not listed have no page.
 */
const PAGES: Readonly<Record<number, { readonly title: string; readonly h1: string; readonly extra?: string }>> = (() => {
  const pages: Record<number, { title: string; h1: string; extra?: string }> = {};
  const titled: Record<number, string> = {
    301: 'Moved Permanently', 302: 'Found', 303: 'See Other', 307: 'Temporary Redirect', 308: 'Permanent Redirect',
    400: 'Bad Request', 401: 'Authorization Required', 402: 'Payment Required', 403: 'Forbidden', 404: 'Not Found',
    405: 'Not Allowed', 406: 'Not Acceptable', 407: 'Proxy Authentication Required', 409: 'Conflict', 410: 'Gone',
    411: 'Length Required', 412: 'Precondition Failed', 413: 'Request Entity Too Large', 414: 'Request-URI Too Large',
    415: 'Unsupported Media Type', 416: 'Requested Range Not Satisfiable', 421: 'Misdirected Request', 429: 'Too Many Requests',
    500: 'Internal Server Error', 501: 'Not Implemented', 502: 'Bad Gateway', 503: 'Service Temporarily Unavailable',
    504: 'Gateway Time-out', 505: 'HTTP Version Not Supported', 507: 'Insufficient Storage',
  };
  for (const [code, text] of Object.entries(titled)) pages[Number(code)] = { title: `${code} ${text}`, h1: `${code} ${text}` };
  const internal: Record<number, string> = {
    494: 'Request Header Or Cookie Too Large', 495: 'The SSL certificate error', 496: 'No required SSL certificate was sent',
    497: 'The plain HTTP request was sent to HTTPS port',
  };
  for (const [code, text] of Object.entries(internal)) pages[Number(code)] = { title: `400 ${text}`, h1: '400 Bad Request', extra: text };
  pages[498] = pages[404]!;
  return pages;
})();

/** `Server` header value: `jinx/X.Y.Z` with `server_tokens on|build`, `jinx` with `off`. */
export function serverHeader(conf: LocationConf): string {
  return conf.serverTokens === 'off' ? 'jinx' : `jinx/${JINX_VERSION}`;
}

/**
 * The HTML page nginx sends for a special response, with CRLF line ends
 * (`ngx_http_send_special_response`), or undefined for codes without one.
 */
export function specialPage(status: number, conf: LocationConf, msie: boolean): string | undefined {
  const page = PAGES[status];
  if (!page) return undefined;
  const extra = page.extra ? `<center>${page.extra}</center>\r\n` : '';
  const text = `<html>\r\n<head><title>${page.title}</title></head>\r\n<body>\r\n<center><h1>${page.h1}</h1></center>\r\n${extra}`
    + `<hr><center>${serverHeader(conf)}</center>\r\n</body>\r\n</html>\r\n`;
  return msie && conf.msiePadding && status >= 400 ? text + MSIE_PADDING : text;
}

/** nginx's padding comment for MSIE, so it shows the server's error page. */
const MSIE_PADDING = `<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n`.repeat(6);

/** The status actually sent for nginx's internal codes (494–497 are 400 on the wire). */
export function wireStatus(status: number): number {
  return status >= 494 && status <= 497 ? 400 : status;
}

/** The MIME type for a URI by its extension (`types`), or `default_type` (`ngx_http_set_content_type`). */
export function contentTypeFor(r: HttpRequestState): string {
  const slash = r.uri.lastIndexOf('/');
  const dot = r.uri.lastIndexOf('.');
  if (dot > slash) {
    const t = r.loc.types.get(r.uri.slice(dot + 1).toLowerCase());
    if (t) return t;
  }
  return r.loc.defaultType;
}

/**
 * Makes a `Location` absolute as nginx's header filter does when
 * `absolute_redirect` is on: `scheme://host[:port]` + the path.
 */
export function absoluteLocation(r: HttpRequestState, location: string): string {
  if (!location.startsWith('/') || !r.loc.absoluteRedirect) return location;
  const host = r.loc.serverNameInRedirect ? r.server.name : r.requestHost || r.conn.localAddr;
  const port = r.conn.localPort;
  const defaultPort = r.scheme === 'https' ? 443 : 80;
  const portPart = r.loc.portInRedirect && port !== defaultPort ? `:${port}` : '';
  return `${r.scheme}://${host}${portPart}${location}`;
}

/** Statuses `add_header` (without `always`) and `expires` apply to. */
const ADD_HEADER_STATUSES = new Set([200, 201, 204, 206, 301, 302, 303, 304, 307, 308]);

const HTTP_DATE = (ms: number): string => new Date(ms).toUTCString();

/**
 * Adds the headers of the headers module to an outgoing header list:
 * `Expires`/`Cache-Control` per `expires`, then each `add_header`
 * (with an empty value meaning "not added"). Subrequests get none
 * (`ngx_http_headers_filter` passes them by).
 */
export function applyHeadersModule(r: HttpRequestState, status: number, headers: [string, string][]): void {
  r.status = r.errStatus || status;
  if (r.parent) return;
  const conf = r.loc;
  const normal = ADD_HEADER_STATUSES.has(status);
  const e = conf.expires;
  if (normal && e.kind !== 'off') {
    const drop = (n: string): void => {
      for (let i = headers.length - 1; i >= 0; i--) if (headers[i]![0].toLowerCase() === n) headers.splice(i, 1);
    };
    drop('expires');
    drop('cache-control');
    if (e.kind === 'epoch') headers.push(['Expires', 'Thu, 01 Jan 1970 00:00:01 GMT'], ['Cache-Control', 'no-cache']);
    else if (e.kind === 'max') headers.push(['Expires', 'Thu, 31 Dec 2037 23:55:55 GMT'], ['Cache-Control', 'max-age=315360000']);
    else if (e.kind === 'timed') {
      const now = Date.now();
      let expiresAt: number;
      if (e.mode === 'daily') {
        const d = new Date(now);
        d.setHours(0, 0, 0, 0);
        expiresAt = d.getTime() + e.seconds * 1000;
        if (expiresAt <= now) expiresAt += 86_400_000;
      } else expiresAt = now + e.seconds * 1000;
      const maxAge = Math.round((expiresAt - now) / 1000);
      headers.push(['Expires', HTTP_DATE(expiresAt)], ['Cache-Control', e.seconds < 0 || maxAge < 0 ? 'no-cache' : `max-age=${maxAge}`]);
    }
  }
  for (const h of conf.addHeaders) {
    if (!h.always && !normal) continue;
    const v = h.value.evaluate(r);
    if (v !== '') headers.push([h.name, v]);
  }
}

/** Headers of which a later value replaces an earlier one instead of adding a line. */
const SINGLE_VALUED = new Set(['content-length', 'content-type', 'location']);

/**
 * Sends status and headers on a client response, recording them for
 * `$status` and `$sent_http_*`. jinx's `Server` comes first unless the list
 * has one (`proxy_pass_header Server`), then `Connection: close` when the
 * connection ends after this response (or `Connection: keep-alive` with
 * `Keep-Alive: timeout=N` for `keepalive_timeout`'s second argument), then
 * `headers` in order; repeated
 * names become separate lines except `SINGLE_VALUED` ones. HTTP/1.x heads
 * go out in one `writeHead` call with a flat name/value list.
 */
export function writeHead(r: HttpRequestState, res: ClientResponse, status: number, headers: [string, string | string[]][], reason?: string): void {
  const final = r.errStatus || status;
  const wire = wireStatus(final);
  // ngx_http_special_response_handler: nginx's internal 494–497 are `err_status` 400, which `$status` reports
  r.status = wire;
  const sent = r.sentHeaders;
  const h1 = r.protocol !== 'HTTP/2.0';
  const flat: (string | string[])[] = [];
  if (!headers.some(([n]) => n.length === 6 && n.toLowerCase() === 'server')) {
    const server = serverHeader(r.loc);
    flat.push('Server', server);
    sent['server'] = server;
  }
  if (h1) {
    // ngx_http_update_location_config: keep-alive ends with keepalive_timeout 0, after
    // keepalive_requests, and once the connection is older than keepalive_time
    const { loc } = r;
    if (loc.keepaliveTimeoutMs === 0 || r.conn.requests >= loc.keepaliveRequests || Date.now() - r.conn.acceptedAtMs > loc.keepaliveTimeMs) {
      flat.push('Connection', 'close');
      sent['connection'] = 'close';
    } else if (loc.keepaliveHeaderSec !== undefined && (res as ServerResponse).shouldKeepAlive) {
      flat.push('Connection', 'keep-alive', 'Keep-Alive', `timeout=${loc.keepaliveHeaderSec}`);
    }
  }
  for (const [name, value] of headers) {
    const lower = name.toLowerCase();
    let at = sent[lower] === undefined ? flat.length : 0;
    while (at < flat.length && (flat[at] as string).toLowerCase() !== lower) at += 2;
    if (at === flat.length) {
      flat.push(name, value);
      sent[lower] = value;
      continue;
    }
    const merged = SINGLE_VALUED.has(lower) ? value : ([] as string[]).concat(flat[at + 1]!, value);
    flat[at + 1] = merged;
    sent[lower] = merged;
  }
  if (h1) {
    (res as ServerResponse).writeHead(wire, reason ?? STATUS_TEXT[wire] ?? '', flat as string[]);
    return;
  }
  writeHttp2Head(r, res as Http2ServerResponse, wire, flat);
}

/** Header fields `ngx_http_v2_header_filter` leaves out: HTTP/1.x connection fields, which HTTP/2 has none of. */
const HTTP1_ONLY = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

/**
 * The HEADERS frame of an HTTP/2 response, as `ngx_http_v2_header_filter`
 * sends it: without HTTP/1.x connection fields, and ending the stream when
 * no body follows (a HEAD request, 204, 304, or `Content-Length: 0`), where
 * node:http2's compatibility response would send an empty DATA frame
 * after it to end the stream.
 */
function writeHttp2Head(r: HttpRequestState, res: Http2ServerResponse, wire: number, flat: readonly (string | string[])[]): void {
  let fin = r.method === 'HEAD' || wire === 204 || wire === 304;
  for (let i = 0; i < flat.length; i += 2) {
    const name = (flat[i] as string).toLowerCase();
    if (HTTP1_ONLY.has(name)) continue;
    if (name === 'content-length' && flat[i + 1] === '0') fin = true;
    res.setHeader(name, flat[i + 1]!);
  }
  if (!fin || res.stream.headersSent || res.stream.destroyed) {
    res.writeHead(wire);
    return;
  }
  res.stream.respond({ ...res.getHeaders(), ':status': wire }, { endStream: true });
}
