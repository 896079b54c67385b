/**
 * The access module (`src/http/modules/ngx_http_access_module.c`):
 * `allow` and `deny`, checked in order; the first match decides.
 */
import { isIP } from 'node:net';
import type { Directive } from '../../parser/ast.js';
import { parseCidr, type Cidr } from '../cidr.js';
import { fail, listSlot, type DirectiveSpec, type SetContext } from '../spec.js';
import type { ConfChain } from '../spec.js';

const ACCESS = 'ngx_http_access_module';

/** One `allow`/`deny` rule: `all`, `unix:`, or an address range. */
export interface AccessRuleDef {
  readonly allow: boolean;
  readonly match: 'all' | 'unix' | Cidr;
  readonly text: string;
}

/** Both directives append to one list, so their order is kept. */
export const accessRules = listSlot<AccessRuleDef>('allow/deny');

/** Parses an address argument as `ngx_http_access_rule` does, warning about host bits. */
export function parseRuleAddress(d: Directive, cx: SetContext): AccessRuleDef['match'] {
  const text = d.args[0]!;
  if (text === 'all') return 'all';
  if (text === 'unix:') return 'unix';
  // ngx_ptocidr takes dotted quads and IPv6 only, not the short forms inet_aton() would
  const parsed = isIP(text.split('/')[0]!) !== 0 ? parseCidr(text) : undefined;
  if (!parsed) fail(`invalid parameter "${text}"`);
  if (parsed.lowBitsSet) cx.warn(`low address bits of ${text} are meaningless`, 'low-address-bits');
  return parsed.cidr;
}

const setRule = (d: Directive, cx: SetContext): void =>
  cx.level.append(accessRules, { allow: d.name === 'allow', match: parseRuleAddress(d, cx), text: d.args[0]! }, d.loc);

export const accessDirectives: readonly DirectiveSpec[] = [
  { name: 'allow', module: ACCESS, contexts: ['http', 'server', 'location', 'limit_except'], args: ['TAKE1'], effect: 'runtime', set: setRule },
  { name: 'deny', module: ACCESS, contexts: ['http', 'server', 'location', 'limit_except'], args: ['TAKE1'], effect: 'runtime', set: setRule },
];

/** One entry of an `allow`/`deny` list. */
export interface AccessRule {
  readonly allow: boolean;
  /** `all`, or an address with prefix length. */
  readonly all: boolean;
  readonly family: 'ipv4' | 'ipv6' | 'unix' | 'all';
  readonly addr: readonly number[];
  readonly prefixLength: number;
  readonly text: string;
}

/** The `allow`/`deny` rules of a level (`ngx_http_access_merge_loc_conf`). */
export function accessConf(c: ConfChain): AccessRule[] {
  return c.list(accessRules).map((r): AccessRule => ({
    allow: r.allow,
    all: r.match === 'all',
    family: r.match === 'all' ? 'all' : r.match === 'unix' ? 'unix' : r.match.family,
    addr: typeof r.match === 'string' ? [] : r.match.bytes,
    prefixLength: typeof r.match === 'string' ? 0 : r.match.prefixLength,
    text: r.text,
  }));
}
