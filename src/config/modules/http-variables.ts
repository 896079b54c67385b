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
import type { HttpRequestState } from '../../runtime/request.js';
import { NGINX_VERSION } from '../../version.js';
import { fastcgiSplit } from '../../runtime/fastcgi-split.js';
import { basicCredentials } from '../../runtime/credentials.js';
import type { ClientCertificate } from '../../runtime/tls-details.js';

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

/** A request header by its variable name (`http_user_agent` → `user-agent`); repeated headers are joined. */
function requestHeader(r: HttpRequestState, name: string): string | undefined {
  const key = name.replace(/_/g, '-');
  const v = r.headers[key];
  if (v === undefined) return undefined;
  if (Array.isArray(v)) return v.join(key === 'cookie' ? '; ' : ', ');
  return v;
}

/** One argument of the query string (`$arg_NAME`), matched case-insensitively as nginx does. */
function argument(args: string, name: string): string | undefined {
  if (!args) return undefined;
  for (const pair of args.split('&')) {
    const eq = pair.indexOf('=');
    const key = eq === -1 ? pair : pair.slice(0, eq);
    if (key.toLowerCase() === name) return eq === -1 ? '' : pair.slice(eq + 1);
  }
  return undefined;
}

/** One cookie (`$cookie_NAME`). */
function cookie(r: HttpRequestState, name: string): string | undefined {
  const raw = r.headers.cookie;
  if (raw === undefined) return undefined;
  for (const part of (Array.isArray(raw) ? raw.join('; ') : raw).split(';')) {
    const t = part.trim();
    const eq = t.indexOf('=');
    if (eq !== -1 && t.slice(0, eq).toLowerCase() === name) return t.slice(eq + 1);
  }
  return undefined;
}

function sentHeader(r: HttpRequestState, name: string): string | undefined {
  const v = r.sentHeaders[name.replace(/_/g, '-')];
  if (v === undefined) return undefined;
  return Array.isArray(v) ? v.join(', ') : String(v);
}

/** `$upstream_http_NAME`: the upstream's header(s) of that name, joined with ", ". */
function upstreamHeader(r: HttpRequestState, name: string): string | undefined {
  const raw = r.upstream?.headers;
  if (!raw) return undefined;
  const wanted = name.replace(/_/g, '-');
  let out: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length === wanted.length && raw[i]!.toLowerCase() === wanted) out = out === undefined ? raw[i + 1]! : `${out}, ${raw[i + 1]!}`;
  }
  return out;
}

/** `$upstream_response_time` and the like: seconds with millisecond resolution. */
function upstreamTime(r: HttpRequestState): string | undefined {
  const ms = r.upstream?.headerTimeMs;
  return ms === undefined ? undefined : (ms / 1000).toFixed(3);
}

/** `$upstream_addr`: every peer tried, comma-separated. */
function upstreamAddr(r: HttpRequestState): string | undefined {
  const up = r.upstream;
  if (!up) return undefined;
  return up.earlier ? `${up.earlier.addrs}, ${up.addr}` : up.addr;
}

/** `$upstream_status`: the status of every attempt, comma-separated (`-` when none arrived). */
function upstreamStatus(r: HttpRequestState): string | undefined {
  const up = r.upstream;
  if (!up) return undefined;
  const status = up.status === undefined ? '-' : String(up.status);
  if (up.earlier) return `${up.earlier.statuses}, ${status}`;
  return up.status === undefined ? undefined : status;
}

/**
 * The client certificate of the request's connection, when the server asks
 * for one (`ssl_verify_client`): Node.js asks for it on every handshake of
 * an address where some server does (README, "Differences from nginx"), and
 * a server that does not ask ignores it, as if it had not been sent.
 */
function clientCertificate(r: HttpRequestState): ClientCertificate | undefined {
  if ((r.server.tls?.verifyClient ?? 'off') === 'off') return undefined;
  return r.conn.tls?.clientCertificate;
}

