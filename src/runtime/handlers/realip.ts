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

/** Applies the realip settings of the request's current configuration. */
export function realClientAddress(r: HttpRequestState): void {
  const conf = r.loc.realIp;
  if (!conf || !trusted(conf, r.conn.peerAddr)) return;
  const raw = r.headers[conf.header];
  if (raw === undefined) return;
  const value = Array.isArray(raw) ? raw.join(', ') : raw;
  let addr: string | undefined;
  if (conf.header === 'x-forwarded-for') {
    const list = value.split(',').map((s) => s.trim()).filter(Boolean);
    for (let i = list.length - 1; i >= 0; i--) {
      addr = list[i];
      if (!conf.recursive || !addr || !trusted(conf, addr)) break;
    }
  } else addr = value.trim();
  if (!addr || !isIP(addr)) return;
  r.clientAddr = addr;
  r.clientPort = 0;
}
