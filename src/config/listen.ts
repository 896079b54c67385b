/**
 * `listen` of the http and stream modules (`ngx_http_core_listen` in
 * `src/http/ngx_http_core_module.c`, `ngx_stream_core_listen` in
 * `src/stream/ngx_stream_core_module.c`): the address as `ngx_parse_url`
 * reads it, then the parameters, with nginx 1.30's words and messages on
 * Linux.
 */
import { isIP } from 'node:net';
import type { Directive } from '../parser/ast.js';
import { fail, parseSize, parseTime, type SetContext } from './spec.js';

/** A listening address. */
export interface ListenAddress {
  /** IP literal to bind, `0.0.0.0` or `::` for wildcards. */
  readonly host: string;
  readonly port: number;
  /** nginx's `addr_text`: `127.0.0.1:80`, `0.0.0.0:80`, `[::]:443`. */
  readonly addrText: string;
  readonly wildcard: boolean;
}

/** What the parameters of a `listen` set. */
export interface ListenParams {
  readonly defaultServer: boolean;
  readonly ssl: boolean;
  readonly http2: boolean;
  /** Stream only: a UDP socket. */
  readonly udp: boolean;
  readonly ipv6only: boolean;
  /** Whether the directive sets socket options (nginx's `lsopt.set`): two servers may not both set them. */
  readonly setsOptions: boolean;
}

/** Parses `ADDRESS[:PORT]`, `PORT`, `*:PORT`, `[IPV6][:PORT]`. */
export function parseListenAddress(text: string): ListenAddress {
  const bad = (what: string): never => fail(`${what} in "${text}" of the "listen" directive`);
  let host: string;
  let portText: string;
  if (text.startsWith('unix:')) fail('unix domain sockets in "listen" are not supported by jinx');
  const v6 = /^\[([^\]]*)\](?::(.*))?$/.exec(text);
  if (v6) {
    host = v6[1]!;
    if (isIP(host) !== 6) bad('invalid host');
    portText = v6[2] ?? '80';
  } else if (/^\d+$/.test(text)) {
    host = '0.0.0.0';
    portText = text;
  } else {
    const colon = text.indexOf(':');
    host = colon === -1 ? text : text.slice(0, colon);
    portText = colon === -1 ? '80' : text.slice(colon + 1);
  }
  if (!/^\d+$/.test(portText) || Number(portText) < 1 || Number(portText) > 65535) bad('invalid port');
  if (host === '*') host = '0.0.0.0';
  else if (host === 'localhost') host = '127.0.0.1';
  else if (!v6 && isIP(host) !== 4) fail(`host not found in "${text}" of the "listen" directive`);
  const port = Number(portText);
  const addrText = isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
  return { host, port, addrText, wildcard: host === '0.0.0.0' || host === '::' };
}

/** `so_keepalive=on|off|[IDLE][:[INTERVAL][:COUNT]]`, as `ngx_http_core_listen` reads it: not all three zero. */
function validKeepalive(v: string): boolean {
  if (v === 'on' || v === 'off') return true;
  const [idle = '', intvl = '', ...rest] = v.split(':');
  const cnt = rest.join(':');
  const idleSec = idle === '' ? 0 : parseTime(idle, true);
  const intvlSec = intvl === '' ? 0 : parseTime(intvl, true);
  const count = cnt === '' ? 0 : /^\d+$/.test(cnt) ? Number(cnt) : undefined;
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
        continue;
      case 'bind': case 'deferred': case 'reuseport': case 'multipath':
        setsOptions = true;
        continue;
      case 'fastopen=':
        if (!/^\d+$/.test(value)) fail(`invalid fastopen "${p}"`);
        setsOptions = true;
        continue;
      case 'backlog=':
        if (!/^\d+$/.test(value) || Number(value) === 0) fail(`invalid backlog "${p}"`);
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
  return { defaultServer, ssl, http2, udp, ipv6only, setsOptions };
}
