/**
 * `listen` of the http and stream modules (`ngx_http_core_listen` in
 * `src/http/ngx_http_core_module.c`, `ngx_stream_core_listen` in
 * `src/stream/ngx_stream_core_module.c`): the address as `ngx_parse_url`
 * reads it, then the parameters, with nginx 1.30's words and messages on
 * Linux.
 */
import { isIP } from 'node:net';
import { cString } from '../c-string.js';
import type { Directive } from '../parser/ast.js';
import { fail, parseNumber, parseSize, parseTime, type SetContext } from './spec.js';

/** A listening address. */
export interface ListenAddress {
  /** IP literal to bind, `0.0.0.0` or `::` for wildcards; `unix:PATH` for a unix domain socket. */
  readonly host: string;
  /** The TCP port; 0 for a unix domain socket. */
  readonly port: number;
  /** nginx's `addr_text`: `127.0.0.1:80`, `0.0.0.0:80`, `[::]:443`, `unix:/run/app.sock`. */
  readonly addrText: string;
  readonly wildcard: boolean;
  /** The socket file of a `unix:` address. */
  readonly unixPath?: string;
}

/** `sizeof(saun->sun_path)` on Linux: a unix socket's path and its NUL. */
const SUN_PATH_BYTES = 108;

/**
 * `ngx_parse_unix_domain_url` (`src/core/ngx_inet.c`): the path after
 * `unix:`, which must not be empty nor longer than `sun_path` holds;
 * `where` throws nginx's error for the directive (`no path in the unix
 * domain socket`, `too long path in the unix domain socket`, which it
 * completes with ` in upstream "…"` or ` in "…" of the "listen" directive`).
 */
export function parseUnixPath(text: string, where: (err: string) => never): string {
  const path = text.slice('unix:'.length);
  if (path.length === 0) where('no path in the unix domain socket');
  if (Buffer.byteLength(path) + 1 > SUN_PATH_BYTES) where('too long path in the unix domain socket');
  return path;
}

/**
 * `ngx_inet_addr` (`src/core/ngx_inet.c`): four decimal octets, each at most
 * 255, leading zeros and empty octets allowed (`127.0.0.010` is 127.0.0.10).
 */
function ngxInetAddr(text: string): number[] | undefined {
  const octets = text.split('.');
  if (octets.length !== 4 || !/^[\d.]*$/.test(text)) return undefined;
  const values = octets.map((o) => [...o].reduce((v, d) => (v > 255 ? v : v * 10 + Number(d)), 0));
  return values.every((v) => v <= 255) ? values : undefined;
}

/**
 * glibc's `inet_aton_exact`, which `getaddrinfo` applies to a numeric host:
 * one to four parts, each decimal, octal (`0…`) or hex (`0x…`), the last
 * filling the bytes left (`127.1`, `2130706433`), nothing after them.
 */
function inetAton(text: string): number[] | undefined {
  const parts = text.split('.');
  if (parts.length > 4) return undefined;
  const values: number[] = [];
  for (const p of parts) {
    const m = /^(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9]\d*)$/.exec(p);
    if (!m) return undefined;
    const v = /^0[xX]/.test(p) ? parseInt(p.slice(2), 16) : p.startsWith('0') ? parseInt(p, 8) || 0 : Number(p);
    values.push(v);
  }
  const last = values.pop()!;
  if (values.some((v) => v > 255) || last >= 2 ** (8 * (4 - values.length))) return undefined;
  const bytes = [...values];
  for (let i = 4 - values.length - 1; i >= 0; i--) bytes.push(Math.floor(last / 2 ** (8 * i)) % 256);
  return bytes;
}

/**
 * The IPv4 address a `listen` (or `resolver`) host names without DNS, as nginx finds it:
 * `ngx_inet_addr`, then `getaddrinfo` (numeric forms only: a `listen` name is
 * not looked up in jinx); undefined when it names none.
 */
export function ipv4Address(host: string): string | undefined {
  // getaddrinfo gets a C string: the host up to a NUL byte
  const bytes = ngxInetAddr(host) ?? inetAton(cString(host));
  return bytes?.join('.');
}

/**
 * Whether a `listen` value without `:` is a port (or `FIRST-LAST`): each part
 * a number for `ngx_atoi`; anything else, a number too large included, is
 * taken as a host name by `ngx_parse_inet_url`.
 */
function isPortOnly(text: string): boolean {
  const dash = text.indexOf('-');
  const parts = dash === -1 ? [text] : [text.slice(0, dash), text.slice(dash + 1)];
  return parts.every((p) => parseNumber(p) !== undefined);
}

/**
 * Parses `ADDRESS[:PORT]`, `PORT`, `*:PORT`, `[IPV6][:PORT]` and
 * `unix:PATH` (`ngx_parse_url` with `u->listen` set). A port range
 * `FIRST-LAST` (nginx 1.27.3) gives one address per port, in order.
 * @throws DirectiveFailure nginx's `invalid host`, `invalid port`, `invalid
 *   port range`, `host not found`, `no path in the unix domain socket` `in "TEXT" of the "listen" directive`
 */
