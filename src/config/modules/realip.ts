/**
 * The realip module (`src/http/modules/ngx_http_realip_module.c`): the client
 * address taken from a header sent by a trusted proxy.
 */
import { HTTP_SRV_LOC } from '../flags.js';
import { parseCidr, type Cidr } from '../cidr.js';
import { DirectiveFailure, fail, flagSetter, listSlot, slot, type DirectiveSpec } from '../spec.js';

const REALIP = 'ngx_http_realip_module';

/** Trusted addresses (`set_real_ip_from`). */
export const realIpFrom = listSlot<Cidr | 'unix'>('set_real_ip_from');
/** Header carrying the client address; `X-Real-IP` by default. */
export const realIpHeader = slot<string>('real_ip_header', 'X-Real-IP');
export const realIpRecursive = slot('real_ip_recursive', false);

export const realIpDirectives: readonly DirectiveSpec[] = [
  {
    name: 'set_real_ip_from', module: REALIP, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      const text = d.args[0]!;
      if (text === 'unix:') {
        cx.level.append(realIpFrom, 'unix', d.loc);
        return;
      }
      const parsed = parseCidr(text);
      if (!parsed) fail(`host not found in set_real_ip_from "${text}"`);
      if (parsed.lowBitsSet) cx.warn(`low address bits of ${text} are meaningless`, 'low-address-bits');
      cx.level.append(realIpFrom, parsed.cidr, d.loc);
    },
  },
  {
    name: 'real_ip_header', module: REALIP, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(realIpHeader)) throw new DirectiveFailure('is duplicate');
      if (d.args[0] === 'proxy_protocol') fail('the "proxy_protocol" value of "real_ip_header" is not supported by jinx');
      cx.level.set(realIpHeader, d.args[0]!, d.loc);
    },
  },
  { name: 'real_ip_recursive', module: REALIP, contexts: HTTP_SRV_LOC, args: ['FLAG'], effect: 'runtime', set: flagSetter(realIpRecursive) },
];
