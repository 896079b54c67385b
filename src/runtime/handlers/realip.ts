/**
 * The client address from a trusted proxy's header
 * (`ngx_http_realip_handler` in `ngx_http_realip_module.c`): when the peer is
 * in `set_real_ip_from`, `$remote_addr` becomes the address in
 * `real_ip_header`; for `X-Forwarded-For` the rightmost address, or with
 * `real_ip_recursive on` the rightmost one not trusted; for `proxy_protocol`
 * the source address and port of the connection's PROXY protocol header.
 */
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { RealIpConf } from '../../config/route-table.js';
import { cidrContains } from '../../config/cidr.js';
import type { HttpRequestState } from '../request.js';

/** `ngx_cidr_match`: whether an address (`unix:` for a unix domain socket's peer) is in `set_real_ip_from`. */
const trusted = (conf: RealIpConf, addr: string): boolean =>
  conf.from.some((c) => (c === 'unix' ? addr === 'unix:' : cidrContains(c, addr)));

/**
 * `ngx_parse_addr_port`: an IP with an optional port (`1.2.3.4:80`,
 * `[::1]:80`); the address as `ngx_sock_ntop` prints it again (IPv6
 * lowercase and compressed), or undefined.
 */
function parseAddrPort(text: string): string | undefined {
  const v6 = /^\[([^\]]+)\](?::\d+)?$/.exec(text);
  let addr: string | undefined;
  if (v6) addr = isIP(v6[1]!) === 6 ? v6[1] : undefined;
  else if (isIP(text)) addr = text;
  else {
    const m = /^([^:]+):\d+$/.exec(text);
    addr = m && isIP(m[1]!) === 4 ? m[1] : undefined;
  }
  if (addr === undefined) return undefined;
  return isIP(addr) === 6 ? ipaddr.IPv6.parse(addr).toRFC5952String() : addr;
}

/**
 * Applies the realip settings of the request's current configuration, once
 * per request: at post-read with the server's settings, else at preaccess
 * with the location's (`ngx_http_realip_handler`). X-Forwarded-For is walked
 * from the right while the address is trusted (`ngx_http_get_forwarded_addr`);
 * an entry that is not an address ends the walk at the last good one.
 */
export function realClientAddress(r: HttpRequestState): void {
  const conf = r.loc.realIp;
  if (!conf || r.realIpApplied || !trusted(conf, r.conn.peerAddr)) return;
  if (conf.proxyProtocol) {
    // NGX_HTTP_REALIP_PROXY: the header's source address, and its port (ngx_http_realip_set_addr)
    const pp = r.conn.proxyProtocol;
    const addr = pp && parseAddrPort(pp.srcAddr);
    if (!pp || !addr) return;
    r.realIpApplied = true;
    r.clientAddr = addr;
    r.clientPort = pp.srcPort;
    return;
  }
  const raw = r.headers[conf.header];
  if (raw === undefined) return;
  const value = Array.isArray(raw) ? raw.join(', ') : raw;
  let addr: string | undefined;
  if (conf.header === 'x-forwarded-for') {
    const list = value.split(/[ ,]+/).filter(Boolean);
    let current = r.conn.peerAddr;
    for (let i = list.length - 1; i >= 0; i--) {
      if (!trusted(conf, current)) break;
      const parsed = parseAddrPort(list[i]!);
      if (!parsed) break;
      addr = current = parsed;
      if (!conf.recursive) break;
    }
  } else addr = parseAddrPort(value.trim());
  if (!addr) return;
  r.realIpApplied = true;
  r.clientAddr = addr;
  r.clientPort = 0;
}
