/**
 * The variables nginx's http modules define (`src/http/ngx_http_variables.c`,
 * and the proxy, upstream, log, realip, gzip and ssl modules), as getters on a
 * request. A getter returns undefined where nginx's variable is "not found".
 *
 * `$ssl_sigalg` and `$ssl_client_sigalg` are empty, as in nginx built with
 * an OpenSSL older than 3.5 (Node.js 20 has 3.0, and no way to ask for the
 * signature algorithm of a handshake); `$ssl_early_data` is empty because
 * jinx accepts no early data; `$ssl_ech_status` and
 * `$ssl_ech_outer_server_name` are empty, as in nginx 1.30 with an OpenSSL
 * without Encrypted Client Hello.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { isIP } from 'node:net';
import type { VariableDef } from '../variables.js';
import type { ClientCertificateView, RequestView, UpstreamState } from '../request-view.js';
import { NGINX_VERSION } from '../../version.js';
import { parseSize } from '../spec.js';
import { fastcgiSplit } from '../fastcgi-split.js';
import { basicCredentials } from '../../credentials.js';
import { proxyProtocolTlv } from '../proxy-protocol-tlv.js';

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const pad2 = (n: number): string => (n < 10 ? `0${n}` : String(n));

/** `$time_local`: `21/Nov/2026:20:56:19 +0100`. */
export function timeLocal(ms: number): string {
  const d = new Date(ms);
  const off = -d.getTimezoneOffset();
  const sign = off >= 0 ? '+' : '-';
  const abs = Math.abs(off);
  return `${pad2(d.getDate())}/${MONTHS[d.getMonth()]}/${d.getFullYear()}:${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())} ${sign}${pad2(Math.floor(abs / 60))}${pad2(abs % 60)}`;
}