const requestIds = new WeakMap<HttpRequestState, string>();

/** The variables jinx defines. */
export const httpVariables: readonly VariableDef[] = [
  { name: 'http_', prefix: true, get: requestHeader },
  { name: 'arg_', prefix: true, get: (r, n) => argument(r.args, n) },
  { name: 'cookie_', prefix: true, get: cookie },
  { name: 'sent_http_', prefix: true, get: sentHeader },
  { name: 'upstream_http_', prefix: true, get: upstreamHeader },
  { name: 'host', get: (r) => r.host },
  { name: 'remote_addr', get: (r) => r.clientAddr },
  { name: 'remote_port', get: (r) => String(r.clientPort) },
  {
    name: 'binary_remote_addr',
    get: (r) => (isIP(r.clientAddr) === 4 ? Buffer.from(r.clientAddr.split('.').map(Number)).toString('latin1') : r.clientAddr),
  },
  { name: 'realip_remote_addr', get: (r) => r.conn.peerAddr },
  { name: 'realip_remote_port', get: (r) => String(r.conn.peerPort) },
  { name: 'remote_user', get: (r) => basicCredentials(r.headers.authorization)?.user },
  { name: 'scheme', get: (r) => r.scheme },
  { name: 'https', get: (r) => (r.scheme === 'https' ? 'on' : '') },
  { name: 'server_name', get: (r) => r.server.name },
  { name: 'server_port', get: (r) => String(r.conn.localPort) },
  { name: 'server_addr', get: (r) => r.conn.localAddr },
  { name: 'server_protocol', get: (r) => r.protocol },
  { name: 'request', get: (r) => r.requestLine || undefined },
  { name: 'request_uri', get: (r) => r.requestUri },
  { name: 'request_port', get: (r) => r.requestPort },
  { name: 'is_request_port', get: (r) => (r.requestPort ? ':' : '') },
  { name: 'uri', get: (r) => r.uri },
  { name: 'document_uri', get: (r) => r.uri },
  { name: 'document_root', get: (r) => r.documentRoot() },
  { name: 'realpath_root', get: (r) => r.documentRoot() },
  { name: 'request_filename', get: (r) => r.requestFilename() },
  { name: 'args', get: (r) => r.args, changeable: true },
  { name: 'query_string', get: (r) => r.args },
  { name: 'is_args', get: (r) => (r.args ? '?' : '') },
  { name: 'request_method', get: (r) => r.mainMethod },
  { name: 'content_type', get: (r) => requestHeader(r, 'content_type') },
  { name: 'content_length', get: (r) => requestHeader(r, 'content_length') ?? (r.bodyLength === undefined ? undefined : String(r.bodyLength)) },
  { name: 'status', get: (r) => (r.status ? String(r.status).padStart(3, '0') : '000') },
  { name: 'body_bytes_sent', get: (r) => String(r.bodyBytesSent) },
  { name: 'bytes_sent', get: (r) => String(r.bytesSent) },
  { name: 'request_time', get: (r) => ((Date.now() - r.startMs) / 1000).toFixed(3) },
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
  { name: 'limit_rate', get: () => '0', changeable: true },
  { name: 'proxy_host', get: (r) => r.proxyHost },
  { name: 'proxy_port', get: (r) => r.proxyPort },
  {
    name: 'proxy_add_x_forwarded_for',
    get: (r) => {
      const xff = requestHeader(r, 'x_forwarded_for');
      return xff === undefined ? r.clientAddr : `${xff}, ${r.clientAddr}`;
    },
  },
  { name: 'upstream_addr', get: upstreamAddr },
  { name: 'upstream_status', get: upstreamStatus },
  { name: 'upstream_cache_status', get: () => undefined },
  { name: 'upstream_response_time', get: upstreamTime },
  { name: 'upstream_connect_time', get: upstreamTime },
  { name: 'upstream_header_time', get: upstreamTime },
  { name: 'gzip_ratio', get: () => undefined },
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
