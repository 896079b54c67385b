/**
 * The client address from a trusted proxy's header
 * (`ngx_http_realip_handler` in `ngx_http_realip_module.c`): when the peer is
 * in `set_real_ip_from`, `$remote_addr` becomes the address in
 * `real_ip_header`; for `X-Forwarded-For` the rightmost address, or with
 * `real_ip_recursive on` the rightmost one not trusted.
 */
import { isIP } from 'node:net';
import type { RealIpConf } from '../../config/route-table.js';
import { cidrContains } from '../../config/cidr.js';
import type { HttpRequestState } from '../request.js';

const trusted = (conf: RealIpConf, addr: string): boolean =>
  conf.from.some((c) => c !== 'unix' && cidrContains(c, addr));

/** `ngx_parse_addr_port`: an IP with an optional port (`1.2.3.4:80`, `[::1]:80`); the address or undefined. */
function parseAddrPort(text: string): string | undefined {
  const v6 = /^\[([^\]]+)\](?::\d+)?$/.exec(text);
  if (v6) return isIP(v6[1]!) === 6 ? v6[1] : undefined;
  if (isIP(text)) return text;
  const m = /^([^:]+):\d+$/.exec(text);
  return m && isIP(m[1]!) === 4 ? m[1] : undefined;
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