/** `$time_iso8601`: `2026-11-21T20:56:19+01:00`. */
export function timeIso8601(ms: number): string {
  const d = new Date(ms);
  const off = -d.getTimezoneOffset();
  const sign = off >= 0 ? '+' : '-';
  const abs = Math.abs(off);
  return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())}T${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}${sign}${pad2(Math.floor(abs / 60))}:${pad2(abs % 60)}`;
}

/** Request headers of which nginx keeps only the first (it refuses the request at a second one). */
const SINGLE_HEADERS = new Set([
  'host', 'if_modified_since', 'if_unmodified_since', 'if_match', 'if_none_match', 'content_length', 'content_range', 'if_range', 'transfer_encoding',
  'expect', 'authorization',
]);

/**
 * `$http_NAME`: the request header(s) whose name, lowercased with `-` as
 * `_`, is NAME, as received; repeated ones joined with ", " (`; ` for
 * Cookie), as `ngx_http_variable_unknown_header` and
 * `ngx_http_variable_cookies` do (node:http keeps only the first of some
 * headers, so the raw list is read).
 */
function requestHeader(r: RequestView, name: string): string | undefined {
  const raw = r.rawHeaders;
  const sep = name === 'cookie' ? '; ' : ', ';
  let out: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    const n = raw[i]!;
    if (n.length !== name.length || n.toLowerCase().replace(/-/g, '_') !== name) continue;
    out = out === undefined ? raw[i + 1]! : `${out}${sep}${raw[i + 1]!}`;
    // headers nginx keeps one of (`ngx_http_process_host`, `…_unique_header_line`): a second one was refused
    if (SINGLE_HEADERS.has(name)) break;
  }
  if (out !== undefined || name !== 'host') return out;
  // an HTTP/2 stream logged before its header block was read: its :authority stands for the host
  const host = r.headers.host;
  return Array.isArray(host) ? host.join(', ') : host;
}

/**
 * One argument of the query string as `ngx_http_arg` finds it (`$arg_NAME`,
 * autoindex's `callback`): the value, as it came, of the first `NAME=`
 * that starts the string or follows a `&`, the name (lowercase) matched
 * case-insensitively; undefined when there is none (a `NAME` without `=`
 * does not count).
 */
export function argument(args: string, name: string): string | undefined {
  if (!args) return undefined;
  for (const pair of args.split('&')) {
    const eq = pair.indexOf('=');
    if (eq !== -1 && pair.slice(0, eq).toLowerCase() === name) return pair.slice(eq + 1);
  }
  return undefined;
}

/** One cookie (`$cookie_NAME`). */
function cookie(r: RequestView, name: string): string | undefined {
  const raw = r.headers.cookie;
  if (raw === undefined) return undefined;
  for (const part of (Array.isArray(raw) ? raw.join('; ') : raw).split(';')) {
    const t = part.trim();
    const eq = t.indexOf('=');
    if (eq !== -1 && t.slice(0, eq).toLowerCase() === name) return t.slice(eq + 1);
  }
  return undefined;
}

/**
 * `$sent_http_NAME`: the response header(s) of that name, joined with ", ".
 * While the headers module adds its headers, those added so far
 * (nginx's `headers_out` as the header filters build it); once sent, the
 * headers as sent.
 */
function sentHeader(r: RequestView, name: string): string | undefined {
  const key = name.replace(/_/g, '-');
  if (r.outHeaders) return fieldOf(r.outHeaders, key);
  const v = r.sentHeaders.get(key);
  if (v === undefined) return undefined;
  return Array.isArray(v) ? v.join(', ') : v;
}

/** `$sent_trailer_NAME`: the response trailer(s) of that name (`add_trailer`), joined with ", ". */
function sentTrailer(r: RequestView, name: string): string | undefined {
  return r.outTrailers ? fieldOf(r.outTrailers, name.replace(/_/g, '-')) : undefined;
}

/** The values of the fields named `key` (lowercase) in a list, joined with ", "; undefined when none. */
function fieldOf(fields: readonly (readonly [string, string | readonly string[]])[], key: string): string | undefined {
  let out: string | undefined;
  for (const [n, v] of fields) {
    if (n.length !== key.length || n.toLowerCase() !== key) continue;
    const text = typeof v === 'string' ? v : v.join(', ');
    out = out === undefined ? text : `${out}, ${text}`;
  }
  return out;
}

/** `$upstream_http_NAME` and `$upstream_trailer_NAME`: the upstream's fields of that name, joined with ", ". */
function upstreamField(raw: readonly string[] | undefined, name: string): string | undefined {
  if (!raw) return undefined;
  const wanted = name.replace(/_/g, '-');
  let out: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length === wanted.length && raw[i]!.toLowerCase() === wanted) out = out === undefined ? raw[i + 1]! : `${out}, ${raw[i + 1]!}`;
  }
  return out;
}

/**
 * `$upstream_cookie_NAME`: the value of cookie NAME in the upstream's
 * `Set-Cookie` headers, the first that sets it (`ngx_http_parse_set_cookie_lines`:
 * the name is the start of a header's value, matched case-insensitively; the
 * value ends at `;`).
 */
function upstreamCookie(r: RequestView, name: string): string | undefined {
  const raw = r.upstream?.headers;
  if (!raw) return undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length !== 10 || raw[i]!.toLowerCase() !== 'set-cookie') continue;
    const value = raw[i + 1]!;
    if (value.length <= name.length || value[name.length] !== '=' || value.slice(0, name.length).toLowerCase() !== name) continue;
    const end = value.indexOf(';', name.length + 1);
    return value.slice(name.length + 1, end === -1 ? undefined : end);
  }
  return undefined;
}

/**
 * The attempts of a request at upstream peers, oldest first; undefined
 * before the first (nginx's empty `r->upstream_states`: "not found").
 */
function attempts(r: RequestView): readonly UpstreamState[] | undefined {
  const up = r.upstream;
  return up ? [...up.earlier, up] : undefined;
}

/**
 * An `$upstream_*` variable: one value per attempt, joined with ", "
 * (`ngx_http_upstream_addr_variable` and its neighbours).
 */
function perAttempt(value: (state: UpstreamState) => string): (r: RequestView) => string | undefined {
  return (r) => attempts(r)?.map(value).join(', ');
}

/** `$upstream_response_time` and the like: seconds with millisecond resolution, `-` when not known. */
const seconds = (ms: number | undefined): string => (ms === undefined ? '-' : (Math.max(ms, 0) / 1000).toFixed(3));

/** `$upstream_status`: `-` for an attempt that got no status. */
const statusText = (s: UpstreamState): string => (s.status === undefined ? '-' : String(s.status));

/**
 * `$tcpinfo_*`: Node.js offers no `getsockopt(TCP_INFO)`, so these are "not
 * found", as in nginx on a system without `TCP_INFO`.
 */
const noTcpInfo = (): undefined => undefined;

/** `$http2`: `h2` over TLS, `h2c` in clear text, empty for other protocols (`ngx_http_v2_variable`). */
function http2Protocol(r: RequestView): string {
  const main = r.parent ?? r;
  if (main.protocol !== 'HTTP/2.0') return '';
  return main.scheme === 'https' ? 'h2' : 'h2c';
}

/** Whether the request says it has a body (a length or `Transfer-Encoding`). */
function hasBody(r: RequestView): boolean {
  return r.headers['content-length'] !== undefined || r.headers['transfer-encoding'] !== undefined;
}

/**
 * `$proxy_internal_body_length`: the length of the body sent upstream, when
 * known (`proxy_set_body`'s value, the body read whole, or the declared length).
 */
function proxyBodyLength(r: RequestView): string | undefined {
  const set = r.loc.proxy?.setBody;
  if (set) return String(Buffer.byteLength(set.evaluate(r), 'latin1'));
  if (r.bodyLength !== undefined) return String(r.bodyLength);
  return r.headers['content-length'];
}

/** `$request_body`: the body when it was read into memory (`ngx_http_variable_request_body`). */
function requestBody(r: RequestView): string | undefined {
  const body = (r.parent ?? r).requestBody;
  // an empty body leaves nginx's buffer chain empty: not found
  return body?.kind === 'memory' && body.data.length > 0 ? body.data.toString('latin1') : undefined;
}

/** `$request_body_file`: the temp file holding the body, when it was written to one. */
function requestBodyFile(r: RequestView): string | undefined {
  const body = (r.parent ?? r).requestBody;
  return body?.kind === 'file' ? body.path : undefined;
}

/** A port as nginx's variables print it (`ngx_inet_get_port`): empty for 0, a unix domain socket's. */
const portText = (port: number): string => (port > 0 ? String(port) : '');

/**
 * `$proxy_protocol_tlv_NAME` (`ngx_http_variable_proxy_protocol_tlv`): the
 * value of a TLV of the connection's PROXY protocol v2 header, by name or
 * `0x` type; not found without one.
 */
function proxyProtocolTlvText(r: RequestView, name: string): string | undefined {
  const pp = r.conn.proxyProtocol;
  return pp ? proxyProtocolTlv(pp, name).value?.toString('latin1') : undefined;
}

/** `$binary_remote_addr`: the client address in network byte order, 4 or 16 bytes. */
export function binaryAddress(addr: string): string {
  const family = isIP(addr);
  if (family === 4) return Buffer.from(addr.split('.').map(Number)).toString('latin1');
  if (family !== 6) return addr;
  const [head, tail] = addr.includes('::') ? addr.split('::') as [string, string] : [addr, undefined];
  const groups = (text: string): string[] => (text === '' ? [] : text.split(':'));
  const expand = (parts: string[]): number[] => parts.flatMap((g) => {
    if (!g.includes('.')) return [parseInt(g, 16)];
    const [a, b, c, d] = g.split('.').map(Number) as [number, number, number, number];
    return [(a << 8) | b, (c << 8) | d];
  });
  const front = expand(groups(head));
  const back = tail === undefined ? [] : expand(groups(tail));
  const words = [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
  const out = Buffer.alloc(16);
  words.forEach((w, i) => out.writeUInt16BE(w, i * 2));
  return out.toString('latin1');
}

/**
 * The client certificate of the request's connection, when the server asks
 * for one (`ssl_verify_client`): Node.js asks for it on every handshake of
 * an address where some server does (README, "Differences from nginx"), and
 * a server that does not ask ignores it, as if it had not been sent.
 */
function clientCertificate(r: RequestView): ClientCertificateView | undefined {
  if (r.server.verifyClient === 'off') return undefined;
  return r.conn.tls?.clientCertificate;
}

const requestIds = new WeakMap<RequestView, string>();

/** The variables jinx defines. */
/**
 * `$gzip_ratio` (`ngx_http_gzip_ratio_variable`): bytes in over bytes out
 * with two decimals, rounded as nginx rounds (2.125 gives 2.13); not found
 * until the gzip filter has ended.
 */
function gzipRatio(r: RequestView): string | undefined {
  const c = r.gzipCounts;
  if (!c || c.zout === 0) return undefined;
  let whole = Math.floor(c.zin / c.zout);
  let frac = Math.floor((c.zin * 100) / c.zout) % 100;
  if (Math.floor((c.zin * 1000) / c.zout) % 10 > 4) {
    frac++;
    if (frac > 99) [whole, frac] = [whole + 1, 0];
  }
  return `${whole}.${String(frac).padStart(2, '0')}`;
}

export const httpVariables: readonly VariableDef[] = [
  { name: 'http_', prefix: true, get: requestHeader },
  { name: 'arg_', prefix: true, get: (r, n) => argument(r.args, n) },
  { name: 'cookie_', prefix: true, get: cookie },
  { name: 'sent_http_', prefix: true, get: sentHeader },
  { name: 'sent_trailer_', prefix: true, get: (r, n) => sentTrailer(r, n) },
  { name: 'host', get: (r) => r.host },
  { name: 'remote_addr', get: (r) => r.clientAddr },
  { name: 'remote_port', get: (r) => portText(r.clientPort) },
  { name: 'binary_remote_addr', get: (r) => binaryAddress(r.clientAddr) },
  { name: 'realip_remote_addr', get: (r) => r.conn.peerAddr },
  { name: 'realip_remote_port', get: (r) => portText(r.conn.peerPort) },
  { name: 'proxy_protocol_addr', get: (r) => r.conn.proxyProtocol?.srcAddr },
  { name: 'proxy_protocol_port', get: (r) => (r.conn.proxyProtocol ? portText(r.conn.proxyProtocol.srcPort) : undefined) },
  { name: 'proxy_protocol_server_addr', get: (r) => r.conn.proxyProtocol?.dstAddr },
  { name: 'proxy_protocol_server_port', get: (r) => (r.conn.proxyProtocol ? portText(r.conn.proxyProtocol.dstPort) : undefined) },
  { name: 'proxy_protocol_tlv_', prefix: true, get: (r, n) => proxyProtocolTlvText(r, n) },
  { name: 'remote_user', get: (r) => basicCredentials(r.headers.authorization)?.user },
  { name: 'scheme', get: (r) => r.scheme },
  { name: 'https', get: (r) => (r.scheme === 'https' ? 'on' : '') },
  { name: 'server_name', get: (r) => r.server.name },
  { name: 'server_port', get: (r) => portText(r.conn.localPort) },
  { name: 'server_addr', get: (r) => r.conn.localAddr },
  // not found for a request line nginx could not parse (an HTTP/0.9 request has none either)
  { name: 'server_protocol', get: (r) => r.protocol || undefined },
  { name: 'request', get: (r) => r.requestLine || undefined },
  // not found until the URI was processed (a bad request line, `/../x`): nginx sets `unparsed_uri` then
  { name: 'request_uri', get: (r) => (r.uri === '' ? undefined : r.requestUri) },
  { name: 'request_port', get: (r) => r.requestPort },
  { name: 'is_request_port', get: (r) => (r.requestPort ? ':' : '') },
  { name: 'uri', get: (r) => (r.mainMethod === '' ? undefined : r.uri) },
  { name: 'document_uri', get: (r) => (r.mainMethod === '' ? undefined : r.uri) },
  { name: 'document_root', get: (r) => r.documentRoot() },
  { name: 'realpath_root', get: (r) => r.documentRoot() },
  { name: 'request_filename', get: (r) => r.requestFilename() },
  // without arguments, "not found" (nginx's args.data is NULL without a `?`; jinx does not tell `/?` apart)
  {
    // ngx_http_variable_set_args: the request's arguments change, and so does the URI proxy_pass sends
    name: 'args', get: (r) => r.args || undefined, changeable: true,
    set: (r, value) => {
      r.args = value;
      r.validUnparsedUri = false;
      return undefined;
    },
  },
  { name: 'query_string', get: (r) => r.args || undefined },
  { name: 'is_args', get: (r) => (r.args ? '?' : '') },
  { name: 'request_method', get: (r) => r.mainMethod || undefined },
  { name: 'content_type', get: (r) => requestHeader(r, 'content_type') },
  { name: 'content_length', get: (r) => requestHeader(r, 'content_length') ?? (r.bodyLength === undefined ? undefined : String(r.bodyLength)) },
  { name: 'status', get: (r) => (r.status ? String(r.status).padStart(3, '0') : '000') },
  { name: 'body_bytes_sent', get: (r) => String(r.bodyBytesSent) },
  { name: 'bytes_sent', get: (r) => String(r.bytesSent) },
  { name: 'request_time', get: (r) => (r.elapsedMs() / 1000).toFixed(3) },
  { name: 'request_length', get: (r) => String(r.requestLength) },
  { name: 'time_local', get: () => timeLocal(Date.now()) },
  { name: 'time_iso8601', get: () => timeIso8601(Date.now()) },
  { name: 'msec', get: () => (Date.now() / 1000).toFixed(3) },
  { name: 'pid', get: () => String(process.pid) },
  { name: 'hostname', get: () => hostname() },
  { name: 'nginx_version', get: () => NGINX_VERSION },
  { name: 'connection', get: (r) => String(r.conn.id) },
  { name: 'connection_requests', get: (r) => String(r.conn.requests) },
  { name: 'connection_time', get: (r) => ((Date.now() - r.conn.acceptedAtMs) / 1000).toFixed(3) },
  { name: 'pipe', get: () => '.' },
  {
    name: 'request_id',
    get: (r) => {
      let id = requestIds.get(r);
      if (!id) requestIds.set(r, (id = randomBytes(16).toString('hex')));
      return id;
    },
  },
  { name: 'request_completion', get: (r) => (r.completed ? 'OK' : '') },
  { name: 'request_body', get: requestBody },
  { name: 'request_body_file', get: requestBodyFile },
  { name: 'tcpinfo_rtt', get: noTcpInfo },
  { name: 'tcpinfo_rttvar', get: noTcpInfo },
  { name: 'tcpinfo_snd_cwnd', get: noTcpInfo },
  { name: 'tcpinfo_rcv_space', get: noTcpInfo },
  // ngx_http_v2_vars (src/http/v2/ngx_http_v2_module.c)
  { name: 'http2', get: http2Protocol },
  {
    // ngx_http_variable_set_limit_rate: the rate the write filter then keeps
    name: 'limit_rate', get: (r) => String(r.limitRate), changeable: true,
    set: (r, value) => {
      const bytes = parseSize(value);
      if (bytes === undefined) return `invalid $limit_rate "${value}"`;
      r.limitRate = bytes;
      r.limitRateSet = true;
      return undefined;
    },
  },
  { name: 'proxy_host', get: (r) => r.proxyHost, changeable: true },
  // ngx_http_grpc_internal_trailers_variable: `trailers` when the client's TE lists it (sent upstream as TE)
  {
    name: 'grpc_internal_trailers',
    get: (r) => (requestHeader(r, 'te')?.split(',').some((t) => t.trim().toLowerCase() === 'trailers') ? 'trailers' : undefined),
  },
  { name: 'proxy_port', get: (r) => r.proxyPort, changeable: true },
  // ngx_http_proxy_vars: the body's framing of the upstream request, as the proxy module sends it
  { name: 'proxy_internal_body_length', get: proxyBodyLength },
  { name: 'proxy_internal_chunked', get: (r) => (proxyBodyLength(r) === undefined && hasBody(r) ? 'chunked' : undefined) },
  {
    name: 'proxy_add_x_forwarded_for',
    get: (r) => {
      const xff = requestHeader(r, 'x_forwarded_for');
      return xff === undefined ? r.clientAddr : `${xff}, ${r.clientAddr}`;
    },
  },
  // ngx_http_upstream_vars (src/http/ngx_http_upstream.c)
  { name: 'upstream_addr', get: perAttempt((s) => s.addr) },
  { name: 'upstream_status', get: perAttempt(statusText) },
  { name: 'upstream_connect_time', get: perAttempt((s) => seconds(s.connectTimeMs)) },
  { name: 'upstream_header_time', get: perAttempt((s) => seconds(s.headerTimeMs)) },
  { name: 'upstream_response_time', get: perAttempt((s) => seconds(s.responseTimeMs)) },
  { name: 'upstream_response_length', get: perAttempt((s) => String(s.responseLength)) },
  { name: 'upstream_bytes_received', get: perAttempt((s) => String(s.bytesReceived)) },
  { name: 'upstream_bytes_sent', get: perAttempt((s) => String(s.bytesSent)) },
  { name: 'upstream_cache_status', get: (r) => r.cacheStatus },
  { name: 'upstream_cache_last_modified', get: (r) => r.cacheValidators?.lastModified },
  { name: 'upstream_cache_etag', get: (r) => r.cacheValidators?.etag },
  { name: 'upstream_http_', prefix: true, get: (r, n) => upstreamField(r.upstream?.headers, n) },
  { name: 'upstream_trailer_', prefix: true, get: (r, n) => upstreamField(r.upstream?.trailers, n) },
  { name: 'upstream_cookie_', prefix: true, get: upstreamCookie },
  { name: 'gzip_ratio', get: gzipRatio },
  // ngx_http_limit_req_status_variable: the main request's
  { name: 'limit_req_status', get: (r) => (r.parent ?? r).limitReqStatus },
  // ngx_http_ssl_vars (src/http/modules/ngx_http_ssl_module.c), all changeable as there; not found without TLS
  { name: 'ssl_protocol', get: (r) => r.conn.tls?.protocol, changeable: true },
  { name: 'ssl_cipher', get: (r) => r.conn.tls?.cipher, changeable: true },
  { name: 'ssl_ciphers', get: (r) => r.conn.tls?.ciphers, changeable: true },
  { name: 'ssl_curve', get: (r) => r.conn.tls?.curve(r.server.tls?.preferServerCiphers ?? false, r.server.tls?.ecdhCurve), changeable: true },
  { name: 'ssl_curves', get: (r) => r.conn.tls?.curves, changeable: true },
  { name: 'ssl_sigalg', get: () => undefined, changeable: true },
  { name: 'ssl_session_id', get: (r) => r.conn.tls?.sessionId, changeable: true },
  { name: 'ssl_session_reused', get: (r) => (r.conn.tls ? (r.conn.tls.sessionReused ? 'r' : '.') : undefined), changeable: true },
  { name: 'ssl_early_data', get: () => undefined, changeable: true },
  { name: 'ssl_server_name', get: (r) => r.conn.tls?.serverName, changeable: true },
  { name: 'ssl_alpn_protocol', get: (r) => r.conn.tls?.alpnProtocol, changeable: true },
  { name: 'ssl_ech_status', get: () => undefined, changeable: true },
  { name: 'ssl_ech_outer_server_name', get: () => undefined, changeable: true },
  { name: 'ssl_client_cert', get: (r) => clientCertificate(r)?.tabbed, changeable: true },
  { name: 'ssl_client_raw_cert', get: (r) => clientCertificate(r)?.raw, changeable: true },
  { name: 'ssl_client_escaped_cert', get: (r) => clientCertificate(r)?.escaped, changeable: true },
  { name: 'ssl_client_s_dn', get: (r) => clientCertificate(r)?.subject || undefined, changeable: true },
  { name: 'ssl_client_i_dn', get: (r) => clientCertificate(r)?.issuer || undefined, changeable: true },
  { name: 'ssl_client_s_dn_legacy', get: (r) => clientCertificate(r)?.subjectLegacy || undefined, changeable: true },
  { name: 'ssl_client_i_dn_legacy', get: (r) => clientCertificate(r)?.issuerLegacy || undefined, changeable: true },
  { name: 'ssl_client_serial', get: (r) => clientCertificate(r)?.serial, changeable: true },
  { name: 'ssl_client_fingerprint', get: (r) => clientCertificate(r)?.fingerprint, changeable: true },
  { name: 'ssl_client_verify', get: (r) => (r.conn.tls ? (clientCertificate(r) ? r.conn.tls.verifyResult : 'NONE') : undefined), changeable: true },
  { name: 'ssl_client_v_start', get: (r) => clientCertificate(r)?.validFrom, changeable: true },
  { name: 'ssl_client_v_end', get: (r) => clientCertificate(r)?.validTo, changeable: true },
  { name: 'ssl_client_v_remain', get: (r) => clientCertificate(r)?.daysLeft(Date.now()), changeable: true },
  { name: 'ssl_client_sigalg', get: () => undefined, changeable: true },
  { name: 'fastcgi_script_name', get: (r) => fastcgiSplit(r).script },
  { name: 'fastcgi_path_info', get: (r) => fastcgiSplit(r).pathInfo },
];
