/**
 * Writing responses the way nginx's header filter and special-response code
 * do (`src/http/ngx_http_header_filter_module.c`,
 * `src/http/ngx_http_special_response.c`): nginx's status lines, its error
 * and redirect pages (naming jinx), the `Server` header per `server_tokens`,
 * absolute `Location` per `absolute_redirect`, `add_header` and `expires`.
 */
import { endSliceUnless206 } from './filters/slice.js';
import type { LocationConf } from '../config/route-table.js';
import { parseExpires } from '../config/modules/headers.js';
import { JINX_VERSION } from '../version.js';
import type { HttpRequestState } from './request.js';

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

/**
 * The headers earlier steps of the request set for its response (nginx's
 * `headers_out`, which internal redirects keep): `WWW-Authenticate` of a
 * 401, a redirect's `Location`, made absolute as the header filter makes a
 * `Location` that starts with `/`.
 */
export function keptHeaders(r: HttpRequestState): [string, string][] {
  return r.pendingHeaders.map(([name, value]): [string, string] =>
    name === 'Location' && value.startsWith('/') ? [name, absoluteLocation(r, value)] : [name, value]);
}

/** Headers of a response the range filter turns into a 416 that nginx's `headers_out` no longer has (its own `Content-Range` replaces one the upstream sent). */
const CLEARED_BY_416 = new Set(['content-type', 'content-length', 'content-range']);

/**
 * Keeps what a response had when the range filter found its range cannot
 * be satisfied, for the 416 the request is then finalized with (its special
 * response or `error_page`): nginx's range filter returns 416 to the
 * handler with `headers_out` as the handler and the headers module left it
 * (`ngx_http_range_not_satisfiable`), its `Content-Length` and type cleared,
 * a `Content-Range` of `*` and the size in place of any other; the special response then drops
 * `Last-Modified`, `ETag` and `Accept-Ranges`, and the headers module adds
 * its `always` headers again (nginx sends those twice). `headers` is the
 * whole list: what earlier steps kept for the response first.
 */
export function keepForRangeNotSatisfiable(r: HttpRequestState, headers: readonly [string, string | string[]][], sizeBytes: number): void {
  const kept: [string, string][] = [];
  for (const [name, value] of headers) {
    if (CLEARED_BY_416.has(name.toLowerCase())) continue;
    for (const v of Array.isArray(value) ? value : [value]) kept.push([name, v]);
  }
  r.pendingHeaders.splice(0, r.pendingHeaders.length, ...kept, ['Content-Range', `bytes */${sizeBytes}`]);
}

/**
 * What an upstream's response intercepted for its `error_page` leaves for
 * the response sent instead (`ngx_http_upstream_intercept_errors`): the
 * `WWW-Authenticate` headers of a 401, each one, whatever hides them.
 * `received` lists names and values in turn.
 */
export function keepInterceptedHeaders(r: HttpRequestState, status: number, received: readonly string[]): void {
  if (status !== 401) return;
  for (let i = 0; i + 1 < received.length; i += 2) {
    if (received[i]!.toLowerCase() === 'www-authenticate') r.pendingHeaders.push(['WWW-Authenticate', received[i + 1]!]);
  }
}

/** Statuses `add_header` (without `always`) and `expires` apply to. */
const ADD_HEADER_STATUSES = new Set([200, 201, 204, 206, 301, 302, 303, 304, 307, 308]);

const HTTP_DATE = (ms: number): string => new Date(ms).toUTCString();

/** Removes every header named `lower` (lowercase) from a list. */
function dropHeader(headers: [string, string | string[]][], lower: string): void {
  for (let i = headers.length - 1; i >= 0; i--) if (headers[i]![0].toLowerCase() === lower) headers.splice(i, 1);
}

/** The `Last-Modified` of a header list in seconds since the epoch, or undefined (nginx's `last_modified_time` -1). */
export function lastModifiedSec(headers: readonly [string, string | string[]][]): number | undefined {
  const h = headers.find(([n]) => n.toLowerCase() === 'last-modified');
  const ms = h && typeof h[1] === 'string' ? Date.parse(h[1]) : NaN;
  return Number.isNaN(ms) ? undefined : Math.floor(ms / 1000);
}

