/**
 * The realip module (`src/http/modules/ngx_http_realip_module.c`): the client
 * address taken from a header sent by a trusted proxy, or from the PROXY
 * protocol header of the connection (`real_ip_header proxy_protocol`).
 * Trusted proxies (`set_real_ip_from`) are addresses, CIDR ranges, host
 * names (every address they resolve to, when the configuration is read), or
 * `unix:` for clients on unix domain sockets.
 */
import { HTTP_SRV_LOC } from '../flags.js';
import { parseCidr, type Cidr } from '../cidr.js';
import { DirectiveFailure, fail, flagSetter, listSlot, slot, type DirectiveSpec } from '../spec.js';
import type { ConfChain } from '../spec.js';

const REALIP = 'ngx_http_realip_module';

/** Trusted addresses (`set_real_ip_from`). */
export const realIpFrom = listSlot<Cidr | 'unix'>('set_real_ip_from');
/**
 * Header carrying the client address; `X-Real-IP` by default;
 * `proxy_protocol` takes the address and port of the connection's PROXY protocol header.
 */
export const realIpHeader = slot<string>('real_ip_header', 'X-Real-IP');
export const realIpRecursive = slot('real_ip_recursive', false);

export const realIpDirectives: readonly DirectiveSpec[] = [
  {
    name: 'set_real_ip_from', module: REALIP, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', resolves: 'name',
    set: (d, cx) => {
      const text = d.args[0]!;
      if (text === 'unix:') {
        cx.level.append(realIpFrom, 'unix', d.loc);
        return;
      }
      const parsed = parseCidr(text);
      if (parsed) {
        if (parsed.lowBitsSet) cx.warn(`low address bits of ${text} are meaningless`, 'low-address-bits');
        cx.level.append(realIpFrom, parsed.cidr, d.loc);
        return;
      }
      // ngx_inet_resolve_host: every address of the name, each an exact match
      const addrs = text.includes('/') ? undefined : cx.scope.hosts.lookup(text);
      if (!addrs) fail(`host not found in set_real_ip_from "${text}"`);
      for (const addr of addrs) cx.level.append(realIpFrom, parseCidr(addr)!.cidr, d.loc);
    },
  },
  {
    name: 'real_ip_header', module: REALIP, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(realIpHeader)) throw new DirectiveFailure('is duplicate');
      cx.level.set(realIpHeader, d.args[0]!, d.loc);
    },
  },
  { name: 'real_ip_recursive', module: REALIP, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(realIpRecursive) },
];

/** Real client address settings of the realip module. */
export interface RealIpConf {
  readonly from: readonly (Cidr | 'unix')[];
  /** Header name, lowercase. */
  readonly header: string;
  /** `real_ip_header proxy_protocol`: the address and port come from the connection's PROXY protocol header. */
  readonly proxyProtocol: boolean;
  readonly recursive: boolean;
}

/** The realip settings of a level (`ngx_http_realip_merge_loc_conf`); undefined without `set_real_ip_from`. */
export function realIpConf(c: ConfChain): RealIpConf | undefined {
  const from = c.list(realIpFrom);
  if (from.length === 0) return undefined;
  return { from, header: c.get(realIpHeader).toLowerCase(), proxyProtocol: c.get(realIpHeader) === 'proxy_protocol', recursive: c.get(realIpRecursive) };
}