export function parseListenAddress(text: string): ListenAddress[] {
  const bad = (what: string): never => fail(`${what} in "${text}" of the "listen" directive`);
  if (text.startsWith('unix:')) {
    const unixPath = parseUnixPath(text, bad);
    return [{ host: text, port: 0, addrText: text, wildcard: false, unixPath }];
  }
  let host: string;
  let portText: string;
  const v6 = /^\[([^\]]*)\](?::(.*))?$/.exec(text);
  if (v6) {
    host = v6[1]!;
    if (isIP(host) !== 6) bad('invalid host');
    portText = v6[2] ?? '80';
  } else if (isPortOnly(text)) {
    host = '0.0.0.0';
    portText = text;
  } else {
    const colon = text.indexOf(':');
    host = colon === -1 ? text : text.slice(0, colon);
    portText = colon === -1 ? '80' : text.slice(colon + 1);
  }
  // ngx_parse_inet_url: `FIRST-LAST`, each a port; a range that runs backwards is refused
  const range = /^(\d+)(?:-(\d+))?$/.exec(portText);
  const validPort = (p: string | undefined): boolean => p === undefined || (Number(p) >= 1 && Number(p) <= 65535);
  if (!range || !validPort(range[1]) || !validPort(range[2])) bad('invalid port');
  const first = Number(range![1]);
  const last = range![2] === undefined ? first : Number(range![2]);
  if (last < first) bad('invalid port range');
  if (host === '*') host = '0.0.0.0';
  else if (host === 'localhost') host = '127.0.0.1';
  else if (!v6) host = ipv4Address(host) ?? fail(`host not found in "${text}" of the "listen" directive`);
  const out: ListenAddress[] = [];
  for (let port = first; port <= last; port++) {
    const addrText = isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
    out.push({ host, port, addrText, wildcard: host === '0.0.0.0' || host === '::' });
  }
  return out;
}

/** What the parameters of a `listen` set. */
export interface ListenParams {
  readonly defaultServer: boolean;
  readonly ssl: boolean;
  readonly http2: boolean;
  /** Stream only: a UDP socket. */
  readonly udp: boolean;
  readonly ipv6only: boolean;
  /** `proxy_protocol`: every connection starts with a PROXY protocol header (`ngx_proxy_protocol.c`). */
  readonly proxyProtocol: boolean;
  /** Whether the directive sets socket options (nginx's `lsopt.set`): two servers may not both set them. */
  readonly setsOptions: boolean;
}

/** `so_keepalive=on|off|[IDLE][:[INTERVAL][:COUNT]]`, as `ngx_http_core_listen` reads it: not all three zero. */
function validKeepalive(v: string): boolean {
  if (v === 'on' || v === 'off') return true;
  const [idle = '', intvl = '', ...rest] = v.split(':');
  const cnt = rest.join(':');
  const idleSec = idle === '' ? 0 : parseTime(idle, true);
  const intvlSec = intvl === '' ? 0 : parseTime(intvl, true);
  const count = cnt === '' ? 0 : parseNumber(cnt);
  if (idleSec === undefined || intvlSec === undefined || count === undefined) return false;
  return idleSec + intvlSec + count > 0;
}

/**
 * Parses the words after the address. `kind` picks the module's words:
 * `default`, `http2` and `quic` are http's, `udp` is stream's.
 */
export function parseListenParams(d: Directive, kind: 'http' | 'stream', cx: SetContext): ListenParams {
  let defaultServer = false;
  let ssl = false;
  let http2 = false;
  let udp = false;
  let ipv6only = true;
  let setsOptions = false;
  let proxyProtocol = false;
  for (const p of d.args.slice(1)) {
    const eq = p.indexOf('=');
    const key = eq === -1 ? p : p.slice(0, eq + 1);
    const value = p.slice(eq + 1);
    switch (key) {
      case 'default_server':
        defaultServer = true;
        continue;
      case 'ssl':
        ssl = true;
        continue;
      case 'proxy_protocol':
        proxyProtocol = true;
        continue;
      case 'bind': case 'deferred': case 'reuseport': case 'multipath':
        setsOptions = true;
        continue;
      case 'fastopen=':
        if (parseNumber(value) === undefined) fail(`invalid fastopen "${p}"`);
        setsOptions = true;
        continue;
      case 'backlog=':
        if (!parseNumber(value)) fail(`invalid backlog "${p}"`);
        setsOptions = true;
        continue;
      case 'rcvbuf=': case 'sndbuf=':
        if (parseSize(value) === undefined) fail(`invalid ${key.slice(0, -1)} "${p}"`);
        setsOptions = true;
        continue;
      case 'so_keepalive=':
        if (!validKeepalive(value)) fail(`invalid so_keepalive value: "${value}"`);
        setsOptions = true;
        continue;
      case 'accept_filter=':
        cx.warn(`accept filters "${p}" are not supported on this platform, ignored`, 'listen-ignored');
        continue;
      case 'ipv6only=':
        if (value.startsWith('o')) {
          if (value !== 'on' && value !== 'off') fail(`invalid ipv6only flags "${value}"`);
          ipv6only = value === 'on';
          setsOptions = true;
          continue;
        }
        break;
      case 'default': case 'http2': case 'quic': case 'udp':
        if (kind === 'http' && key === 'default') {
          defaultServer = true;
          continue;
        }
        if (kind === 'http' && key === 'http2') {
          cx.warn('the "listen ... http2" directive is deprecated, use the "http2" directive instead', 'listen-http2-deprecated');
          http2 = true;
          continue;
        }
        if (kind === 'http' && key === 'quic') fail('the "quic" parameter requires ngx_http_v3_module');
        if (kind === 'stream' && key === 'udp') {
          udp = true;
          continue;
        }
        break;
    }
    fail(`invalid parameter "${p}"`);
  }
  return { defaultServer, ssl, http2, udp, ipv6only, setsOptions, proxyProtocol };
}