/** `ngx_next_time`: the next moment (s) at `secondOfDay` local time, today or tomorrow. */
function nextTimeOfDay(secondOfDay: number, nowSec: number): number {
  const d = new Date(nowSec * 1000);
  d.setHours(0, 0, secondOfDay, 0);
  if (d.getTime() / 1000 > nowSec) return d.getTime() / 1000;
  d.setDate(d.getDate() + 1);
  d.setHours(0, 0, secondOfDay, 0);
  return d.getTime() / 1000;
}

/**
 * `ngx_http_set_expires`: `Expires` and one `Cache-Control` in place of the
 * response's. `seconds` (the configured time, 0 with variables) decides
 * `no-cache` for a negative time, as nginx reads `conf->expires_time`.
 */
function setExpires(r: HttpRequestState, headers: [string, string | string[]][]): void {
  let e = r.loc.expires;
  const configuredSec = e.kind === 'timed' ? e.seconds : 0;
  if (e.kind === 'variable') {
    const parsed = parseExpires(e.value.evaluate(r), e.modified);
    if (typeof parsed === 'string' || parsed.kind === 'off') return;
    e = parsed;
  }
  if (e.kind === 'off') return;
  const lastModified = lastModifiedSec(headers);
  dropHeader(headers, 'expires');
  dropHeader(headers, 'cache-control');
  if (e.kind === 'epoch') {
    headers.push(['Expires', 'Thu, 01 Jan 1970 00:00:01 GMT'], ['Cache-Control', 'no-cache']);
    return;
  }
  if (e.kind === 'max') {
    headers.push(['Expires', 'Thu, 31 Dec 2037 23:55:55 GMT'], ['Cache-Control', 'max-age=315360000']);
    return;
  }
  const nowMs = Date.now();
  if (e.seconds === 0 && e.mode !== 'daily') {
    headers.push(['Expires', HTTP_DATE(nowMs)], ['Cache-Control', 'max-age=0']);
    return;
  }
  const now = Math.floor(nowMs / 1000);
  let expiresAt: number;
  let maxAge: number;
  if (e.mode === 'daily') {
    expiresAt = nextTimeOfDay(e.seconds, now);
    maxAge = expiresAt - now;
  } else if (e.mode === 'access' || lastModified === undefined) {
    maxAge = e.seconds;
    expiresAt = now + e.seconds;
  } else {
    expiresAt = lastModified + e.seconds;
    maxAge = expiresAt - now;
  }
  headers.push(['Expires', HTTP_DATE(expiresAt * 1000)], ['Cache-Control', configuredSec < 0 || maxAge < 0 ? 'no-cache' : `max-age=${maxAge}`]);
}

/** Headers `add_header` sets in place of the response's (`ngx_http_set_headers`): an empty value removes it. */
const REPLACED = new Set(['etag', 'last-modified']);

/**
 * Adds the headers of the headers module to an outgoing header list
 * (`ngx_http_headers_filter`): `Expires`/`Cache-Control` per `expires`,
 * then each `add_header`, its value as it is (nginx 1.30 sends CR and LF in
 * a value too); an empty value adds nothing, and for `ETag` and
 * `Last-Modified` removes the response's. Both apply to 200, 201, 204, 206, 301, 302, 303, 304, 307 and
 * 308 only, `add_header … always` to every status: the status the response
 * goes out with, an `error_page`'s own where it has one (`ngx_http_send_header`
 * puts `r->err_status` in place before the filters run). Subrequests get none.
 * While the values are evaluated, `$sent_http_*` sees the list built so far.
 * A main request that was slicing and got no 206 stops first (the slice
 * filter's part that comes before the headers module).
 */
