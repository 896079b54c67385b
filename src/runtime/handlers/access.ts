/**
 * `allow`/`deny` at the access phase (`ngx_http_access_handler`): the first
 * rule matching the client address decides (`unix:` matches clients on
 * unix domain sockets, `ngx_http_access_unix`); a deny is 403 with the error line
 * `access forbidden by rule` (logged here under `satisfy all`, by the access
 * phase under `satisfy any`).
 */
import { cidrContains } from '../../config/cidr.js';
import { logRequest } from '../context.js';
import type { Exchange } from '../exchange.js';

/** The result of one access check: allowed, refused with a status, or no opinion. */
export type AccessResult = 'ok' | 'declined' | number;

export function checkAccessRules(ex: Exchange): AccessResult {
  const { r } = ex;
  const rules = r.loc.access;
  if (rules.length === 0) return 'declined';
  for (const rule of rules) {
    const matches = rule.all
      || (rule.family === 'unix' ? r.clientAddr === 'unix:' : cidrContains({ family: rule.family as 'ipv4' | 'ipv6', bytes: rule.addr, prefixLength: rule.prefixLength }, r.clientAddr));
    if (!matches) continue;
    if (rule.allow) return 'ok';
    if (r.loc.satisfy === 'all') logRequest(ex.cx, r, 'error', 'access forbidden by rule');
    return 403;
  }
  return 'declined';
}
