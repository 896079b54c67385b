/**
 * The userid header filter (`ngx_http_userid_filter` in
 * `src/http/modules/ngx_http_userid_filter_module.c`): with `userid on` or
 * `v1`, a main request's response of any status gets the `Set-Cookie` (and
 * `P3P`) that `useridHeaders` makes, after the headers module's own. The
 * cookie, the identifiers and `$uid_*` are the config module's
 * (`src/config/modules/userid.ts`).
 */
import { useridHeaders } from '../../config/modules/userid.js';
import type { HeaderFilter } from './types.js';

/** Adds the userid cookie to the response's headers; never changes the body. */
export const useridHeaderFilter: HeaderFilter = (f, _status, headers) => {
  const { r } = f;
  const conf = r.loc.userid;
  if (r.parent || conf.enable === 'off' || conf.enable === 'log') return undefined;
  headers.push(...useridHeaders(r, conf));
  return undefined;
};