export function applyHeadersModule(r: HttpRequestState, status: number, headers: [string, string | string[]][]): void {
  r.status = r.errStatus || status;
  if (r.parent) return;
  // the slice filter runs before the headers module: a response it does not slice ends its `$slice_range`
  endSliceUnless206(r, r.status);
  const conf = r.loc;
  const normal = ADD_HEADER_STATUSES.has(r.status);
  if (normal && conf.expires.kind !== 'off') setExpires(r, headers);
  // trailers go in the last chunk: an HTTP/1.1 response with them is sent in chunks (ngx_http_chunked_header_filter)
  if (conf.addTrailers.some((t) => t.always || normal) && r.protocol !== 'HTTP/1.0') {
    r.expectTrailers = true;
    if (r.protocol === 'HTTP/1.1') dropHeader(headers, 'content-length');
  }
  if (conf.addHeaders.length === 0) return;
  r.outHeaders = headers;
  try {
    for (const h of conf.addHeaders) {
      if (!h.always && !normal) continue;
      const v = h.value.evaluate(r);
      const lower = h.name.toLowerCase();
      if (REPLACED.has(lower)) dropHeader(headers, lower);
      if (v !== '') headers.push([h.name, v]);
    }
  } finally {
    r.outHeaders = undefined;
  }
}

/**
 * The trailers of a response that has them: the upstream's it passes
 * (`r->headers_out.trailers` as the upstream left it), then
 * (`ngx_http_trailers_filter`) each `add_trailer` that applies to the
 * status, with a value; while they are made, `$sent_trailer_*` sees those
 * made before.
 */
export function responseTrailers(r: HttpRequestState): [string, string][] {
  const normal = ADD_HEADER_STATUSES.has(r.status);
  const trailers: [string, string][] = r.upstreamTrailers ? [...r.upstreamTrailers] : [];
  r.outTrailers = trailers;
  for (const t of r.loc.addTrailers) {
    if (!t.always && !normal) continue;
    const v = t.value.evaluate(r);
    if (v !== '') trailers.push([t.name, v]);
  }
  return trailers;
}

/** Headers of which a later value replaces an earlier one instead of adding a line. */
const SINGLE_VALUED = new Set(['content-length', 'content-type', 'location']);

/**
 * The status sent on the wire and the response headers in order, recorded
 * for `$status` and `$sent_http_*`: jinx's `Server` first unless the list
 * has one (`proxy_pass_header Server`; a `Server` or `Date` with an empty
 * list of values keeps nginx's own out and is not sent either, as the null
 * header `ngx_http_proxy_process_header` adds for an upstream without one),
 * then `headers` in order, a repeated name where it comes (nginx writes
 * its `headers_out` list in order: an upstream's `Set-Cookie`, then
 * `add_header`'s, then the userid filter's), but for `SINGLE_VALUED` ones,
 * where the last value wins in the first's place; `$sent_http_*` joins the
 * values. `lowers` holds the list's names lowercased, index for index.
 * Each protocol writes the list its own way
 * (`Http1Target.head`, `Http2Target.head`).
 */
export function responseHeaders(
  r: HttpRequestState, status: number, headers: [string, string | string[]][],
): { wire: number; list: [string, string | string[]][]; lowers: string[] } {
  const final = r.errStatus || status;
  const wire = wireStatus(final);
  // ngx_http_special_response_handler: nginx's internal 494–497 are `err_status` 400, which `$status` reports
  r.status = wire;
  const sent = r.sentHeaders;
  const list: [string, string | string[]][] = [];
  const lowers: string[] = [];
  if (!headers.some(([n]) => n.length === 6 && n.toLowerCase() === 'server')) {
    const server = serverHeader(r.loc);
    list.push(['Server', server]);
    lowers.push('server');
    sent.set('server', server);
  }
  for (const [name, value] of headers) {
    const lower = name.toLowerCase();
    const at = SINGLE_VALUED.has(lower) && sent.has(lower) ? lowers.indexOf(lower) : -1;
    if (at !== -1) {
      list[at]![1] = value;
      sent.set(lower, value);
      continue;
    }
    list.push([name, value]);
    lowers.push(lower);
    const earlier = sent.get(lower);
    sent.set(lower, earlier === undefined ? value : ([] as string[]).concat(earlier, value));
  }
  return { wire, list, lowers };
}

